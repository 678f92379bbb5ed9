//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/playwright-community/playwright-go"
)

// consoleWatch collects what the browser reports as wrong on a page:
// console errors (Chromium logs every CSP refusal as one), uncaught
// exceptions, and securitypolicyviolation events.
type consoleWatch struct {
	mu   sync.Mutex
	errs []string
}

func (w *consoleWatch) add(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, s)
}

// take returns what was collected and starts afresh.
func (w *consoleWatch) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.errs
	w.errs = nil
	return out
}

func watchConsole(t *testing.T, page playwright.Page) *consoleWatch {
	t.Helper()
	w := &consoleWatch{}
	page.OnConsole(func(m playwright.ConsoleMessage) {
		if m.Type() == "error" {
			w.add("console: " + m.Text())
		}
	})
	page.OnPageError(func(err error) { w.add("uncaught: " + err.Error()) })
	must(t, page.AddInitScript(playwright.Script{Content: playwright.String(`
		document.addEventListener("securitypolicyviolation", (e) => {
			console.error("CSP violation: " + e.violatedDirective + " " + (e.blockedURI || "inline") + " at " + e.sourceFile + ":" + e.lineNumber);
		});`)}), "add the CSP listener")
	return w
}

// Every main page of the cockpit, as a signed-in owner, loads without a
// console error or a CSP violation: no inline handler, no inline style (not
// even htmx's indicator styles), an icon. The token revoke form still asks
// first, through static/app.js.
func TestPagesRespectTheCSP(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	page := newPage(t)
	watch := watchConsole(t, page)

	raw, _ := json.Marshal(map[string]any{"slug": "csp", "name": "CSP shop", "repo_url": "https://git.example.com/acme/csp.git",
		"default_branch": "main", "run_command": "make test"})
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/api/private/projects", bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+s.Token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	must(t, err, "create project")
	var project struct {
		ID string `json:"id"`
	}
	_ = json.NewDecoder(res.Body).Decode(&project)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated || project.ID == "" {
		t.Fatalf("create project: %d", res.StatusCode)
	}

	clean := func(what string) {
		t.Helper()
		styles, err := page.Evaluate(`document.querySelectorAll("style").length`)
		must(t, err, "count style elements")
		if n := fmt.Sprint(styles); n != "0" {
			t.Errorf("%s: %s <style> elements in the page", what, n)
		}
		for _, e := range watch.take() {
			t.Errorf("%s: %s", what, e)
		}
	}

	gotoPage(t, page, s.URL+"/login")
	must(t, expect.Locator(testID(page, "login-form")).ToBeVisible(), "login form")
	clean("/login")
	must(t, page.Locator("#email").Fill(s.Email), "fill email")
	must(t, page.Locator("#password").Fill(s.Password), "fill password")
	must(t, testID(page, "login-submit").Click(), "submit login")
	must(t, expect.Locator(testID(page, "whoami")).ToContainText(s.Email), "logged in")
	clean("dashboard after login")

	for _, path := range []string{"/", "/inbox", "/projects", "/projects/new", "/projects/" + project.ID,
		"/projects/" + project.ID + "/edit", "/projects/" + project.ID + "/webhooks", "/projects/" + project.ID + "/feed",
		"/settings"} {
		gotoPage(t, page, s.URL+path)
		must(t, page.WaitForLoadState(playwright.PageWaitForLoadStateOptions{State: playwright.LoadStateLoad}), "load "+path)
		clean(path)
	}

	icon, err := page.Request().Get(s.URL + "/favicon.ico")
	must(t, err, "GET /favicon.ico")
	if icon.Status() != http.StatusOK || !strings.HasPrefix(icon.Headers()["content-type"], "image/svg+xml") {
		t.Errorf("GET /favicon.ico = %d %q", icon.Status(), icon.Headers()["content-type"])
	}

	// Revoking a token asks first: dismissed, nothing happens; accepted, the
	// token is revoked.
	gotoPage(t, page, s.URL+"/settings")
	must(t, page.Locator("#token-name").Fill("csp"), "fill token name")
	must(t, testID(page, "create-token").Click(), "create token")
	must(t, expect.Locator(testID(page, "new-token-value")).ToContainText("anv_pat_"), "new token shown")
	gotoPage(t, page, s.URL+"/settings")
	row := page.Locator("[data-testid=token-row]", playwright.PageLocatorOptions{HasText: "csp"})
	var asked []string
	var mu sync.Mutex
	accept := false
	page.OnDialog(func(d playwright.Dialog) {
		mu.Lock()
		asked = append(asked, d.Message())
		ok := accept
		mu.Unlock()
		if ok {
			_ = d.Accept()
		} else {
			_ = d.Dismiss()
		}
	})
	must(t, row.Locator("[data-testid=revoke-token]").Click(), "revoke, dismissed")
	must(t, expect.Locator(row.Locator("[data-testid=revoke-token]")).ToBeVisible(), "still revocable after dismissing")
	mu.Lock()
	accept = true
	mu.Unlock()
	must(t, row.Locator("[data-testid=revoke-token]").Click(), "revoke, accepted")
	must(t, expect.Locator(testID(page, "flash")).ToBeVisible(), "flash after revoke")
	must(t, expect.Locator(row).ToContainText("revoked"), "token marked revoked")
	mu.Lock()
	if len(asked) != 2 || !strings.HasPrefix(asked[0], "Revoke this token?") {
		t.Errorf("confirmations asked: %q", asked)
	}
	mu.Unlock()
	clean("settings after revoking")
	screenshot(t, page, "token-revoked")
}
