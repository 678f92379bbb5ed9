package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// A repository address that is local — a file, a path, or an address on
// the server's own or private network — is refused at save, with a message
// that names local checkouts and the operator's variable; nothing is saved.
func TestProjectSaveRefusesLocalCheckouts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, u := range []string{"file:///srv/anvil", "/srv/other-org/repo.git", "http://127.0.0.1:5432/x.git", "http://[::1]/x",
		"https://10.0.0.8/x.git", "http://169.254.169.254/latest", "git@192.168.1.5:o/r.git", "https://[fd00::1]/r"} {
		p := validProject("shop")
		p["repo_url"] = u
		status, out := b.api(t, b.owner.Token, "POST", "/api/private/projects", p)
		msg, _ := out["message"].(string)
		if status != http.StatusUnprocessableEntity || out["error"] != "local_repo_url" ||
			!strings.Contains(msg, "local checkout") || !strings.Contains(msg, "ANVIL_CHECKOUT_ALLOW_LOCAL=true") {
			t.Fatalf("POST %s: %d %v", u, status, out)
		}
	}
	if n := countProjects(t, b); n != 0 {
		t.Fatalf("refused requests created %d projects", n)
	}
	// PATCH: the same refusal, and the stored address stays.
	status, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("shop"))
	if status != http.StatusCreated {
		t.Fatalf("create: %d %v", status, p)
	}
	status, out := b.api(t, b.owner.Token, "PATCH", "/api/private/projects/"+p["id"].(string), map[string]any{"repo_url": "file:///etc"})
	if status != http.StatusUnprocessableEntity || out["error"] != "local_repo_url" {
		t.Fatalf("PATCH: %d %v", status, out)
	}
	_, got := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+p["id"].(string), nil)
	if got["repo_url"] != "https://git.example/shop.git" {
		t.Fatalf("repo_url %v after a refused PATCH", got["repo_url"])
	}
}

// Every refused field is reported at once: the API joins them in its one
// message; the form shows each beside its field in the label's words.
func TestProjectFormShowsEveryErrorBesideItsField(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bad := map[string]any{"slug": "Shop!", "repo_url": "ftp://x/y", "default_branch": "a..b", "run_command": "make",
		"provider": "bitbucket", "run_timeout_seconds": 0}
	status, out := b.api(t, b.owner.Token, "POST", "/api/private/projects", bad)
	msg, _ := out["message"].(string)
	if status != http.StatusUnprocessableEntity || out["error"] != "invalid_slug" {
		t.Fatalf("API: %d %v", status, out)
	}
	for _, want := range []string{"slug \"Shop!\" must match", "repo_url is not a supported", "default_branch \"a..b\"", "provider must be one of", "run_timeout_seconds must be between"} {
		if !strings.Contains(msg, want) {
			t.Errorf("API message lacks %q: %s", want, msg)
		}
	}

	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	form := url.Values{"_csrf": {br.csrf("/projects/new")}, "slug": {"Shop!"}, "name": {"x"}, "repo_url": {"http://127.0.0.1:8080/r.git"},
		"default_branch": {"a..b"}, "run_command": {"make"}, "provider": {"bitbucket"}, "run_timeout_minutes": {"soon"}}
	res, body := br.post("/projects", form)
	if res.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("form: status %d", res.StatusCode)
	}
	for field, want := range map[string]string{
		"slug":                `Slug &#34;Shop!&#34; must match`,
		"repo_url":            "Repository URL is a local checkout, refused",
		"default_branch":      "Default branch &#34;a..b&#34; is not a valid branch name",
		"provider":            "Provider must be one of github, gitlab, gitea",
		"run_timeout_minutes": "Run timeout (minutes) must be a whole number of minutes between 1 and 1440",
	} {
		i := strings.Index(body, `data-testid="field-error-`+field+`"`)
		if i < 0 {
			t.Errorf("no error beside %s", field)
			continue
		}
		if !strings.Contains(body[i:], want) || strings.Index(body[i:], want) > 200 {
			t.Errorf("the error beside %s does not say %q", field, want)
		}
	}
	if strings.Contains(body, "run_timeout_seconds") || strings.Contains(body, ">repo_url ") {
		t.Errorf("the form names fields by their input names")
	}
	if !strings.Contains(body, "5 fields need a change") || !strings.Contains(body, "ANVIL_CHECKOUT_ALLOW_LOCAL=true") {
		t.Errorf("the summary does not list every refusal")
	}
	if n := countProjects(t, b); n != 0 {
		t.Fatalf("refused forms created %d projects", n)
	}
}

// A repository that does not answer git ls-remote is saved with a warning:
// in the API's answer and beside the form's Repository URL.
func TestProjectSaveWarnsWhenTheRepositoryDoesNotAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := validProject("shop")
	p["repo_url"] = "https://git.example/missing.git"
	status, out := b.api(t, b.owner.Token, "POST", "/api/private/projects", p)
	warnings, _ := out["warnings"].([]any)
	if status != http.StatusCreated || len(warnings) != 1 || !strings.Contains(warnings[0].(string), "did not answer (git ls-remote)") {
		t.Fatalf("create: %d %v", status, out)
	}
	status, out = b.api(t, b.owner.Token, "PATCH", "/api/private/projects/"+out["id"].(string), map[string]any{"repo_url": "https://git.example/shop.git"})
	if status != http.StatusOK || out["warnings"] != nil {
		t.Fatalf("PATCH to an answering repository: %d %v", status, out)
	}

	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	form := url.Values{"_csrf": {br.csrf("/projects/new")}, "slug": {"web"}, "repo_url": {"https://git.example/missing-web.git"},
		"default_branch": {"main"}, "run_command": {"make"}}
	// Saved, and redirected (303) to its edit page, which shows the warning
	// once: a reload shows the form again, never a second create's 409.
	res, body := br.post("/projects", form)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/projects/web/edit" {
		t.Fatalf("form with a silent repository: %d %s", res.StatusCode, body)
	}
	res, body = br.get("/projects/web/edit")
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `data-testid="form-saved"`) ||
		!strings.Contains(body, `data-testid="field-warning-repo_url"`) || !strings.Contains(body, "did not answer (git ls-remote)") {
		t.Fatalf("the edit page after a save with a silent repository: %d %s", res.StatusCode, body)
	}
	if res, body = br.get("/projects/web/edit"); res.StatusCode != http.StatusOK || strings.Contains(body, `data-testid="form-saved"`) {
		t.Fatalf("a reload of the edit page: %d (the warning is shown once)", res.StatusCode)
	}
	if n := countProjects(t, b); n != 2 {
		t.Fatalf("%d projects, want 2 (warnings do not refuse)", n)
	}
	// An answering repository: saved, and off to the project page.
	form.Set("slug", "api")
	form.Set("repo_url", "https://git.example/api.git")
	if res, _ := br.post("/projects", form); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("form with an answering repository: %d", res.StatusCode)
	}
}
