//go:build e2e

package e2e

import (
	"strings"
	"testing"

	"anvil/jobs/jobstest"
)

// TestProjectFormRefusalsJourney: with local checkouts not allowed, a form
// with several mistakes — a local repository among them — shows every one
// beside its field in the label's words, and saves nothing; once fixed, a
// repository host that does not resolve is saved with a warning beside the
// Repository URL.
func TestProjectFormRefusalsJourney(t *testing.T) {
	t.Parallel()
	s := startServer(t, "ANVIL_CHECKOUT_ALLOW_LOCAL=false")
	page := loggedIn(t, s)
	repo := jobstest.GitRepo(t)

	gotoPage(t, page, s.URL+"/projects/new")
	for id, v := range map[string]string{
		"slug": "Widgets!", "repo_url": repo.URL, "default_branch": "a..b", "run_command": "make test", "run_timeout_minutes": "0",
	} {
		must(t, page.Locator("#"+id).Fill(v), "fill "+id)
	}
	must(t, testID(page, "project-save").Click(), "save")
	must(t, expect.Locator(testID(page, "form-error")).ToContainText("4 fields need a change"), "summary of every refusal")
	for field, want := range map[string]string{
		"slug":                `Slug "Widgets!" must match`,
		"repo_url":            "Repository URL is a local checkout, refused",
		"default_branch":      `Default branch "a..b" is not a valid branch name`,
		"run_timeout_minutes": "Run timeout (minutes) must be a whole number of minutes between 1 and 1440",
	} {
		must(t, expect.Locator(testID(page, "field-error-"+field)).ToContainText(want), "error beside "+field)
	}
	must(t, expect.Locator(testID(page, "field-error-repo_url")).ToContainText("ANVIL_CHECKOUT_ALLOW_LOCAL=true"), "the refusal names the variable")
	must(t, expect.Locator(page.Locator("#repo_url")).ToHaveValue(repo.URL), "the form keeps what was typed")
	screenshot(t, page, "refusals")

	for id, v := range map[string]string{
		"slug": "widgets", "repo_url": "https://git.nowhere.invalid/acme/widgets.git", "default_branch": "main", "run_timeout_minutes": "30",
	} {
		must(t, page.Locator("#"+id).Fill(v), "fill "+id)
	}
	must(t, testID(page, "project-save").Click(), "save again")
	must(t, expect.Locator(testID(page, "form-saved")).ToBeVisible(), "saved")
	must(t, expect.Locator(testID(page, "field-warning-repo_url")).ToContainText("does not resolve"), "warning beside the repository")
	must(t, expect.Locator(testID(page, "form-error")).ToHaveCount(0), "no refusal left")
	screenshot(t, page, "saved-with-warning")

	gotoPage(t, page, s.URL+"/projects")
	must(t, expect.Locator(page.Locator(`[data-testid=project-row][data-slug="widgets"]`)).ToBeVisible(), "the project exists")
}

// TestProjectRepositoryWarningJourney: a malformed repository address is
// refused beside its field, with every field kept; a repository that does
// not answer git ls-remote is saved with a warning beside the Repository
// URL, on the edit page the save redirected to (a reload shows the form,
// never a 409); pointing it at one that answers saves without one.
func TestProjectRepositoryWarningJourney(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	page := loggedIn(t, s)
	repo := jobstest.GitRepo(t)

	gotoPage(t, page, s.URL+"/projects/new")
	for id, v := range map[string]string{
		"slug": "ghost", "repo_url": "github.com/acme/ghost", "default_branch": "main", "run_command": "go test ./...",
	} {
		must(t, page.Locator("#"+id).Fill(v), "fill "+id)
	}
	must(t, testID(page, "project-save").Click(), "save a malformed address")
	must(t, expect.Locator(testID(page, "field-error-repo_url")).ToContainText("Repository URL is malformed"), "the refusal beside the repository")
	for id, v := range map[string]string{"slug": "ghost", "repo_url": "github.com/acme/ghost", "run_command": "go test ./..."} {
		must(t, expect.Locator(page.Locator("#"+id)).ToHaveValue(v), "the refused form keeps "+id)
	}
	must(t, page.Locator("#repo_url").Fill(repo.URL+"-does-not-exist"), "fill repo_url")
	must(t, testID(page, "project-save").Click(), "save")
	must(t, expect.Locator(testID(page, "form-saved")).ToBeVisible(), "saved")
	must(t, expect.Locator(testID(page, "field-warning-repo_url")).ToContainText("did not answer (git ls-remote)"), "warning beside the repository")
	if !strings.HasSuffix(page.URL(), "/projects/ghost/edit") {
		t.Fatalf("the save with a warning led to %s, not the project's edit page", page.URL())
	}
	screenshot(t, page, "repository-silent")
	res, err := page.Reload()
	must(t, err, "reload")
	if res.Status() != 200 {
		t.Fatalf("a reload after the save: %d", res.Status())
	}
	must(t, expect.Locator(testID(page, "form-error")).ToHaveCount(0), "a reload submits nothing again")
	must(t, expect.Locator(testID(page, "form-saved")).ToHaveCount(0), "the warning is shown once")

	must(t, page.Locator("#repo_url").Fill(repo.URL), "fix the repository")
	must(t, testID(page, "project-save").Click(), "save the fix")
	must(t, expect.Locator(testID(page, "flash")).ToBeVisible(), "saved without a warning: off to the project page")
}
