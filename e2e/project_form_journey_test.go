//go:build e2e

package e2e

import (
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

// TestProjectRepositoryWarningJourney: a repository that does not answer
// git ls-remote is saved with a warning beside the Repository URL; pointing
// it at one that answers saves without one.
func TestProjectRepositoryWarningJourney(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	page := loggedIn(t, s)
	repo := jobstest.GitRepo(t)

	gotoPage(t, page, s.URL+"/projects/new")
	for id, v := range map[string]string{
		"slug": "ghost", "repo_url": repo.URL + "-does-not-exist", "default_branch": "main", "run_command": "true",
	} {
		must(t, page.Locator("#"+id).Fill(v), "fill "+id)
	}
	must(t, testID(page, "project-save").Click(), "save")
	must(t, expect.Locator(testID(page, "form-saved")).ToBeVisible(), "saved")
	must(t, expect.Locator(testID(page, "field-warning-repo_url")).ToContainText("did not answer (git ls-remote)"), "warning beside the repository")
	screenshot(t, page, "repository-silent")

	must(t, page.Locator("#repo_url").Fill(repo.URL), "fix the repository")
	must(t, testID(page, "project-save").Click(), "save the fix")
	must(t, expect.Locator(testID(page, "flash")).ToBeVisible(), "saved without a warning: off to the project page")
}
