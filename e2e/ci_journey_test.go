//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
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
seq 1 120
echo "error: the first failure"
seq 121 240
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
	firstError := log.Locator(".log-error").First()
	must(t, expect.Locator(firstError).ToContainText("error: the first failure"), "first error line")
	must(t, expect.Locator(firstError).Not().ToBeInViewport(), "the first error is out of view at first")
	must(t, testID(page, "log-first-error").Click(), "jump to the first error")
	must(t, expect.Locator(firstError).ToBeInViewport(), "scrolled to it")
	must(t, testID(page, "log-end").Click(), "jump to the end")
	must(t, expect.Locator(log.Locator(".log-line").Last()).ToBeInViewport(), "the last line in view")
	must(t, expect.Locator(firstError).Not().ToBeInViewport(), "the first error out of view again")
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

// TestRepairLogOpensAtItsEnd: the incident page shows a failed repair's log
// at its end, where the failure is, with the reason in words — also after
// the live part of the page was fetched again (it is, on every change of
// the incident or its run), which used to reopen the log at its top.
func TestRepairLogOpensAtItsEnd(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	repo := jobstest.GitRepo(t)
	p := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{
		"slug": "tail", "name": "Tail", "repo_url": repo.URL, "default_branch": "main", "run_command": "true",
		"repair_command": `for i in $(seq 1 150); do echo "step $i"; done; echo "error: the repair broke here"; exit 3`,
	})
	pid := p["id"].(string)
	conn := apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/connections", map[string]any{"name": "tail-api"})
	apiJSON(t, s, "PUT", "/api/private/projects/"+pid+"/bindings/production", map[string]any{"repair_policy": "auto"})
	ev := map[string]any{"schema_version": "1.0", "event_id": uuid.NewString(), "timestamp": time.Now().UTC().Format(time.RFC3339),
		"title": "TypeError in Cart", "level": "error", "environment": "production", "service": "tail-api",
		"sdk": map[string]any{"name": "anvil-feed-js", "version": "0.1.0"}, "exception": map[string]any{"type": "TypeError", "message": "cart is undefined"}}
	raw, _ := json.Marshal(ev)
	req, _ := http.NewRequest("POST", s.URL+"/api/feed/events", bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+conn["token"].(string))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	must(t, err, "send the event")
	var answer struct{ Accepted []string }
	must(t, json.NewDecoder(res.Body).Decode(&answer), "the feed's answer")
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted || len(answer.Accepted) != 1 {
		t.Fatalf("feed answered %d %+v", res.StatusCode, answer)
	}

	page := loggedIn(t, s)
	gotoPage(t, page, s.URL+"/inbox?project=tail")
	must(t, page.Locator("[data-testid=incident-link]").Click(), "open the incident")
	repair := testID(page, "repair-run")
	must(t, expect.Locator(repair).ToHaveAttribute("data-status", "failed", playwright.LocatorAssertionsToHaveAttributeOptions{Timeout: playwright.Float(60000)}), "the repair failed")
	must(t, expect.Locator(testID(page, "repair-why")).ToHaveText("the command exited with code 3"), "why, in words")
	log := testID(page, "repair-log")
	atEnd := func(what string) {
		t.Helper()
		must(t, expect.Locator(log).ToContainText("error: the repair broke here"), what+": the whole log")
		must(t, expect.Locator(log.Locator(".log-line").Last()).ToBeInViewport(), what+": the last line in view")
		must(t, expect.Locator(log.Locator(".log-line").First()).Not().ToBeInViewport(), what+": the first line out of view")
	}
	atEnd("after the live updates")

	// Fetch the live part again, as the next change would, and wait for
	// the new log element.
	_, err = log.Evaluate(`el => { el.dataset.old = "1"; htmx.trigger("#incident-live", "sse:run") }`, nil)
	must(t, err, "refetch the live part")
	must(t, expect.Locator(page.Locator("[data-testid=repair-log]:not([data-old])")).ToHaveCount(1), "a new log element")
	atEnd("after a refetch")
	screenshot(t, page, "repair-log-end")

	gotoPage(t, page, s.URL+"/incidents/"+page.URL()[strings.LastIndex(page.URL(), "/")+1:])
	atEnd("after a reload")
}
