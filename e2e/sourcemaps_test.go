//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// shopSources is a small front-end: src/app.js calls src/cart.js, which
// formats with a library from node_modules. build 2's entry adds a banner
// module, so the minifier names every function anew.
var shopSources = map[string]string{
	"src/cart.js": `import { money } from "tinyfmt";

// The cart's total, in cents.
export function totalOf(cart) {
  let sum = 0;
  for (const item of cart.items) {
    sum += item.price * item.qty;
  }
  return sum;
}

export function renderCart(cart) {
  const total = totalOf(cart);
  return "Total: " + money(total);
}
`,
	"src/app.js": `import { renderCart } from "./cart.js";

export function checkout(state) {
  const cart = state.carts[state.current];
  return renderCart(cart);
}

globalThis.shop = { checkout };
`,
	"src/app2.js": `import "./app.js";

function bannerText(user, count, when) {
  const parts = [user, count, when].filter(Boolean);
  return parts.join(" · ");
}
globalThis.banner = bannerText;
`,
	"node_modules/tinyfmt/package.json": `{"name":"tinyfmt","version":"1.0.0","main":"index.js"}`,
	"node_modules/tinyfmt/index.js": `export function money(cents) {
  return (cents / 100).toFixed(2);
}
`,
}

// buildShop writes the sources into a temporary directory and bundles and
// minifies entry with esbuild into dist/assets/app.js (+ its map). Build
// outputs live only in t.TempDir().
func buildShop(t *testing.T, entry string, extra map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range shopSources {
		writeFile(t, filepath.Join(dir, name), text)
	}
	for name, text := range extra {
		writeFile(t, filepath.Join(dir, name), text)
	}
	esbuild, _ := filepath.Abs("../node_modules/.bin/esbuild")
	run(t, dir, nil, esbuild, entry, "--bundle", "--minify", "--sourcemap", "--format=iife", "--outfile=dist/assets/app.js")
	return dir
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// run runs a command in dir and returns its standard output.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s\n%s", filepath.Base(name), strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// sentryCLIEnv is the environment a build gives the real sentry-cli.
func sentryCLIEnv(s *server) []string {
	return []string{"SENTRY_URL=" + s.URL, "SENTRY_AUTH_TOKEN=" + s.Token, "SENTRY_ORG=acme", "SENTRY_PROJECT=shop",
		"SENTRY_LOAD_DOTENV=0", "SENTRY_DISABLE_UPDATE_CHECK=true", "SENTRY_NO_PROGRESS_BAR=1"}
}

// uploadShop runs `sentry-cli sourcemaps inject` and `upload` (the real
// binary from node_modules, unchanged) on a build.
func uploadShop(t *testing.T, s *server, dir, release string) {
	t.Helper()
	cli, _ := filepath.Abs("../node_modules/.bin/sentry-cli")
	run(t, dir, sentryCLIEnv(s), cli, "sourcemaps", "inject", "dist")
	out := run(t, dir, sentryCLIEnv(s), cli, "sourcemaps", "upload", "--release", release, "dist")
	if !strings.Contains(out, "File processing complete") {
		t.Fatalf("sentry-cli upload said:\n%s", out)
	}
}

var v8Frame = regexp.MustCompile(`at (?:(.+?) \()?(https?://[^\s()]+):(\d+):(\d+)\)?$`)

// throwShop runs the build as a page would and returns a Sentry event of
// its fault, shaped as @sentry/browser sends it: frames outermost first
// with filename, abs_path, lineno, colno; debug_meta from the debug ids
// the injected snippet registered.
func throwShop(t *testing.T, dir, release string) []byte {
	t.Helper()
	out := run(t, ".", nil, "node", "sourcemaps/throw.cjs", filepath.Join(dir, "dist/assets/app.js"), "http://shop.test/assets/app.js")
	var thrown struct {
		Type, Message, Stack string
		Images               []map[string]string
	}
	if err := json.Unmarshal([]byte(out), &thrown); err != nil {
		t.Fatalf("node printed %q: %v", out, err)
	}
	var frames []any
	for _, line := range strings.Split(thrown.Stack, "\n") {
		m := v8Frame.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		ln, _ := strconv.Atoi(m[3])
		col, _ := strconv.Atoi(m[4])
		frames = append([]any{map[string]any{"filename": m[2], "abs_path": m[2], "function": m[1], "lineno": ln, "colno": col, "in_app": true}}, frames...)
	}
	if len(frames) < 3 {
		t.Fatalf("stack %q", thrown.Stack)
	}
	id := strings.ReplaceAll(fmt.Sprintf("%x", time.Now().UnixNano())+"00000000000000000000000000000000", "-", "")[:32]
	ev := map[string]any{"event_id": id, "platform": "javascript", "level": "error", "release": release, "environment": "production",
		"sdk": map[string]any{"name": "sentry.javascript.browser", "version": "11.12.0"},
		"exception": map[string]any{"values": []any{map[string]any{"type": thrown.Type, "value": thrown.Message,
			"stacktrace": map[string]any{"frames": frames}}}}}
	if len(thrown.Images) > 0 {
		ev["debug_meta"] = map[string]any{"images": thrown.Images}
	}
	raw, _ := json.Marshal(ev)
	return raw
}

// sendEnvelope posts one event to the Sentry door with a server key.
func sendEnvelope(t *testing.T, s *server, number int64, key string, ev []byte) {
	t.Helper()
	body := "{}\n" + `{"type":"event","length":` + strconv.Itoa(len(ev)) + "}\n" + string(ev) + "\n"
	req, _ := http.NewRequest("POST", s.URL+"/api/"+strconv.FormatInt(number, 10)+"/envelope/", strings.NewReader(body))
	req.Header.Set("X-Sentry-Auth", "Sentry sentry_version=7, sentry_client=sentry.javascript.browser/11.12.0, sentry_key="+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("envelope: %d", res.StatusCode)
	}
}

// The real sentry-cli uploads two builds of the same front-end (inject,
// then upload with a release), and the fault thrown from deep in each
// minified build lands in ONE incident whose title and top in-app frame
// name the original file, line and function.
func TestSourceMapsSentryCLI(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	proj := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{"slug": "shop", "name": "Shop", "repo_url": "file:///nowhere",
		"default_branch": "main", "run_command": "true"})
	pid := proj["id"].(string)
	number := int64(proj["number"].(float64))
	conn := apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/connections", map[string]any{"name": "web"})
	apiJSON(t, s, "PUT", "/api/private/projects/"+pid+"/bindings/production", map[string]any{"repair_policy": "observe"})
	key := conn["token"].(string)

	builds := []struct{ entry, release string }{{"src/app.js", "shop@1"}, {"src/app2.js", "shop@2"}}
	for i, bd := range builds {
		dir := buildShop(t, bd.entry, nil)
		uploadShop(t, s, dir, bd.release)
		ups := apiJSON(t, s, "GET", "/api/private/projects/"+pid+"/sourcemaps", nil)["uploads"].([]any)
		if len(ups) != i+1 || ups[0].(map[string]any)["release"] != bd.release || ups[0].(map[string]any)["via"] != "sentry-cli" {
			t.Fatalf("uploads after %s: %v", bd.release, ups)
		}
		sendEnvelope(t, s, number, key, throwShop(t, dir, bd.release))
	}

	// The second event's count follows it by a fold (docs/feed.md, "The
	// write path and its costs"): read until it has, within a bound.
	var items []any
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		list := apiJSON(t, s, "GET", "/api/private/incidents?project_id="+pid, nil)
		items, _ = list["incidents"].([]any)
		if len(items) != 1 || items[0].(map[string]any)["event_count"] == 2.0 || time.Now().After(deadline) {
			break
		}
	}
	if len(items) != 1 {
		t.Fatalf("want ONE incident for both builds, got %v", items)
	}
	inc := items[0].(map[string]any)
	if title, _ := inc["title"].(string); !strings.Contains(title, "at totalOf (src/cart.js:6)") {
		t.Fatalf("incident title %q", title)
	}
	if n, _ := inc["event_count"].(float64); n != 2 {
		t.Fatalf("event_count %v", inc["event_count"])
	}
	d := apiJSON(t, s, "GET", "/api/private/incidents/"+inc["id"].(string), nil)
	frames := d["latest_event"].(map[string]any)["exception"].(map[string]any)["stacktrace"].([]any)
	top := frames[0].(map[string]any)
	if top["file"] != "src/cart.js" || top["line"] != float64(6) || top["function"] != "totalOf" || top["in_app"] != true {
		t.Fatalf("top frame %v", top)
	}
	if !strings.Contains(top["context_code"].(string), "cart.items") {
		t.Fatalf("context %v", top["context_code"])
	}
	if raw := top["symbolication"].(map[string]any)["raw"].(map[string]any); raw["file"] != "http://shop.test/assets/app.js" {
		t.Fatalf("raw frame %v", raw)
	}
}
