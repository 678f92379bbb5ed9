package web_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
)

var (
	inlineAttrRE = regexp.MustCompile(`(?i)<[a-z][^>]*\s(on[a-z]+|style)\s*=`)
	scriptTagRE  = regexp.MustCompile(`(?i)<script\b[^>]*>`)
)

// The Content-Security-Policy allows scripts and styles only from files of
// this site, so no page may carry an inline event handler, a style
// attribute, a <style> element or an inline <script>.
func TestPagesCarryNoInlineScriptOrStyle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("csp"))
	pid := p["id"].(string)
	owner, _ := b.accounts.Authenticate(context.Background(), b.owner.Token)
	run, err := b.queue.AcceptManual(context.Background(), owner, uuid.MustParse(pid), "")
	if err != nil {
		t.Fatal(err)
	}
	anon := b.browser(t)
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)

	check := func(who *browser, path string, wantStatus int) {
		t.Helper()
		res, body := who.get(path)
		if res.StatusCode != wantStatus {
			t.Errorf("GET %s = %d, want %d", path, res.StatusCode, wantStatus)
		}
		if m := inlineAttrRE.FindString(body); m != "" {
			t.Errorf("GET %s: inline handler or style: %s", path, m)
		}
		if strings.Contains(strings.ToLower(body), "<style") {
			t.Errorf("GET %s: a <style> element", path)
		}
		for _, tag := range scriptTagRE.FindAllString(body, -1) {
			if !strings.Contains(tag, ` src="/static/`) {
				t.Errorf("GET %s: inline script %s", path, tag)
			}
		}
	}
	check(anon, "/login", http.StatusOK)
	check(anon, "/no/such/page", http.StatusNotFound)
	for _, path := range []string{"/", "/inbox", "/projects", "/projects/new", "/projects/" + pid, "/projects/" + pid + "/edit",
		"/projects/" + pid + "/webhooks", "/projects/" + pid + "/feed", "/runs/" + run.ID.String(), "/settings"} {
		check(br, path, http.StatusOK)
	}
	check(br, "/no/such/page", http.StatusNotFound)
	if _, body := br.get("/settings"); !strings.Contains(body, `data-confirm="Revoke this token?`) {
		t.Error("the token revoke form no longer asks for confirmation")
	}

	// The icon browsers ask for unprompted.
	res, body := anon.get("/favicon.ico")
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "image/svg+xml" || !strings.HasPrefix(body, "<svg") {
		t.Errorf("GET /favicon.ico = %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
}
