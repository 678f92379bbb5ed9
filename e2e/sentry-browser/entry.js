// The test page's copy of the real @sentry/browser (npm, unchanged),
// bundled by esbuild at test time into a temporary directory
// (e2e/sentry_browser_test.go); the bundle is never committed.
import * as Sentry from "@sentry/browser";

window.Sentry = Sentry;
