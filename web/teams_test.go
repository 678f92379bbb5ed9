package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"anvil/domain"
)

var inviteURLRE = regexp.MustCompile(`http://anvil\.test/invite/(anv_inv_[0-9A-Za-z]{32})`)

func TestMembersAndInvitationsAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	tok := b.owner.Token

	status, body := b.api(t, tok, "GET", "/api/private/members", nil)
	ms, _ := body["members"].([]any)
	if status != http.StatusOK || len(ms) != 1 {
		t.Fatalf("members: %d %v", status, body)
	}
	m := ms[0].(map[string]any)
	for _, k := range []string{"user_id", "email", "name", "role", "joined_at", "last_seen_at"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("member lacks %s: %v", k, m)
		}
	}

	for _, tc := range []struct {
		body   any
		status int
		code   string
	}{
		{map[string]any{"email": "not-an-email", "role": "member"}, 422, "invalid_email"},
		{map[string]any{"email": "a@acme.test", "role": "boss"}, 422, "invalid_role"},
		{map[string]any{"email": "owner@acme.test", "role": "member"}, 409, "already_member"},
		{"{", 400, "invalid_json"},
	} {
		if st, out := b.api(t, tok, "POST", "/api/private/invitations", tc.body); st != tc.status || out["error"] != tc.code {
			t.Errorf("invite %v: %d %v, want %d %s", tc.body, st, out, tc.status, tc.code)
		}
	}
	if st, out := b.api(t, tok, "GET", "/api/private/invitations", nil); st != 200 || len(out["invitations"].([]any)) != 0 {
		t.Fatalf("bad input created an invitation: %v", out)
	}

	status, body = b.api(t, tok, "POST", "/api/private/invitations", map[string]any{"email": "dev@acme.test", "role": "member"})
	if status != http.StatusCreated || body["invitation_id"] == nil || body["expires_at"] == nil {
		t.Fatalf("invite: %d %v", status, body)
	}
	mt := inviteURLRE.FindStringSubmatch(body["url"].(string))
	if mt == nil {
		t.Fatalf("url = %v", body["url"])
	}
	st, list := b.api(t, tok, "GET", "/api/private/invitations", nil)
	if st != 200 || len(list["invitations"].([]any)) != 1 || strings.Contains(jsonOf(list), mt[1]) {
		t.Fatalf("pending list: %v", list)
	}

	// The colleague accepts in a browser of their own.
	br := b.browser(t)
	res, page := br.get("/invite/" + mt[1])
	if res.StatusCode != 200 || !strings.Contains(page, `data-testid="invite-form"`) {
		t.Fatalf("invite page: %d %s", res.StatusCode, page)
	}
	csrf := csrfRE.FindStringSubmatch(page)[1]
	res, page = br.post("/invite/"+mt[1], url.Values{"_csrf": {csrf}, "name": {"Dev"}, "password": {"short"}})
	if res.StatusCode != 422 || !strings.Contains(page, "at least 10 characters") {
		t.Fatalf("short password: %d", res.StatusCode)
	}
	res, _ = br.post("/invite/"+mt[1], url.Values{"_csrf": {csrf}, "name": {"Dev"}, "password": {testPassword}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("accept: %d", res.StatusCode)
	}
	// Used: the generic page, also for garbage and for a revoked one.
	for _, p := range []string{"/invite/" + mt[1], "/invite/anv_inv_nonsense", "/invite/x"} {
		res, page := b.browser(t).get(p)
		if res.StatusCode != 404 || !strings.Contains(page, "This invitation is no longer valid") {
			t.Fatalf("%s: %d", p, res.StatusCode)
		}
	}

	// The colleague's session cookie with X-CSRF-Token carries their role in the API.
	devCSRF := br.csrf("/settings")
	call := func(method, path, body string) int {
		req, _ := http.NewRequest(method, b.srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-CSRF-Token", devCSRF)
		res, err := br.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	if st := call("POST", "/api/private/invitations", `{"email":"x@acme.test","role":"viewer"}`); st != 403 {
		t.Fatalf("member invites through the API: %d", st)
	}
	if st := call("GET", "/api/private/members", ""); st != 200 {
		t.Fatalf("member lists members: %d", st)
	}
	if st := call("GET", "/api/private/audit", ""); st != 403 {
		t.Fatalf("member reads the audit log: %d", st)
	}

	dev := memberID(t, b, tok, "dev@acme.test")
	if st, out := b.api(t, tok, "PATCH", "/api/private/members/"+dev, map[string]any{"role": "viewer"}); st != 200 || out["role"] != "viewer" {
		t.Fatalf("demote: %d %v", st, out)
	}
	if st, out := b.api(t, tok, "PATCH", "/api/private/members/"+memberID(t, b, tok, "owner@acme.test"), map[string]any{"role": "admin"}); st != 403 {
		t.Fatalf("own role: %d %v", st, out)
	}
	if st := call("POST", "/api/private/projects/"+b.owner.OrgID.String()+"/runs", `{}`); st != 403 {
		t.Fatalf("viewer triggers a run: %d", st)
	}
	if st, _ := b.api(t, tok, "DELETE", "/api/private/members/"+dev, nil); st != 204 {
		t.Fatalf("remove: %d", st)
	}
	if res, _ := br.get("/settings"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("removed member's session still works: %d", res.StatusCode)
	}

	// Revoking.
	_, body = b.api(t, tok, "POST", "/api/private/invitations", map[string]any{"email": "late@acme.test", "role": "viewer"})
	id := body["invitation_id"].(string)
	late := inviteURLRE.FindStringSubmatch(body["url"].(string))[1]
	if st, _ := b.api(t, tok, "DELETE", "/api/private/invitations/"+id, nil); st != 204 {
		t.Fatalf("revoke: %d", st)
	}
	if res, _ := b.browser(t).get("/invite/" + late); res.StatusCode != 404 {
		t.Fatalf("revoked link: %d", res.StatusCode)
	}

	// The audit log: filtered, paginated, no secret.
	st, au := b.api(t, tok, "GET", "/api/private/audit?kind=member.role_changed", nil)
	es, _ := au["entries"].([]any)
	if st != 200 || len(es) != 1 || es[0].(map[string]any)["target"] != "dev@acme.test" || es[0].(map[string]any)["actor_email"] != "owner@acme.test" {
		t.Fatalf("audit: %d %v", st, au)
	}
	_, au = b.api(t, tok, "GET", "/api/private/audit?actor=dev@acme.test", nil)
	if n := len(au["entries"].([]any)); n != 2 { // invitation used, member added
		t.Fatalf("audit by actor: %v", au)
	}
	_, all := b.api(t, tok, "GET", "/api/private/audit", nil)
	if s := jsonOf(all); strings.Contains(s, mt[1]) || strings.Contains(s, late) || strings.Contains(s, testPassword) {
		t.Fatalf("the audit log holds a secret: %s", s)
	}
	if st, out := b.api(t, tok, "GET", "/api/private/audit?before=abc", nil); st != 422 || out["error"] != "invalid_cursor" {
		t.Fatalf("bad cursor: %d %v", st, out)
	}
	_ = ctx
}

func memberID(t *testing.T, b *testBundle, tok, email string) string {
	t.Helper()
	_, body := b.api(t, tok, "GET", "/api/private/members", nil)
	for _, m := range body["members"].([]any) {
		if mm := m.(map[string]any); mm["email"] == email {
			return mm["user_id"].(string)
		}
	}
	t.Fatalf("no member %s in %v", email, body)
	return ""
}

func TestInvitationLinkIsShownOnceAfterTheRedirect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	csrf := br.csrf("/settings/members")
	res, page := br.post("/settings/invitations", url.Values{"_csrf": {csrf}, "email": {"bad"}, "role": {"member"}})
	if res.StatusCode != 422 || !strings.Contains(page, "is not a valid address") {
		t.Fatalf("bad email: %d", res.StatusCode)
	}
	res, _ = br.post("/settings/invitations", url.Values{"_csrf": {csrf}, "email": {"dev@acme.test"}, "role": {"member"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/settings/members" {
		t.Fatalf("create: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	_, page = br.get("/settings/members")
	if !inviteURLRE.MatchString(page) || !strings.Contains(page, `data-testid="invitation-row"`) {
		t.Fatal("the link is not shown after the redirect")
	}
	if _, page = br.get("/settings/members"); inviteURLRE.MatchString(page) {
		t.Fatal("the link is shown twice")
	}
}

func TestAccountPagesAndOrganisations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	other := b.browser(t)
	other.login("owner@acme.test", testPassword)
	csrf := br.csrf("/settings/account")
	res, page := br.post("/settings/account/password", url.Values{"_csrf": {csrf}, "current_password": {"wrong password"}, "new_password": {"a brand new password"}})
	if res.StatusCode != 422 || !strings.Contains(page, "current password is incorrect") {
		t.Fatalf("wrong current: %d", res.StatusCode)
	}
	if res, _ := other.get("/settings"); res.StatusCode != 200 {
		t.Fatal("a refused change ended another session")
	}
	res, _ = br.post("/settings/account/password", url.Values{"_csrf": {csrf}, "current_password": {testPassword}, "new_password": {"a brand new password"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("change: %d", res.StatusCode)
	}
	if res, _ := other.get("/settings"); res.StatusCode != http.StatusSeeOther {
		t.Fatal("the other session survived the password change")
	}
	if res, _ := br.get("/settings/account"); res.StatusCode != 200 {
		t.Fatal("own session ended")
	}
	res, _ = br.post("/settings/account/name", url.Values{"_csrf": {csrf}, "name": {"Olga Owner"}})
	if _, page := br.get("/settings/account"); res.StatusCode != http.StatusSeeOther || !strings.Contains(page, "Olga Owner") {
		t.Fatalf("rename: %d", res.StatusCode)
	}

	// A second organisation: created, then switched between from the layout.
	res, _ = br.post("/settings/organizations", url.Values{"_csrf": {csrf}, "slug": {"Bad Slug"}})
	if res.StatusCode != 422 {
		t.Fatalf("bad slug: %d", res.StatusCode)
	}
	res, _ = br.post("/settings/organizations", url.Values{"_csrf": {csrf}, "slug": {"beta"}, "name": {"Beta"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("create org: %d", res.StatusCode)
	}
	_, page = br.get("/")
	if !strings.Contains(page, `data-testid="org-switcher"`) || !strings.Contains(page, "owner@acme.test · Beta") {
		t.Fatal("no switcher or not in Beta")
	}
	orgs, err := b.accounts.Organizations(context.Background(), &domain.Principal{UserID: b.owner.UserID})
	if err != nil || len(orgs) != 2 {
		t.Fatal(orgs, err)
	}
	for _, o := range orgs {
		res, _ := br.post("/settings/organization", url.Values{"_csrf": {csrf}, "org_id": {o.ID.String()}})
		if _, page := br.get("/"); res.StatusCode != http.StatusSeeOther || !strings.Contains(page, "owner@acme.test · "+o.Name) {
			t.Fatalf("switch to %s: %d", o.Name, res.StatusCode)
		}
	}
	res, _ = br.post("/settings/organization", url.Values{"_csrf": {csrf}, "org_id": {"00000000-0000-0000-0000-000000000001"}})
	if res.StatusCode != 404 {
		t.Fatalf("switch to a stranger's org: %d", res.StatusCode)
	}
}

func jsonOf(v any) string {
	raw, _ := json.Marshal(v)
	return string(raw)
}

func TestExistingUserJoinsAnInvitationAfterLoggingIn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.accounts.Bootstrap(context.Background(), "beta", "boss@beta.test", testPassword); err != nil {
		t.Fatal(err)
	}
	_, body := b.api(t, b.owner.Token, "POST", "/api/private/invitations", map[string]any{"email": "boss@beta.test", "role": "viewer"})
	tok := inviteURLRE.FindStringSubmatch(body["url"].(string))[1]

	br := b.browser(t)
	res, page := br.get("/invite/" + tok)
	if res.StatusCode != 200 || !strings.Contains(page, `data-testid="invite-login"`) || strings.Contains(page, `data-testid="invite-form"`) {
		t.Fatalf("invite page for an existing account: %d", res.StatusCode)
	}
	// Creating a second account for that email is refused and changes nothing.
	lt := br.csrf("/login")
	if res, _ := br.post("/invite/"+tok, url.Values{"_csrf": {lt}, "name": {"X"}, "password": {testPassword}}); res.StatusCode != 409 {
		t.Fatalf("second account: %d", res.StatusCode)
	}
	res, _ = br.post("/login", url.Values{"_csrf": {lt}, "email": {"boss@beta.test"}, "password": {testPassword}, "next": {"/invite/" + tok}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/invite/"+tok {
		t.Fatalf("login: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	_, page = br.get("/invite/" + tok)
	if !strings.Contains(page, `data-testid="invite-join"`) {
		t.Fatal("no join button for the invited, logged-in person")
	}
	csrf := csrfRE.FindStringSubmatch(page)[1]
	if res, _ := br.post("/invite/"+tok+"/join", url.Values{"_csrf": {csrf}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("join: %d", res.StatusCode)
	}
	if _, page := br.get("/"); !strings.Contains(page, "boss@beta.test · acme") {
		t.Fatal("the session did not move to acme")
	}
	if res, _ := br.post("/invite/"+tok+"/join", url.Values{"_csrf": {csrf}}); res.StatusCode != 404 {
		t.Fatalf("second join: %d", res.StatusCode)
	}
}

func TestPasswordResetPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reset, err := b.accounts.CreatePasswordReset(context.Background(), "owner@acme.test")
	if err != nil {
		t.Fatal(err)
	}
	tok := reset.Token
	br := b.browser(t)
	res, page := br.get("/reset/" + tok)
	if res.StatusCode != 200 || !strings.Contains(page, "owner@acme.test") {
		t.Fatalf("reset page: %d", res.StatusCode)
	}
	csrf := csrfRE.FindStringSubmatch(page)[1]
	if res, page := br.post("/reset/"+tok, url.Values{"_csrf": {csrf}, "password": {"short"}}); res.StatusCode != 422 || !strings.Contains(page, "at least 10 characters") {
		t.Fatalf("short password: %d", res.StatusCode)
	}
	if res, _ := br.post("/reset/"+tok, url.Values{"_csrf": {csrf}, "password": {"the new long password"}}); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login" {
		t.Fatalf("reset: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	br.login("owner@acme.test", "the new long password")
	// The operator's reset revoked the API token too.
	if st, _ := b.api(t, b.owner.Token, "GET", "/api/private/projects", nil); st != http.StatusUnauthorized {
		t.Fatalf("the API token after a reset: %d, want 401", st)
	}
	for _, p := range []string{"/reset/" + tok, "/reset/anv_rst_nonsense"} {
		if res, page := b.browser(t).get(p); res.StatusCode != 404 || !strings.Contains(page, "no longer valid") {
			t.Fatalf("%s: %d", p, res.StatusCode)
		}
	}
}

// TestPasswordChangeCanRevokeTokens: the account page's "also revoke my API
// tokens" box ends every API token with the password change; without it
// they keep working.
func TestPasswordChangeCanRevokeTokens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	_, page := br.get("/settings/account")
	if !strings.Contains(page, `data-testid="account-password-revoke-tokens"`) {
		t.Fatal("the password form offers no token revocation")
	}
	csrf := br.csrf("/settings/account")
	res, _ := br.post("/settings/account/password", url.Values{"_csrf": {csrf}, "current_password": {testPassword}, "new_password": {"a brand new password"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("change: %d", res.StatusCode)
	}
	if st, _ := b.api(t, b.owner.Token, "GET", "/api/private/projects", nil); st != http.StatusOK {
		t.Fatalf("a change without the box: token %d, want 200", st)
	}
	res, _ = br.post("/settings/account/password", url.Values{"_csrf": {csrf}, "current_password": {"a brand new password"},
		"new_password": {"another new password"}, "revoke_tokens": {"true"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("change with revocation: %d", res.StatusCode)
	}
	if _, page := br.get("/settings/account"); !strings.Contains(page, "your API tokens are revoked") {
		t.Error("the flash does not say the tokens were revoked")
	}
	if st, _ := b.api(t, b.owner.Token, "GET", "/api/private/projects", nil); st != http.StatusUnauthorized {
		t.Fatalf("a change with the box: token %d, want 401", st)
	}
}
