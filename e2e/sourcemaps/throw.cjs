// Runs a minified build as a page would load it (its URL as the script's
// name), calls into it so that it throws from deep inside, and prints the
// V8 stack and the debug ids `sentry-cli sourcemaps inject` registered —
// what @sentry/browser reads to fill an event's frames and debug_meta.
const fs = require("fs");
const vm = require("vm");
const [file, url] = process.argv.slice(2);
vm.runInThisContext(fs.readFileSync(file, "utf8"), { filename: url });
try {
  globalThis.shop.checkout({ carts: {}, current: "x" });
} catch (e) {
  const images = [];
  for (const [stack, id] of Object.entries(globalThis._sentryDebugIds || {})) {
    const m = stack.match(/(https?:\/\/[^\s)]+?\.js)/);
    if (m) images.push({ type: "sourcemap", debug_id: id, code_file: m[1] });
  }
  console.log(JSON.stringify({ type: e.name, message: e.message, stack: e.stack, images }));
}
