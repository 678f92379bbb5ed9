package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"anvil/domain"
)

func TestAnonymousVisitorsAreSentToLogin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.browser(t)
	for _, path := range []string{"/", "/projects", "/settings", "/inbox"} {
		res, _ := br.get(path)
		if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/login") {
			t.Errorf("GET %s: status %d location %q, want a redirect to /login", path, res.StatusCode, res.Header.Get("Location"))
		}
	}
}

func TestLoginLogout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.browser(t)

	tok := br.csrf("/login")
	res, body := br.post("/login", url.Values{"_csrf": {tok}, "email": {"owner@acme.test"}, "password": {"wrong password!"}})
	if res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "email or password is incorrect") {
		t.Fatalf("wrong password: status %d", res.StatusCode)
	}
	res, _ = br.post("/login", url.Values{"_csrf": {tok}, "email": {"nobody@acme.test"}, "password": {"whatever123"}})
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unknown user: status %d", res.StatusCode)
	}
	// No CSRF token: refused before the password is looked at.
	res, _ = br.post("/login", url.Values{"email": {"owner@acme.test"}, "password": {testPassword}})
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("login without CSRF: status %d, want 403", res.StatusCode)
	}

	br.login("owner@acme.test", testPassword)
	var session *http.Cookie
	u, _ := url.Parse(b.srv.URL)
	for _, c := range br.c.Jar.Cookies(u) {
		if c.Name == "anvil_session" {
			session = c
		}
	}
	if session == nil {
		t.Fatal("no session cookie")
	}
	res, body = br.get("/")
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `data-testid="whoami"`) || !strings.Contains(body, "owner@acme.test") {
		t.Fatalf("dashboard after login: %d", res.StatusCode)
	}

	// Logout needs the CSRF token too.
	res, _ = br.post("/logout", url.Values{})
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("logout without CSRF: %d", res.StatusCode)
	}
	csrf := br.csrf("/")
	res, _ = br.post("/logout", url.Values{"_csrf": {csrf}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login" {
		t.Fatalf("logout: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	res, _ = br.get("/")
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("after logout: %d", res.StatusCode)
	}
	// The old cookie is dead on the server, not only forgotten by the browser.
	n, err := b.db.Bun.NewSelect().Table("sessions").Count(context.Background())
	if err != nil || n != 0 {
		t.Fatalf("sessions left: %d %v", n, err)
	}
}

func TestSessionCookieFlags(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.browser(t)
	tok := br.csrf("/login")
	res, _ := br.post("/login", url.Values{"_csrf": {tok}, "email": {"owner@acme.test"}, "password": {testPassword}})
	var found bool
	for _, c := range res.Cookies() {
		if c.Name == "anvil_session" {
			found = true
			if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode {
				t.Fatalf("session cookie flags: HttpOnly=%v SameSite=%v", c.HttpOnly, c.SameSite)
			}
		}
	}
	if !found {
		t.Fatal("no session cookie set")
	}
}

func TestLoginNextStaysOnSite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.browser(t)
	tok := br.csrf("/login")
	for next, want := range map[string]string{"/projects": "/projects", "//evil.example": "/", "https://evil.example": "/", "/\\evil": "/"} {
		br2 := b.browser(t)
		tok = br2.csrf("/login")
		res, _ := br2.post("/login", url.Values{"_csrf": {tok}, "email": {"owner@acme.test"}, "password": {testPassword}, "next": {next}})
		if loc := res.Header.Get("Location"); loc != want {
			t.Errorf("next=%q: redirected to %q, want %q", next, loc, want)
		}
	}
}

func TestAPIAuthentication(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct {
		name   string
		header string
	}{
		{"none", ""},
		{"not bearer", "Basic Zm9vOmJhcg=="},
		{"garbage", "Bearer nope"},
		{"unknown token", "Bearer anv_pat_" + strings.Repeat("A", 32)},
		{"wrong secret, real prefix", "Bearer " + b.owner.Token[:16] + strings.Repeat("z", 24)},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest("GET", b.srv.URL+"/api/private/projects", nil)
		if tc.header != "" {
			req.Header.Set("Authorization", tc.header)
		}
		status, body := do(t, http.DefaultClient, req)
		if status != http.StatusUnauthorized || body["error"] != "unauthorized" {
			t.Errorf("%s: %d %v, want 401 unauthorized", tc.name, status, body)
		}
	}
	status, _ := b.api(t, b.owner.Token, "GET", "/api/private/projects", nil)
	if status != http.StatusOK {
		t.Fatalf("valid token: %d", status)
	}
}

func TestAPIWithSessionNeedsCSRF(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	body := `{"slug":"web","repo_url":"https://git.example/web.git","default_branch":"main","run_command":"make"}`

	req, _ := http.NewRequest("POST", b.srv.URL+"/api/private/projects", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	status, out := do(t, br.c, req)
	if status != http.StatusForbidden || out["error"] != "csrf_failed" {
		t.Fatalf("session write without CSRF: %d %v", status, out)
	}
	// A GET with the session is fine without it.
	req, _ = http.NewRequest("GET", b.srv.URL+"/api/private/projects", nil)
	if status, _ := do(t, br.c, req); status != http.StatusOK {
		t.Fatalf("session read: %d", status)
	}
	req, _ = http.NewRequest("POST", b.srv.URL+"/api/private/projects", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", br.csrf("/"))
	if status, out := do(t, br.c, req); status != http.StatusCreated {
		t.Fatalf("session write with CSRF: %d %v", status, out)
	}
}

func TestTokensSettingsPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	csrf := br.csrf("/settings")
	// Creating answers with a redirect; the settings page shows the token
	// once, and a reload neither shows it again nor creates another.
	res, body := br.post("/settings/tokens", url.Values{"_csrf": {csrf}, "name": {"deploy"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/settings" || regexpToken.MatchString(body) {
		t.Fatalf("create token: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	res, body = br.get("/settings")
	m := regexpToken.FindString(body)
	if m == "" || res.Header.Get("Cache-Control") != "no-store" {
		t.Fatal("new token not shown once")
	}
	if n, _ := b.db.Bun.NewSelect().Table("api_tokens").Where("name = 'deploy'").Count(context.Background()); n != 1 {
		t.Fatalf("%d tokens named deploy", n)
	}
	if status, _ := b.api(t, m, "GET", "/api/private/projects", nil); status != http.StatusOK {
		t.Fatalf("new token does not work: %d", status)
	}
	// Shown once: the list afterwards has only the prefix.
	_, body = br.get("/settings")
	if strings.Contains(body, m) || !strings.Contains(body, m[:16]) {
		t.Fatal("token list must show the prefix and never the token")
	}
	// Only a hash is stored.
	var n int
	if err := b.db.Bun.NewRaw(`SELECT count(*) FROM api_tokens WHERE position(? in encode(hash, 'escape')) > 0 OR prefix = ?`, m, m).Scan(context.Background(), &n); err != nil || n != 0 {
		t.Fatalf("plaintext token stored: %d %v", n, err)
	}
	// Revoke it.
	var id string
	if err := b.db.Bun.NewRaw(`SELECT id FROM api_tokens WHERE name = 'deploy'`).Scan(context.Background(), &id); err != nil {
		t.Fatal(err)
	}
	res, _ = br.post("/settings/tokens/"+id+"/revoke", url.Values{"_csrf": {csrf}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke: %d", res.StatusCode)
	}
	if status, _ := b.api(t, m, "GET", "/api/private/projects", nil); status != http.StatusUnauthorized {
		t.Fatalf("revoked token still works: %d", status)
	}
	// Empty name refused with a message.
	res, body = br.post("/settings/tokens", url.Values{"_csrf": {csrf}, "name": {"  "}})
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "token name is required") {
		t.Fatalf("empty token name: %d", res.StatusCode)
	}
}

func TestLoginGuessingIsLimited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.browser(t)
	tok := br.csrf("/login")
	for i := 0; i < 10; i++ {
		res, _ := br.post("/login", url.Values{"_csrf": {tok}, "email": {"owner@acme.test"}, "password": {"guess number " + string(rune('a'+i))}})
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d", i, res.StatusCode)
		}
	}
	// The right password no longer helps for a while, for this account only.
	res, body := br.post("/login", url.Values{"_csrf": {tok}, "email": {"OWNER@acme.test"}, "password": {testPassword}})
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" || !strings.Contains(body, "too many failed attempts") {
		t.Fatalf("after 10 failures: %d", res.StatusCode)
	}
	if _, err := b.accounts.AddMember(context.Background(), mustPrincipal(t, b), "other@acme.test", testPassword, "member"); err != nil {
		t.Fatal(err)
	}
	other := b.browser(t)
	other.login("other@acme.test", testPassword)
}

func mustPrincipal(t *testing.T, b *testBundle) *domain.Principal {
	t.Helper()
	p, err := b.accounts.Authenticate(context.Background(), b.owner.Token)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
