//go:build e2e

package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"

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
	// The command is read when a worker claims a run: once the first run
	// has left the queue, the second (and only it) runs this one. Without
	// the wait, a busy machine claimed the first after the change, and it
	// ran the short command and passed.
	waitLeftQueue(t, s, first["run_id"].(string))
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
	// The gutter's first stamp depends on how fast the checkout was; its
	// shape does not.
	must(t, expect.Locator(log.Locator(".log-line").First().Locator(".log-t")).ToHaveText(regexp.MustCompile(`^\+\d+:\d\d$`)), "time gutter")
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
	// "**/runs/*" matched the page being left as well: wait for another run.
	must(t, page.WaitForURL(func(u string) bool {
		return strings.Contains(u, "/runs/") && !strings.HasSuffix(u, first["run_id"].(string))
	}, playwright.PageWaitForURLOptions{}), "the new run's page")
	must(t, expect.Locator(testID(page, "run-trigger")).ToContainText("Re-run by"), "a re-run of #1")
	must(t, expect.Locator(testID(page, "run-number")).ToHaveText("#3"), "number 3")
}

// waitLeftQueue polls the run until a worker has claimed it (a bounded poll,
// never a fixed sleep).
func waitLeftQueue(t *testing.T, s *server, runID string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := apiJSON(t, s, "GET", "/api/private/runs/"+runID, nil)
		if r["status"] != "queued" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still queued after 60 s", runID)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
