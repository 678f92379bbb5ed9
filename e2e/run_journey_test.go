//go:build e2e

package e2e

import (
	"regexp"
	"testing"

	"anvil/internal/anviltest"
	"anvil/jobs/jobstest"
)

// apiJSON calls the private API with the owner's token.
func apiJSON(t *testing.T, s *server, method, path string, body any) map[string]any {
	t.Helper()
	return anviltest.MustJSON(t, s.Token, method, s.URL+path, body)
}

// TestRunJourney: press "Run now", watch the log arrive live, cancel the
// run from its page; then a failing command fails with its exit code.
func TestRunJourney(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	repo := jobstest.GitRepo(t)
	p := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{
		"slug": "live", "name": "Live logs", "repo_url": repo.URL, "default_branch": "main",
		"run_command": "echo line-one; i=0; while [ $i -lt 600 ]; do i=$((i+1)); echo tick $i; sleep 0.1; done",
	})
	pid := p["id"].(string)
	page := loggedIn(t, s)

	gotoPage(t, page, s.URL+"/projects/"+pid)
	must(t, expect.Locator(testID(page, "no-active-run")).ToBeVisible(), "empty queue")
	screenshot(t, page, "project")
	must(t, testID(page, "run-now").Click(), "run now")
	// Run now goes to the run's page, its log following.
	must(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/runs/[0-9a-f-]{36}$`)), "run now opens the run's page")
	must(t, expect.Locator(testID(page, "run-log")).ToContainText("line-one"), "the new run's log")
	gotoPage(t, page, s.URL+"/projects/"+pid)
	active := testID(page, "active-run")
	must(t, expect.Locator(active).ToBeVisible(), "active run appears")
	screenshot(t, page, "queued")
	// The queue view follows the run live, without a reload.
	must(t, expect.Locator(active.Locator("[data-testid=status-badge]")).ToHaveAttribute("data-status", "running"), "run shows running live")
	// "Recent runs" lists finished runs: the active one is not repeated there
	// (once as starting while the active panel said running).
	must(t, expect.Locator(testID(page, "no-recent-runs")).ToBeVisible(), "no finished runs yet")
	must(t, expect.Locator(page.Locator("[data-testid=recent-run]")).ToHaveCount(0), "the active run is not a recent run")

	must(t, active.Locator("a").First().Click(), "open the run")
	log := testID(page, "run-log")
	must(t, expect.Locator(log).ToContainText("line-one"), "log from the first line")
	must(t, expect.Locator(log).ToContainText("tick 15"), "log streams live")
	screenshot(t, page, "run-live")

	must(t, testID(page, "cancel-run").Click(), "cancel")
	header := testID(page, "run-header")
	must(t, expect.Locator(header).ToHaveAttribute("data-status", "canceled"), "run canceled")
	screenshot(t, page, "run-canceled")

	// A failing command fails with its exit code.
	apiJSON(t, s, "PATCH", "/api/private/projects/"+pid, map[string]any{"run_command": "echo boom; exit 7"})
	gotoPage(t, page, s.URL+"/projects/"+pid)
	must(t, testID(page, "run-now").Click(), "run now again")
	must(t, expect.Locator(testID(page, "run-log")).ToContainText("boom"), "the failed run's page")
	gotoPage(t, page, s.URL+"/projects/"+pid)
	recent := page.Locator("[data-testid=recent-run][data-status=failed]")
	must(t, expect.Locator(recent).ToBeVisible(), "failed run listed live")
	must(t, expect.Locator(page.Locator("[data-testid=recent-run]")).ToHaveCount(2), "the canceled and the failed run, once each")
	dups, err := page.Evaluate(`() => { const ids = [...document.querySelectorAll('#queue [data-run-id]')].map(e => e.dataset.runId); return ids.length - new Set(ids).size }`)
	must(t, err, "count run ids")
	if n, _ := dups.(int); n != 0 {
		t.Fatalf("%v runs are listed twice on the project page", dups)
	}
	must(t, recent.Locator("a").Click(), "open the failed run")
	must(t, expect.Locator(testID(page, "run-exit-code")).ToHaveText("7"), "exit code shown")
	must(t, expect.Locator(testID(page, "run-log")).ToContainText("boom"), "failed run's log")
	screenshot(t, page, "run-failed")
}
