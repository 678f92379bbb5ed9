package web_test

import (
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// Nothing a person did is lost or hidden: a malformed
// repository address is refused naming the field, a refused form keeps what
// was typed (never a secret's value), a successful form redirects, and
// every change of the settings a team relies on is in the audit log, in
// words.

// A repository address with no scheme that is not an absolute path is
// refused 422 (malformed_repo_url, naming repo_url) by the API's create and
// update and by the form; nothing is saved.
func TestProjectRefusesMalformedRepoURL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, u := range []string{"github.com/foo/bar", "foo", "ht!tp://x", "foo/bar.git"} {
		p := validProject("shop")
		p["repo_url"] = u
		status, out := b.api(t, b.owner.Token, "POST", "/api/private/projects", p)
		msg, _ := out["message"].(string)
		if status != http.StatusUnprocessableEntity || !strings.HasPrefix(msg, "repo_url ") {
			t.Fatalf("POST %q: %d %v", u, status, out)
		}
		if u != "ht!tp://x" && out["error"] != "malformed_repo_url" {
			t.Fatalf("POST %q: code %v, want malformed_repo_url", u, out["error"])
		}
	}
	p := validProject("shop")
	p["repo_url"] = "github.com/foo/bar"
	_, out := b.api(t, b.owner.Token, "POST", "/api/private/projects", p)
	if msg, _ := out["message"].(string); !strings.Contains(msg, "no scheme") || !strings.Contains(msg, `did you mean "https://github.com/foo/bar"`) {
		t.Errorf("the refusal does not say what is wrong: %v", out)
	}
	if n := countProjects(t, b); n != 0 {
		t.Fatalf("refused requests created %d projects", n)
	}
	status, created := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("shop"))
	if status != http.StatusCreated {
		t.Fatalf("create: %d %v", status, created)
	}
	status, out = b.api(t, b.owner.Token, "PATCH", "/api/private/projects/"+created["id"].(string), map[string]any{"repo_url": "git.example/shop"})
	if status != http.StatusUnprocessableEntity || out["error"] != "malformed_repo_url" {
		t.Fatalf("PATCH: %d %v", status, out)
	}

	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	form := url.Values{"_csrf": {br.csrf("/projects/new")}, "slug": {"web"}, "repo_url": {"github.com/foo/bar"},
		"default_branch": {"main"}, "run_command": {"make"}}
	res, body := br.post("/projects", form)
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="field-error-repo_url"`) ||
		!strings.Contains(body, "Repository URL is malformed") {
		t.Fatalf("form: %d %s", res.StatusCode, body)
	}
	form = url.Values{"_csrf": {form.Get("_csrf")}, "slug": {"shop"}, "repo_url": {"foo"}, "default_branch": {"main"}, "run_command": {"make"}}
	if res, _ := br.post("/projects/"+created["id"].(string)+"/edit", form); res.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("edit form: %d", res.StatusCode)
	}
	if n := countProjects(t, b); n != 1 {
		t.Fatalf("%d projects, want 1", n)
	}
}

// A refused form comes back with every field as typed: the project form
// (its access token excepted, with a line saying to paste it again), the
// connection form, the alert destination form, the secret form (never its
// value) and the monitor form.
func TestRefusedFormsKeepEveryField(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	csrf := br.csrf("/projects/new")

	const token = "ghp_keepmeoutofthepage0123456789"
	project := url.Values{"_csrf": {csrf}, "slug": {"shop"}, "name": {"The web shop"}, "repo_url": {"github.com/acme/shop"},
		"default_branch": {"trunk"}, "run_command": {"go test ./..."}, "repair_command": {"anvil-repair --fast"},
		"provider": {"github"}, "provider_repo": {"acme/shop"}, "provider_token": {token}, "branch_filters": {"release/*"},
		"status_context": {"ci/anvil"}, "run_timeout_minutes": {"45"}}
	res, body := br.post("/projects", project)
	if res.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("project form: %d", res.StatusCode)
	}
	for _, want := range []string{`value="shop"`, `value="The web shop"`, `value="github.com/acme/shop"`, `value="trunk"`, "go test ./...",
		"anvil-repair --fast", `value="github" selected`, `value="acme/shop"`, "release/*", `value="ci/anvil"`, `value="45"`,
		`data-testid="paste-again-provider_token"`, "paste it again"} {
		if !strings.Contains(body, want) {
			t.Errorf("the refused project form lacks %s", want)
		}
	}
	if strings.Contains(body, token) {
		t.Error("the refused project form sends the access token back")
	}

	status, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("shop"))
	if status != http.StatusCreated {
		t.Fatalf("create: %d %v", status, p)
	}
	res, body = br.post("/projects/shop/feed/connections", url.Values{"_csrf": {csrf}, "name": {"storefront pages"}, "kind": {"browser"},
		"allowed_origins": {"https://shop.example\nnot an origin"}})
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="feed-error"`) {
		t.Fatalf("connection form: %d", res.StatusCode)
	}
	for _, want := range []string{`value="storefront pages"`, `value="browser" selected`, "https://shop.example\nnot an origin</textarea>"} {
		if !strings.Contains(body, want) {
			t.Errorf("the refused connection form lacks %q", want)
		}
	}

	res, body = br.post("/settings/alerts", url.Values{"_csrf": {csrf}, "name": {"on-call chat"}, "kind": {"slack"}, "url": {"http://127.0.0.1:9/hook"}})
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="alert-error"`) {
		t.Fatalf("alert form: %d", res.StatusCode)
	}
	for _, want := range []string{`value="on-call chat"`, `value="slack" selected`, `value="http://127.0.0.1:9/hook"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the refused alert destination form lacks %s", want)
		}
	}

	const secretValue = "s3cr3t-value-never-echoed"
	res, body = br.post("/projects/shop/secrets", url.Values{"_csrf": {csrf}, "name": {"bad name!"}, "value": {secretValue}})
	if res.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("secret form: %d", res.StatusCode)
	}
	if !strings.Contains(body, `value="bad name!"`) || !strings.Contains(body, `data-testid="paste-again-secret-value"`) || !strings.Contains(body, "paste it again") {
		t.Errorf("the refused secret form does not keep its name or does not say to paste the value again")
	}
	if strings.Contains(body, secretValue) || !strings.Contains(body, `data-testid="secret-value" required></textarea>`) {
		t.Error("the refused secret form sends the value back")
	}

	res, body = br.post("/projects/shop/monitors", url.Values{"_csrf": {csrf}, "slug": {"nightly-backup"}, "schedule_type": {"crontab"},
		"schedule_value": {"0 2 * *"}, "timezone": {"Europe/Berlin"}, "environment": {"production"}, "max_runtime": {"30"}})
	if res.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("monitor form: %d", res.StatusCode)
	}
	for _, want := range []string{`value="nightly-backup"`, `value="0 2 * *"`, `value="Europe/Berlin"`, `value="production"`, `value="30"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the refused monitor form lacks %s", want)
		}
	}
}

// Every successful form answers 303 to the resource's page: following it is
// a 200, and a reload of that page (a GET) is a 200 too — never the 409
// "already taken" of submitting the same creation twice.
func TestFormsRedirectAfterPost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	csrf := br.csrf("/projects/new")
	for _, repo := range []string{"https://git.example/shop.git", "https://git.example/missing.git"} {
		slug := "shop"
		if strings.Contains(repo, "missing") {
			slug = "silent" // saved with a warning: redirected all the same
		}
		res, _ := br.post("/projects", url.Values{"_csrf": {csrf}, "slug": {slug}, "repo_url": {repo}, "default_branch": {"main"}, "run_command": {"make"}})
		loc := res.Header.Get("Location")
		if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/projects/"+slug) {
			t.Fatalf("create %s: %d → %q", slug, res.StatusCode, loc)
		}
		for range 2 { // follow, then reload
			if res, _ := br.get(loc); res.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %d", loc, res.StatusCode)
			}
		}
	}
	for _, step := range []struct {
		path string
		form url.Values
		to   string
	}{
		{"/projects/shop/edit", url.Values{"slug": {"shop"}, "repo_url": {"https://git.example/shop.git"}, "default_branch": {"main"}, "run_command": {"go test ./..."}}, "/projects/shop"},
		{"/projects/shop/feed/bindings", url.Values{"add": {"true"}, "environment": {"production"}, "repair_policy": {"observe"}}, "/projects/shop/feed"},
		{"/projects/shop/feed/connections", url.Values{"name": {"shop-api"}, "kind": {"server"}}, "/projects/shop/feed"},
		{"/projects/shop/secrets", url.Values{"name": {"DEPLOY_TOKEN"}, "value": {"a-long-enough-value"}}, "/projects/shop/secrets?saved=DEPLOY_TOKEN"},
		{"/projects/shop/monitors", url.Values{"slug": {"backup"}, "schedule_type": {"crontab"}, "schedule_value": {"0 2 * * *"}}, "/projects/shop/monitors"},
		{"/projects/shop/monitors/backup/rotate", url.Values{}, "/projects/shop/monitors/backup"},
		{"/projects/shop/webhooks/github", url.Values{}, "/projects/shop/webhooks"},
		{"/projects/shop/webhooks/github/enabled", url.Values{"enabled": {"false"}}, "/projects/shop/webhooks"},
	} {
		step.form.Set("_csrf", csrf)
		res, body := br.post(step.path, step.form)
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != step.to {
			t.Fatalf("POST %s: %d → %q %s", step.path, res.StatusCode, res.Header.Get("Location"), body)
		}
		for range 2 {
			if res, _ := br.get(step.to); res.StatusCode != http.StatusOK {
				t.Fatalf("GET %s after POST %s: %d", step.to, step.path, res.StatusCode)
			}
		}
	}
}

// Every change of a project's settings, a binding, a connection and an
// alert destination is in the audit log in the transaction of the change,
// and the audit page says it in words; the organisation's creation is its
// first entry.
func TestAuditLogSaysEveryChangeInWords(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.services.Alerts.SetAllowPrivate(true)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(hook.Close)
	tok := b.owner.Token
	call := func(method, path string, body any, want int) map[string]any {
		t.Helper()
		status, out := b.api(t, tok, method, path, body)
		if status != want {
			t.Fatalf("%s %s: %d %v", method, path, status, out)
		}
		return out
	}
	p := call("POST", "/api/private/projects", validProject("shop"), http.StatusCreated)
	pid := p["id"].(string)
	call("PATCH", "/api/private/projects/"+pid, map[string]any{"run_command": "go test ./...", "default_branch": "trunk"}, http.StatusOK)
	call("PATCH", "/api/private/projects/"+pid, map[string]any{"run_command": "go test ./..."}, http.StatusOK) // no change, no entry
	call("PUT", "/api/private/projects/"+pid+"/bindings/production", map[string]any{"repair_policy": "observe"}, http.StatusOK)
	call("PUT", "/api/private/projects/"+pid+"/bindings/production", map[string]any{"repair_policy": "observe"}, http.StatusOK) // unchanged: no entry
	call("PUT", "/api/private/projects/"+pid+"/bindings/production", map[string]any{"repair_policy": "off"}, http.StatusOK)
	call("DELETE", "/api/private/projects/"+pid+"/bindings/production", nil, http.StatusNoContent)
	conn := call("POST", "/api/private/projects/"+pid+"/connections", map[string]any{"name": "site", "kind": "browser", "allowed_origins": []string{"https://shop.example"}}, http.StatusCreated)
	cid := conn["connection_id"].(string)
	call("PATCH", "/api/private/projects/"+pid+"/connections/"+cid, map[string]any{"allowed_origins": []string{"https://shop.example", "https://www.shop.example"}}, http.StatusOK)
	call("DELETE", "/api/private/connections/"+cid, nil, http.StatusNoContent)
	d := call("POST", "/api/private/alerts/destinations", map[string]any{"name": "ops", "kind": "webhook", "url": hook.URL + "/alerts"}, http.StatusCreated)
	did := d["destination_id"].(string)
	call("PATCH", "/api/private/alerts/destinations/"+did, map[string]any{"name": "ops-team"}, http.StatusOK)
	call("POST", "/api/private/alerts/destinations/"+did+"/test", nil, http.StatusAccepted)
	call("DELETE", "/api/private/alerts/destinations/"+did, nil, http.StatusNoContent)

	out := call("GET", "/api/private/audit", nil, http.StatusOK)
	entries, _ := out["entries"].([]any)
	var kinds []string
	for i := len(entries) - 1; i >= 0; i-- { // oldest first
		kinds = append(kinds, entries[i].(map[string]any)["kind"].(string))
	}
	want := []string{"organization.created", "project.created", "project.updated", "binding.changed", "binding.changed", "binding.changed",
		"connection.created", "connection.origins_changed", "connection.revoked", "alert_destination.created", "alert_destination.updated",
		"alert_destination.tested", "alert_destination.deleted"}
	if strings.Join(kinds, " ") != strings.Join(want, " ") {
		t.Fatalf("audit kinds, oldest first:\n got %v\nwant %v", kinds, want)
	}

	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	res, body := br.get("/settings/audit")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("audit page: %d", res.StatusCode)
	}
	var details []string
	for _, part := range strings.Split(body, `data-testid="audit-detail">`)[1:] {
		details = append(details, html.UnescapeString(part[:strings.Index(part, "</td>")]))
	}
	if len(details) != len(want) {
		t.Fatalf("%d rows on the audit page, want %d", len(details), len(want))
	}
	words := []string{
		"created the organisation acme, owned by owner@acme.test",
		"created the project shop (repository https://git.example/shop.git, default branch main, run command `make test`)",
		"changed the default branch from `main` to `trunk`; changed the run command from `make test` to `go test ./...`",
		"added a binding for environment production of project shop with repair policy observe",
		"changed the repair policy of environment production of project shop from observe to off",
		"removed the binding of environment production of project shop (its repair policy was off)",
		"created the browser connection shop/site (token anv_pub_",
		"changed the allowed origins of connection site from https://shop.example to https://shop.example, https://www.shop.example",
		"revoked the connection site",
		"added the webhook alert destination ops (http://127.0.0.1:",
		"renamed the alert destination ops to ops-team",
		"sent a test alert to the webhook alert destination ops-team",
		"deleted the webhook alert destination ops-team",
	}
	for i, w := range words {
		got := details[len(details)-1-i]
		if !strings.Contains(got, w) {
			t.Errorf("entry %d (%s) says %q, want it to contain %q", i+1, want[i], got, w)
		}
		if strings.ContainsAny(got, "{}") {
			t.Errorf("entry %d is raw JSON: %q", i+1, got)
		}
	}
}
