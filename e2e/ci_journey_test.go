//go:build e2e

package e2e

import (
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"

	"anvil/jobs/jobstest"
)

// TestCIJourney reads a run page from queued to passed: its number and
// place in line while another run holds the project, then live to passed
// with its times, who started it, coloured log lines (never raw escape
// codes), a search that filters the lines, and the jump to the first error.
func TestCIJourney(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	repo := jobstest.GitRepo(t)
	p := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{
		"slug": "ci", "name": "CI", "repo_url": repo.URL, "default_branch": "main", "run_command": "sleep 600",
	})
	pid := p["id"].(string)
	first := apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/runs", nil)
	second := apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/runs", nil)
	// The command is read when a run starts: the second run runs this one.
	apiJSON(t, s, "PATCH", "/api/private/projects/"+pid, map[string]any{"run_command": `printf '\033[31mred words\033[0m <b>not bold</b>\n'
echo "warming up"
echo "error: the first failure"
echo needle-one
echo haystack
echo needle-two
echo done`})

	page := loggedIn(t, s)
	gotoPage(t, page, s.URL+"/projects/ci/runs/2") // by slug and number
	if !strings.HasSuffix(page.URL(), "/runs/"+second["run_id"].(string)) {
		t.Fatalf("/projects/ci/runs/2 led to %s", page.URL())
	}
	header := testID(page, "run-header")
	must(t, expect.Locator(header).ToHaveAttribute("data-status", "queued"), "queued")
	must(t, expect.Locator(testID(page, "run-number")).ToHaveText("#2"), "its number")
	must(t, expect.Locator(testID(page, "run-place")).ToHaveText("1st in line"), "its place in line")
	must(t, expect.Locator(testID(page, "run-trigger")).ToContainText("Started by owner@"), "who started it")
	screenshot(t, page, "ci-queued")

	apiJSON(t, s, "POST", "/api/private/runs/"+first["run_id"].(string)+"/cancel", nil)
	must(t, expect.Locator(header).ToHaveAttribute("data-status", "passed"), "passed, live")
	must(t, expect.Locator(testID(page, "run-started-at")).Not().ToHaveText("—"), "started at")
	must(t, expect.Locator(testID(page, "run-duration")).Not().ToBeEmpty(), "duration")
	log := testID(page, "run-log")
	must(t, expect.Locator(log).ToContainText("done"), "the whole log")
	must(t, expect.Locator(log.Locator("span.text-red-400")).ToHaveText("red words"), "ANSI red as a span")
	must(t, expect.Locator(log).ToContainText("<b>not bold</b>"), "markup from the log is text")
	must(t, expect.Locator(log.Locator("b")).ToHaveCount(0), "no element from the log")
	text, err := log.TextContent()
	must(t, err, "log text")
	if strings.Contains(text, "\x1b") || strings.Contains(text, "\\x1b") {
		t.Fatalf("raw escape codes in the log: %q", text)
	}
	must(t, expect.Locator(log.Locator(".log-line").First().Locator(".log-t")).ToHaveText("+0:00"), "time gutter")
	screenshot(t, page, "ci-passed")

	must(t, testID(page, "log-search").Fill("needle"), "search")
	must(t, expect.Locator(log.Locator(".log-line:visible")).ToHaveCount(2), "two lines match")
	must(t, expect.Locator(testID(page, "log-count")).ToContainText("2 of"), "count shown")
	screenshot(t, page, "ci-search")
	must(t, testID(page, "log-search").Fill(""), "clear the search")
	must(t, testID(page, "log-first-error").Click(), "jump to the first error")
	must(t, expect.Locator(log.Locator(".log-error").First()).ToContainText("error: the first failure"), "first error line")
	must(t, expect.Locator(log.Locator(".log-error").First()).ToBeInViewport(), "scrolled to it")
	must(t, expect.Locator(testID(page, "raw-log")).ToHaveAttribute("href", "/runs/"+second["run_id"].(string)+"/log.txt"), "raw download")

	// The canceled run says who canceled it; re-run from its page.
	gotoPage(t, page, s.URL+"/runs/"+first["run_id"].(string))
	must(t, expect.Locator(testID(page, "run-canceled-by")).ToContainText("canceled by owner@"), "who canceled")
	must(t, testID(page, "rerun").Click(), "re-run")
	must(t, page.WaitForURL("**/runs/*", playwright.PageWaitForURLOptions{}), "the new run's page")
	must(t, expect.Locator(testID(page, "run-trigger")).ToContainText("Re-run by"), "a re-run of #1")
	must(t, expect.Locator(testID(page, "run-number")).ToHaveText("#3"), "number 3")
}
