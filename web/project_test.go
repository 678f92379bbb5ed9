package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
)

func validProject(slug string) map[string]any {
	return map[string]any{"slug": slug, "name": "Web shop", "repo_url": "https://git.example/shop.git",
		"default_branch": "main", "run_command": "make test"}
}

func countProjects(t *testing.T, b *testBundle) int {
	t.Helper()
	n, err := b.db.Bun.NewSelect().Table("projects").Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

func TestProjectAPICreateGetList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := validProject("shop")
	in["provider"] = "github"
	in["provider_repo"] = "acme/shop"
	in["provider_token"] = "ghp_supersecretvalue"
	in["surprise"] = "unknown fields are ignored"
	status, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", in)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %v", status, p)
	}
	if p["slug"] != "shop" || p["default_branch"] != "main" || p["has_provider_token"] != true {
		t.Fatalf("created project: %v", p)
	}
	if _, ok := p["provider_token"]; ok {
		t.Fatal("provider token returned")
	}
	id := p["id"].(string)
	if _, err := uuid.Parse(id); err != nil {
		t.Fatalf("id %q is no UUID", id)
	}
	status, got := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+id, nil)
	if status != http.StatusOK || got["id"] != id || got["run_command"] != "make test" {
		t.Fatalf("get: %d %v", status, got)
	}
	status, list := b.api(t, b.owner.Token, "GET", "/api/private/projects", nil)
	if status != http.StatusOK || len(list["projects"].([]any)) != 1 {
		t.Fatalf("list: %d %v", status, list)
	}
	// The provider token is encrypted at rest.
	var enc string
	if err := b.db.Bun.NewRaw(`SELECT provider_token_enc FROM projects WHERE id = ?`, id).Scan(context.Background(), &enc); err != nil {
		t.Fatal(err)
	}
	if enc == "" || strings.Contains(enc, "supersecret") {
		t.Fatalf("provider token not sealed: %q", enc)
	}
}

func TestProjectAPIRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	with := func(k string, v any) map[string]any {
		p := validProject("shop")
		if v == nil {
			delete(p, k)
		} else {
			p[k] = v
		}
		return p
	}
	cases := []struct {
		name   string
		body   any
		ctype  string
		status int
		code   string
		msg    string
	}{
		{"bad json", `{"slug":`, "application/json", 400, "invalid_json", "not valid JSON"},
		{"wrong type", `{"slug": 5}`, "application/json", 400, "invalid_json", `"slug"`},
		{"not json content type", `slug=shop`, "application/x-www-form-urlencoded", 415, "unsupported_media_type", "application/json"},
		{"missing slug", with("slug", nil), "", 422, "missing_slug", "slug is required"},
		{"bad slug", with("slug", "Shop!"), "", 422, "invalid_slug", "must match"},
		{"slug too long", with("slug", strings.Repeat("a", 64)), "", 422, "too_long_slug", "at most 63"},
		{"leading dash", with("slug", "-shop"), "", 422, "invalid_slug", "must match"},
		{"ftp url", with("repo_url", "ftp://x/y"), "", 422, "invalid_repo_url", "use https://, http:// or ssh://"},
		{"file url with a host", with("repo_url", "file://relative"), "", 422, "invalid_repo_url", "must not name a host"},
		{"transport helper", with("repo_url", "ext::sh -c id"), "", 422, "invalid_repo_url", "transport helpers"},
		{"empty branch", with("default_branch", "  "), "", 422, "missing_default_branch", "must not be empty"},
		{"bad branch", with("default_branch", "a..b"), "", 422, "invalid_default_branch", "not a valid branch"},
		{"empty command", with("run_command", ""), "", 422, "missing_run_command", "must not be empty"},
		{"huge command", with("run_command", strings.Repeat("x", 10001)), "", 422, "too_long_run_command", "at most 10000"},
		{"bad provider", with("provider", "bitbucket"), "", 422, "invalid_provider", "github, gitlab, gitea"},
		{"bad timeout", with("run_timeout_seconds", 0), "", 422, "invalid_run_timeout", "between 1 and 86400"},
		{"oversized body", `{"slug":"` + strings.Repeat("a", 1<<20) + `"}`, "application/json", 413, "payload_too_large", "at most"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var status int
			var out map[string]any
			if s, ok := tc.body.(string); ok {
				req, _ := http.NewRequest("POST", b.srv.URL+"/api/private/projects", strings.NewReader(s))
				req.Header.Set("Authorization", "Bearer "+b.owner.Token)
				req.Header.Set("Content-Type", tc.ctype)
				status, out = do(t, http.DefaultClient, req)
			} else {
				status, out = b.api(t, b.owner.Token, "POST", "/api/private/projects", tc.body)
			}
			if status != tc.status || out["error"] != tc.code || !strings.Contains(out["message"].(string), tc.msg) {
				t.Fatalf("got %d %v, want %d %s containing %q", status, out, tc.status, tc.code, tc.msg)
			}
		})
	}
	if n := countProjects(t, b); n != 0 {
		t.Fatalf("refused requests created %d projects", n)
	}
}

func TestProjectDuplicateSlugAndOrgIsolation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	status, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("shop"))
	if status != http.StatusCreated {
		t.Fatal(status)
	}
	status, out := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("shop"))
	if status != http.StatusConflict || out["error"] != "slug_taken" {
		t.Fatalf("duplicate slug: %d %v", status, out)
	}
	other, err := b.accounts.Bootstrap(context.Background(), "globex", "boss@globex.test", testPassword)
	if err != nil {
		t.Fatal(err)
	}
	// The same slug is free in another organisation …
	if status, _ := b.api(t, other.Token, "POST", "/api/private/projects", validProject("shop")); status != http.StatusCreated {
		t.Fatalf("same slug in another org: %d", status)
	}
	// … and one organisation never sees the other's project.
	id := p["id"].(string)
	if status, out := b.api(t, other.Token, "GET", "/api/private/projects/"+id, nil); status != http.StatusNotFound || out["error"] != "not_found" {
		t.Fatalf("other org's project: %d %v", status, out)
	}
	if status, _ := b.api(t, other.Token, "PATCH", "/api/private/projects/"+id, map[string]any{"name": "pwned"}); status != http.StatusNotFound {
		t.Fatalf("other org's update: %d", status)
	}
	_, list := b.api(t, other.Token, "GET", "/api/private/projects", nil)
	if len(list["projects"].([]any)) != 1 {
		t.Fatalf("other org lists %v", list)
	}
	for _, path := range []string{"/api/private/projects/not-a-uuid", "/api/private/projects/" + uuid.NewString()} {
		if status, _ := b.api(t, b.owner.Token, "GET", path, nil); status != http.StatusNotFound {
			t.Fatalf("%s: %d", path, status)
		}
	}
}

func TestViewersCannotWrite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	owner, err := b.accounts.Authenticate(context.Background(), b.owner.Token)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.accounts.AddMember(context.Background(), owner, "viewer@acme.test", testPassword, "viewer"); err != nil {
		t.Fatal(err)
	}
	br := b.browser(t)
	br.login("viewer@acme.test", testPassword)
	csrf := br.csrf("/")
	res, _ := br.post("/projects", url.Values{"_csrf": {csrf}, "slug": {"x"}, "repo_url": {"https://g/x"}, "default_branch": {"main"}, "run_command": {"true"}})
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("viewer create: %d", res.StatusCode)
	}
	if n := countProjects(t, b); n != 0 {
		t.Fatal("viewer created a project")
	}
	_, body := br.get("/projects")
	if strings.Contains(body, `data-testid="new-project"`) {
		t.Fatal("viewer sees the New project button")
	}
}

func TestProjectFormCreateAndEdit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	csrf := br.csrf("/projects/new")
	form := url.Values{"_csrf": {csrf}, "slug": {"api"}, "name": {"API"}, "repo_url": {"git@github.com:acme/api.git"},
		"default_branch": {"main"}, "run_command": {"go test ./..."}, "run_timeout_minutes": {"15"}}
	res, _ := br.post("/projects", form)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("create: %d", res.StatusCode)
	}
	loc := res.Header.Get("Location")
	_, body := br.get(loc)
	if !strings.Contains(body, "Project created.") || !strings.Contains(body, "go test ./...") {
		t.Fatal("project page after create")
	}
	_, body = br.get("/projects")
	if !strings.Contains(body, `data-slug="api"`) {
		t.Fatal("project not listed")
	}
	// A refusal re-renders the form with the message and keeps the input.
	form.Set("slug", "api")
	res, body = br.post("/projects", form)
	if res.StatusCode != http.StatusConflict || !strings.Contains(body, "already exists") || !strings.Contains(body, "go test ./...") {
		t.Fatalf("duplicate via form: %d", res.StatusCode)
	}
	form.Set("slug", "BAD SLUG")
	res, body = br.post("/projects", form)
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "must match") {
		t.Fatalf("bad slug via form: %d", res.StatusCode)
	}
	// Edit.
	edit := loc + "/edit"
	csrf = br.csrf(edit)
	form = url.Values{"_csrf": {csrf}, "slug": {"api"}, "name": {"API v2"}, "repo_url": {"https://git.example/api.git"},
		"default_branch": {"trunk"}, "run_command": {"make"}, "run_timeout_minutes": {"45"}}
	res, _ = br.post(edit, form)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("edit: %d", res.StatusCode)
	}
	var branch string
	var timeout int
	if err := b.db.Bun.NewRaw(`SELECT default_branch, run_timeout_seconds FROM projects WHERE slug = 'api'`).Scan(context.Background(), &branch, &timeout); err != nil {
		t.Fatal(err)
	}
	if branch != "trunk" || timeout != 2700 {
		t.Fatalf("after edit: %s %d", branch, timeout)
	}
	form.Set("run_timeout_minutes", "zero")
	res, body = br.post(edit, form)
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "whole number of minutes") {
		t.Fatalf("bad timeout via form: %d", res.StatusCode)
	}
}
