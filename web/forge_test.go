package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"anvil/domain"
	"anvil/domain/forgeapi"
	"anvil/domain/forgestatus"
	"anvil/domain/repourl"
	"anvil/jobs/jobstest"
	"anvil/jobs/sandbox"
)

const forgeHead = "5c8e2b7b1a0f4c9e8d7a6b5c4d3e2f1a0b9c8d7e"

// fakeGitHub implements the two GitHub REST endpoints "run the latest
// commit" and the statuses use: GET /repos/{o}/{r}/branches/{branch} (the
// documented shape: commit.sha) and POST /repos/{o}/{r}/statuses/{sha}.
type fakeGitHub struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []string // "METHOD path auth"
}

func newFakeGitHub(t *testing.T) *fakeGitHub {
	f := &fakeGitHub{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.reqs = append(f.reqs, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/api/v3/repos/acme/shop/branches/main":
			fmt.Fprintf(w, `{"name":"main","commit":{"sha":%q}}`, forgeHead)
		case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/api/v3/repos/acme/shop/statuses/"):
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, `{"id":1,"state":"pending"}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"message":"Not Found"}`)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeGitHub) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.reqs...)
}

// setupLatest is a cockpit whose "run the latest commit" asks the forge's
// API, or git ls-remote (unconfined) for projects without a provider; local
// repositories are allowed, as the operator's ANVIL_CHECKOUT_ALLOW_LOCAL does.
func setupLatest(t *testing.T) *testBundle {
	t.Helper()
	policy := repourl.Policy{AllowLocal: true, Resolver: publicResolver{}}
	git, err := sandbox.NewGit(false, policy)
	if err != nil {
		t.Fatal(err)
	}
	dopts := testDomainOptions()
	dopts.CheckoutPolicy = policy
	dopts.LatestCommit = forgestatus.LatestCommit(forgeapi.NewHTTPClient(policy), git.Head)
	return setupFull(t, testOptions(), dopts)
}

// latestRun is the project's one run pinned by "run the latest commit".
func (b *testBundle) latestRuns(t *testing.T, project string) []string {
	t.Helper()
	var shas []string
	err := b.db.Bun.NewRaw(`SELECT commit_sha FROM project_runs WHERE project_id = ? AND trigger = 'manual' AND branch = 'main' ORDER BY number`, project).
		Scan(context.Background(), &shas)
	if err != nil {
		t.Fatal(err)
	}
	return shas
}

// "Run the latest commit" through the private API: the forge's branch
// endpoint when a provider is configured, git ls-remote of a real
// repository when none is; a branch that does not exist is a clear 422 and
// no run.
func TestRunLatestCommitThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setupLatest(t)
	f := newFakeGitHub(t)
	in := validProject("shop")
	in["provider"], in["provider_api_url"], in["provider_repo"], in["provider_token"] = "github", f.srv.URL+"/api/v3", "acme/shop", "ghp_test"
	status, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", in)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %v", status, p)
	}
	forged := p["id"].(string)
	status, out := b.api(t, b.owner.Token, "POST", "/api/private/projects/"+forged+"/runs", map[string]any{"ref": "latest"})
	if status != http.StatusAccepted || out["run_id"] == nil {
		t.Fatalf("latest through the forge: %d %v", status, out)
	}
	if got := b.latestRuns(t, forged); len(got) != 1 || got[0] != forgeHead {
		t.Fatalf("runs pinned to %v, want %s", got, forgeHead)
	}
	if got := f.requests(); len(got) != 1 || got[0] != "GET /api/v3/repos/acme/shop/branches/main Bearer ghp_test" {
		t.Fatalf("forge requests %q", got)
	}

	repo := jobstest.GitRepo(t)
	local := validProject("local")
	local["repo_url"] = repo.URL
	status, p = b.api(t, b.owner.Token, "POST", "/api/private/projects", local)
	if status != http.StatusCreated {
		t.Fatalf("create local: %d %v", status, p)
	}
	plain := p["id"].(string)
	status, out = b.api(t, b.owner.Token, "POST", "/api/private/projects/"+plain+"/runs", map[string]any{"ref": "latest"})
	if status != http.StatusAccepted {
		t.Fatalf("latest through git ls-remote: %d %v", status, out)
	}
	if got := b.latestRuns(t, plain); len(got) != 1 || got[0] != repo.Head {
		t.Fatalf("runs pinned to %v, want the repository's head %s", got, repo.Head)
	}

	status, out = b.api(t, b.owner.Token, "PATCH", "/api/private/projects/"+plain, map[string]any{"default_branch": "gone"})
	if status != http.StatusOK {
		t.Fatalf("patch: %d %v", status, out)
	}
	status, out = b.api(t, b.owner.Token, "POST", "/api/private/projects/"+plain+"/runs", map[string]any{"ref": "latest"})
	if msg, _ := out["message"].(string); status != http.StatusUnprocessableEntity || out["error"] != "latest_unresolved" || !strings.Contains(msg, `"gone"`) {
		t.Fatalf("missing branch: %d %v", status, out)
	}
	status, out = b.api(t, b.owner.Token, "POST", "/api/private/projects/"+plain+"/runs", map[string]any{"ref": "latest", "branch": "main"})
	if status != http.StatusUnprocessableEntity || out["error"] != "invalid_ref" {
		t.Fatalf("ref with a branch: %d %v", status, out)
	}
	if n := b.count(t, "project_runs", "project_id = ?", plain); n != 1 {
		t.Fatalf("%d runs after the refusals", n)
	}
}

// The project page's "Run latest commit" button: shown to members, not to
// viewers; it posts ref=latest with the CSRF token and answers the queue
// with the run pinned to the repository's head.
func TestRunLatestCommitButton(t *testing.T) {
	t.Parallel()
	b := setupLatest(t)
	repo := jobstest.GitRepo(t)
	local := validProject("local")
	local["repo_url"] = repo.URL
	status, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", local)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %v", status, p)
	}
	id := p["id"].(string)
	page := "/projects/" + id
	_, viewer := b.person(t, domain.RoleViewer)
	if _, body := viewer.get(page); strings.Contains(body, `data-testid="run-latest"`) {
		t.Fatal("a viewer sees the button")
	}
	_, member := b.person(t, domain.RoleMember)
	_, body := member.get(page)
	button := regexpBetween(body, `data-testid="run-latest"`, "</button>")
	// The page links by slug (docs/contracts/private-api.md, projects by slug).
	if !strings.Contains(button, `hx-post="/projects/`+p["slug"].(string)+`/runs"`) || !strings.Contains(button, `&#34;ref&#34;: &#34;latest&#34;`) && !strings.Contains(button, `"ref": "latest"`) {
		t.Fatalf("button %q", button)
	}
	if status, _ := member.htmx(page+"/runs", "", url.Values{"ref": {"latest"}}); status != http.StatusForbidden {
		t.Fatalf("without CSRF: %d", status)
	}
	// The button leads to the new run's page (HX-Redirect), which names
	// the commit it is pinned to.
	req, _ := http.NewRequest("POST", member.base+page+"/runs", strings.NewReader(url.Values{"ref": {"latest"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("HX-Request", "true")
	req.Header.Set("X-CSRF-Token", member.csrf(page))
	res, err := member.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	to := res.Header.Get("HX-Redirect")
	if res.StatusCode != http.StatusNoContent || !runPagePath.MatchString(to) {
		t.Fatalf("button: %d, HX-Redirect %q", res.StatusCode, to)
	}
	if _, body = member.get(to); !strings.Contains(body, repo.Head[:7]) {
		t.Fatalf("the run's page does not name %s", repo.Head[:7])
	}
	if got := b.latestRuns(t, id); len(got) != 1 || got[0] != repo.Head {
		t.Fatalf("runs pinned to %v, want %s", got, repo.Head)
	}
}

// The status context: anvil/<slug> unless set, kept when the slug changes,
// validated, and editable on the project's form.
func TestProjectStatusContext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	status, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("shop"))
	if status != http.StatusCreated || p["status_context"] != "anvil/shop" {
		t.Fatalf("create: %d %v", status, p)
	}
	id := p["id"].(string)
	path := "/api/private/projects/" + id
	if status, p = b.api(t, b.owner.Token, "PATCH", path, map[string]any{"slug": "store"}); status != http.StatusOK || p["status_context"] != "anvil/shop" {
		t.Fatalf("after a rename: %d %v", status, p)
	}
	for _, bad := range []struct{ value, code string }{
		{"", "missing_status_context"}, {"   ", "missing_status_context"}, {"ci\x07anvil", "invalid_status_context"},
		{"ci/\u0085anvil", "invalid_status_context"}, {strings.Repeat("é", 256), "too_long_status_context"},
	} {
		status, out := b.api(t, b.owner.Token, "PATCH", path, map[string]any{"status_context": bad.value})
		if status != http.StatusUnprocessableEntity || out["error"] != bad.code {
			t.Errorf("%q: %d %v, want %s", bad.value, status, out, bad.code)
		}
	}
	long := strings.Repeat("é", 255)
	if status, p = b.api(t, b.owner.Token, "PATCH", path, map[string]any{"status_context": long}); status != http.StatusOK || p["status_context"] != long {
		t.Fatalf("255 characters: %d", status)
	}
	if status, p = b.api(t, b.owner.Token, "PATCH", path, map[string]any{"status_context": " ci/anvil "}); status != http.StatusOK || p["status_context"] != "ci/anvil" {
		t.Fatalf("set: %d %v", status, p)
	}
	status, out := b.api(t, b.owner.Token, "POST", "/api/private/projects", map[string]any{"slug": "api", "repo_url": "https://git.example/api.git",
		"default_branch": "main", "run_command": "make", "status_context": "ci/api"})
	if status != http.StatusCreated || out["status_context"] != "ci/api" {
		t.Fatalf("create with a context: %d %v", status, out)
	}

	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	edit := "/projects/" + id + "/edit"
	_, body := br.get(edit)
	if field := regexpBetween(body, `id="status_context"`, ">"); !strings.Contains(field, `value="ci/anvil"`) {
		t.Fatalf("form field %q", field)
	}
	form := url.Values{"_csrf": {br.csrf(edit)}, "slug": {"store"}, "name": {"Store"}, "repo_url": {"https://git.example/shop.git"},
		"default_branch": {"main"}, "run_command": {"make"}, "status_context": {strings.Repeat("x", 256)}}
	res, body := br.post(edit, form)
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(regexpBetween(body, `data-testid="field-error-status_context"`, "</p>"), "Status context must be at most 255 characters") {
		t.Fatalf("long context via form: %d", res.StatusCode)
	}
	form.Set("status_context", "")
	if res, _ = br.post(edit, form); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("empty keeps: %d", res.StatusCode)
	}
	form.Set("status_context", "deploy/anvil")
	if res, _ = br.post(edit, form); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("set via form: %d", res.StatusCode)
	}
	if _, p = b.api(t, b.owner.Token, "GET", path, nil); p["status_context"] != "deploy/anvil" {
		t.Fatalf("after the form: %v", p["status_context"])
	}
}
