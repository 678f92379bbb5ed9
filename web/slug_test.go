package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestProjectsBySlugEverywhere: every project page, its subpages, their
// writes and the API accept the project's slug as well as its id; the
// pages link by slug; a slug is resolved in the caller's organisation
// only; a slug that would read as a page or an id is refused.
func TestProjectsBySlugEverywhere(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("shop"))
	pid := p["id"].(string)
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	owner, _ := b.accounts.Authenticate(ctx, b.owner.Token)
	r, err := b.queue.AcceptManual(ctx, owner, uuid.MustParse(pid), "")
	if err != nil {
		t.Fatal(err)
	}

	pages := []string{"", "/edit", "/webhooks", "/webhooks/deliveries-fragment", "/feed", "/secrets", "/queue"}
	for _, ref := range []string{"shop", pid} {
		for _, sub := range pages {
			if res, _ := br.get("/projects/" + ref + sub); res.StatusCode != http.StatusOK {
				t.Errorf("GET /projects/%s%s: %d", ref, sub, res.StatusCode)
			}
		}
		res, _ := br.get("/projects/" + ref + "/runs/1")
		if res.StatusCode != http.StatusFound || res.Header.Get("Location") != "/runs/"+r.ID.String() {
			t.Errorf("run #1 of %s: %d %s", ref, res.StatusCode, res.Header.Get("Location"))
		}
		for _, api := range []string{"", "/queue", "/secrets", "/webhooks", "/connections", "/bindings", "/alert-rules", "/card", "/retention"} {
			if st, out := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+ref+api, nil); st != http.StatusOK {
				t.Errorf("GET /api/private/projects/%s%s: %d %v", ref, api, st, out)
			}
		}
		for _, q := range []string{"/inbox?project=" + ref, "/inbox?project=" + ref + "&fragment=body"} {
			if res, _ := br.get(q); res.StatusCode != http.StatusOK {
				t.Errorf("GET %s: %d", q, res.StatusCode)
			}
		}
		if st, _ := b.api(t, b.owner.Token, "GET", "/api/private/incidents?project_id="+ref, nil); st != http.StatusOK {
			t.Errorf("incidents of %s: %d", ref, st)
		}
	}
	for _, path := range []string{"/projects/nope", "/projects/nope/edit", "/projects/nope/secrets", "/projects/nope/runs/1"} {
		if res, _ := br.get(path); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, res.StatusCode)
		}
	}
	if st, out := b.api(t, b.owner.Token, "GET", "/api/private/incidents?project_id=nope", nil); st != http.StatusUnprocessableEntity || out["error"] != "invalid_project_id" {
		t.Errorf("incidents of an unknown slug: %d %v", st, out)
	}

	// The pages link by slug; the live stream keeps the id.
	wantLinks := map[string][]string{
		"/projects/shop":          {`href="/projects/shop/edit"`, `href="/projects/shop/webhooks"`, `href="/projects/shop/feed"`, `href="/projects/shop/secrets"`, `hx-post="/projects/shop/runs"`, `hx-get="/projects/shop/queue"`, `href="/inbox?project=shop"`},
		"/projects/shop/webhooks": {`href="/projects/shop"`, `hx-get="/projects/shop/webhooks/deliveries-fragment"`, `/projects/shop/webhooks/github`},
		"/projects/shop/feed":     {`href="/projects/shop"`, `action="/projects/shop/feed/connections"`},
		"/projects/shop/secrets":  {`href="/projects/shop"`, `action="/projects/shop/secrets"`},
		"/projects":               {`href="/projects/shop"`},
		"/":                       {`href="/projects/shop"`},
		"/runs/" + r.ID.String():  {`href="/projects/shop"`},
	}
	for page, links := range wantLinks {
		_, body := br.get(page)
		for _, l := range links {
			if !strings.Contains(body, l) {
				t.Errorf("%s lacks %s", page, l)
			}
		}
		if strings.Contains(body, "/projects/"+pid) {
			t.Errorf("%s links a project by its id", page)
		}
	}

	// Writes by slug, and where they lead.
	csrf := br.csrf("/projects/shop")
	res, _ := br.post("/projects/shop/runs", url.Values{"_csrf": {csrf}})
	// Run now leads to the run's page.
	if res.StatusCode != http.StatusSeeOther || !runPagePath.MatchString(res.Header.Get("Location")) {
		t.Errorf("run now by slug: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	res, _ = br.post("/projects/shop/secrets", url.Values{"_csrf": {csrf}, "name": {"NPM_TOKEN"}, "value": {"npm_abcdefgh"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/projects/shop/secrets?saved=NPM_TOKEN" {
		t.Errorf("secret by slug: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	if st, out := b.api(t, b.owner.Token, "PUT", "/api/private/projects/shop/retention", map[string]any{"daily_event_budget": 500}); st != http.StatusOK || out["project_id"] != pid {
		t.Errorf("retention by slug through the API: %d %v", st, out)
	}
	res, _ = br.post("/settings/retention/projects/shop", url.Values{"_csrf": {csrf}, "daily_event_budget": {"700"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/settings/retention" {
		t.Errorf("retention form by slug: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	if st, out := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+pid+"/retention", nil); st != http.StatusOK || out["daily_event_budget"] != float64(700) {
		t.Errorf("retention after the form by slug: %d %v", st, out)
	}
	if st, _ := b.api(t, b.owner.Token, "PUT", "/api/private/projects/shop/secrets/DEPLOY_KEY", map[string]any{"value": "key-abcdefgh"}); st != http.StatusCreated {
		t.Errorf("secret by slug through the API: %d", st)
	}
	res, _ = br.post("/projects/shop/edit", url.Values{"_csrf": {csrf}, "slug": {"store"}, "name": {"Store"}, "repo_url": {"https://git.example/shop.git"},
		"default_branch": {"main"}, "run_command": {"make test"}, "run_timeout_minutes": {"30"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/projects/store" {
		t.Errorf("edit by slug, renamed: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	if res, _ := br.get("/projects/shop"); res.StatusCode != http.StatusNotFound {
		t.Errorf("the old slug after a rename: %d", res.StatusCode)
	}
	if st, out := b.api(t, b.owner.Token, "GET", "/api/private/projects/store/secrets", nil); st != http.StatusOK || len(out["secrets"].([]any)) != 2 {
		t.Errorf("secrets by the new slug: %d %v", st, out)
	}

	// Another organisation's slug is not found, not borrowed.
	if _, err := b.accounts.Bootstrap(ctx, "globex", "x@globex.test", testPassword); err != nil {
		t.Fatal(err)
	}
	br2 := b.browser(t)
	br2.login("x@globex.test", testPassword)
	for _, path := range []string{"/projects/store", "/projects/store/secrets", "/projects/" + pid} {
		if res, _ := br2.get(path); res.StatusCode != http.StatusNotFound {
			t.Errorf("%s by another organisation: %d", path, res.StatusCode)
		}
	}

	// A slug that reads as a page or an id is refused; nothing is stored.
	for _, slug := range []string{"new", uuid.NewString()} {
		st, out := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject(slug))
		if st != http.StatusUnprocessableEntity || out["error"] != "reserved_slug" {
			t.Errorf("slug %q: %d %v", slug, st, out)
		}
	}
	if n := countProjects(t, b); n != 1 {
		t.Errorf("%d projects stored, want 1", n)
	}
}
