package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"anvil/domain"
)

// TestProjectDeletionHidesItEverywhereAtOnce deletes a project through the
// private API and checks, before any erasure job ran, that it is gone from
// every list and page, that its feed token and webhook stop, and that the
// typed confirmation and the role are required.
func TestProjectDeletionHidesItEverywhereAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	f := newFeedFix(t, b)
	if r := f.send(t, single, f.token, ev(newID())); r.Status != http.StatusAccepted {
		t.Fatalf("ingest: %d %s", r.Status, r.Raw)
	}
	gh := b.createHook(t, f.projectID, "github", nil)
	first := b.send(t, gh, delivery{event: "push", id: "d-1", body: pushBody("refs/heads/main", shaPrev, shaMain), sign: true})
	if first.status != http.StatusOK || first.runID() == "" {
		t.Fatalf("delivery: %d %v", first.status, first.body)
	}
	kept := b.newProject(t, "blog", "main")

	// A member may not; a wrong or missing confirmation changes nothing.
	if _, err := b.accounts.AddMember(ctx, ownerPrincipal(t, b), "member@acme.test", testPassword, domain.RoleMember); err != nil {
		t.Fatal(err)
	}
	_, member, err := b.accounts.Login(ctx, "member@acme.test", testPassword)
	if err != nil {
		t.Fatal(err)
	}
	memberToken, err := b.accounts.CreateToken(ctx, member, "m")
	if err != nil {
		t.Fatal(err)
	}
	if st, out := b.api(t, memberToken, "DELETE", "/api/private/projects/"+f.projectID, map[string]any{"confirm": "shop"}); st != http.StatusForbidden {
		t.Fatalf("member: %d %v", st, out)
	}
	for _, body := range []map[string]any{{}, {"confirm": "blog"}} {
		st, out := b.api(t, b.owner.Token, "DELETE", "/api/private/projects/"+f.projectID, body)
		if st != http.StatusUnprocessableEntity || out["error"] != "confirmation_mismatch" {
			t.Fatalf("confirm %v: %d %v", body, st, out)
		}
	}
	if st, _ := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+f.projectID, nil); st != http.StatusOK {
		t.Fatalf("a refused deletion deleted: %d", st)
	}

	st, out := b.api(t, b.owner.Token, "DELETE", "/api/private/projects/"+f.projectID, map[string]any{"confirm": "shop"})
	if st != http.StatusAccepted || out["status"] != "deleting" {
		t.Fatalf("delete: %d %v", st, out)
	}
	// Gone from the API at once.
	if st, _ := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+f.projectID, nil); st != http.StatusNotFound {
		t.Errorf("get after delete: %d", st)
	}
	_, list := b.api(t, b.owner.Token, "GET", "/api/private/projects", nil)
	if ps := list["projects"].([]any); len(ps) != 1 || ps[0].(map[string]any)["id"] != kept {
		t.Errorf("list after delete: %v", list)
	}
	_, incs := b.api(t, b.owner.Token, "GET", "/api/private/incidents", nil)
	if strings.Contains(stringOf(incs), f.projectID) {
		t.Errorf("the inbox API lists the deleted project's incidents: %v", incs)
	}
	for _, path := range []string{"/api/private/runs/" + first.runID(), "/api/private/projects/" + f.projectID + "/connections",
		"/api/private/projects/" + f.projectID + "/webhooks"} {
		if st, _ := b.api(t, b.owner.Token, "GET", path, nil); st != http.StatusNotFound {
			t.Errorf("GET %s after delete: %d", path, st)
		}
	}
	// Its feed token and its webhook stop at once.
	if r := f.send(t, single, f.token, ev(newID())); r.Status != http.StatusUnauthorized {
		t.Errorf("feed after delete: %d %s", r.Status, r.Raw)
	}
	if a := b.send(t, gh, delivery{event: "push", id: "d-2", body: pushBody("refs/heads/main", shaPrev, shaMain), sign: true}); a.status != http.StatusNotFound {
		t.Errorf("webhook after delete: %d %v", a.status, a.body)
	}
	// And from every page.
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	for _, path := range []string{"/", "/projects", "/inbox"} {
		res, body := br.get(path)
		if res.StatusCode != http.StatusOK || strings.Contains(body, f.projectID) || strings.Contains(body, ">shop<") {
			t.Errorf("%s after delete: %d, mentions the project: %v", path, res.StatusCode, strings.Contains(body, f.projectID))
		}
	}
	for _, path := range []string{"/projects/" + f.projectID, "/projects/" + f.projectID + "/edit", "/projects/" + f.projectID + "/feed",
		"/projects/" + f.projectID + "/webhooks", "/projects/shop", "/runs/" + first.runID(), "/runs/" + first.runID() + "/log.txt"} {
		if res, _ := br.get(path); res.StatusCode != http.StatusNotFound {
			t.Errorf("%s after delete: %d", path, res.StatusCode)
		}
	}
	// The audit log says who deleted it.
	_, audit := b.api(t, b.owner.Token, "GET", "/api/private/audit?kind=project.deleted", nil)
	if es := audit["entries"].([]any); len(es) != 1 || es[0].(map[string]any)["target"] != "shop" || es[0].(map[string]any)["actor_email"] != "owner@acme.test" {
		t.Errorf("audit: %v", audit)
	}
}

func stringOf(v any) string {
	var sb strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case string:
			sb.WriteString(x + " ")
		}
	}
	walk(v)
	return sb.String()
}

// TestDeletionForms: the project's edit page and the settings page delete
// after the slug is typed; a wrong one is refused on the page.
func TestDeletionForms(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.newProject(t, "shop", "main")
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	_, edit := br.get("/projects/" + p + "/edit")
	if !strings.Contains(edit, `data-testid="delete-zone"`) || !strings.Contains(edit, `pattern="shop"`) {
		t.Fatalf("the edit page has no deletion form")
	}
	csrf := br.csrf("/projects/" + p + "/edit")
	res, body := br.post("/projects/"+p+"/delete", url.Values{"_csrf": {csrf}, "confirm": {"sho"}})
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="delete-error"`) || !strings.Contains(body, "&#34;shop&#34;") {
		t.Fatalf("wrong confirmation: %d", res.StatusCode)
	}
	res, _ = br.post("/projects/"+p+"/delete", url.Values{"_csrf": {csrf}, "confirm": {"shop"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/projects" {
		t.Fatalf("delete: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	if _, list := br.get("/projects"); !strings.Contains(list, "Project deleted.") || strings.Contains(list, p) {
		t.Errorf("the project list after the deletion")
	}

	// The organisation, from the settings page, by its owner only.
	if _, err := b.accounts.AddMember(context.Background(), ownerPrincipal(t, b), "admin@acme.test", testPassword, domain.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	admin := b.browser(t)
	admin.login("admin@acme.test", testPassword)
	if _, s := admin.get("/settings"); strings.Contains(s, `data-testid="delete-zone"`) {
		t.Errorf("an admin is offered the organisation's deletion")
	}
	_, settings := br.get("/settings")
	if !strings.Contains(settings, `pattern="acme"`) {
		t.Fatalf("the owner's settings page has no deletion form")
	}
	csrf = br.csrf("/settings")
	if res, _ := br.post("/settings/organization/delete", url.Values{"_csrf": {csrf}, "confirm": {"acm"}}); res.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("wrong confirmation: %d", res.StatusCode)
	}
	res, _ = br.post("/settings/organization/delete", url.Values{"_csrf": {csrf}, "confirm": {"acme"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login" {
		t.Fatalf("delete organisation: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	// Everyone is out: both browsers' sessions and the owner's API token.
	for _, who := range []*browser{br, admin} {
		if res, _ := who.get("/"); res.StatusCode != http.StatusSeeOther {
			t.Errorf("a session of the deleted organisation: %d", res.StatusCode)
		}
	}
	if st, _ := b.api(t, b.owner.Token, "GET", "/api/private/projects", nil); st != http.StatusUnauthorized {
		t.Errorf("the owner's token after the organisation's deletion: %d", st)
	}
}

// TestProjectDeletionBySlug: the DELETE and the page's form take the slug
// like every other project path, and a DELETE without a body is a missing
// confirmation (422 confirmation_mismatch), not a malformed request — with or
// without a Content-Type.
func TestProjectDeletionBySlug(t *testing.T) {
	t.Parallel()
	b := setup(t)
	shop := b.newProject(t, "shop", "main")
	blog := b.newProject(t, "blog", "main")

	for _, body := range []any{nil, "", " "} {
		st, out := b.api(t, b.owner.Token, "DELETE", "/api/private/projects/shop", body)
		if st != http.StatusUnprocessableEntity || out["error"] != "confirmation_mismatch" {
			t.Fatalf("DELETE by slug, body %q: %d %v, want 422 confirmation_mismatch", body, st, out)
		}
		st, out = b.api(t, b.owner.Token, "DELETE", "/api/private/projects/"+shop, body)
		if st != http.StatusUnprocessableEntity || out["error"] != "confirmation_mismatch" {
			t.Fatalf("DELETE by id, body %q: %d %v, want 422 confirmation_mismatch", body, st, out)
		}
	}
	if st, _ := b.api(t, b.owner.Token, "GET", "/api/private/projects/shop", nil); st != http.StatusOK {
		t.Fatalf("a refused deletion deleted: %d", st)
	}
	st, out := b.api(t, b.owner.Token, "DELETE", "/api/private/projects/shop", map[string]any{"confirm": "shop"})
	if st != http.StatusAccepted || out["project_id"] != shop || out["status"] != "deleting" {
		t.Fatalf("DELETE by slug: %d %v", st, out)
	}
	if st, _ := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+shop, nil); st != http.StatusNotFound {
		t.Fatalf("the deleted project: %d", st)
	}
	if st, _ := b.api(t, b.owner.Token, "DELETE", "/api/private/projects/shop", map[string]any{"confirm": "shop"}); st != http.StatusNotFound {
		t.Fatalf("DELETE of a deleted slug: %d, want 404", st)
	}

	// The page's form, by slug.
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	csrf := br.csrf("/projects/blog/edit")
	res, body := br.post("/projects/blog/delete", url.Values{"_csrf": {csrf}, "confirm": {"blo"}})
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="delete-error"`) {
		t.Fatalf("form by slug, wrong confirmation: %d", res.StatusCode)
	}
	res, _ = br.post("/projects/blog/delete", url.Values{"_csrf": {csrf}, "confirm": {"blog"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/projects" {
		t.Fatalf("form by slug: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	if st, _ := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+blog, nil); st != http.StatusNotFound {
		t.Fatalf("the project deleted by the form: %d", st)
	}
}
