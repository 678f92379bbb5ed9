// Reports through @sentry/node, unmodified, to the DSN in SENTRY_DSN: one
// captured exception and one message, then flushes. Run by
// e2e/sentry_node_test.go against a real anvil server; it prints the two
// event ids as JSON so that the test can look for them.
import * as Sentry from "@sentry/node";

Sentry.init({
  dsn: process.env.SENTRY_DSN,
  environment: "production",
  release: "shop@2.0.0",
  serverName: "shop-node",
  defaultIntegrations: false,
});

function chargeCart(cart) {
  return cart.total();
}

let exceptionId;
try {
  chargeCart(null);
} catch (err) {
  exceptionId = Sentry.captureException(err);
}
const messageId = Sentry.captureMessage("queue backlog above 1000", "warning");
const flushed = await Sentry.flush(10000);
if (!flushed) {
  console.error("flush timed out");
  process.exit(1);
}
console.log(JSON.stringify({ exceptionId, messageId }));
