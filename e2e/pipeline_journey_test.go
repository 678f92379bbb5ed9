//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"

	"anvil/jobs/jobstest"
)

// The example of docs/pipelines.md, shortened: a DAG with a parallel
// lint, a step only for a release branch, an ignored failure, an artifact.
const journeyPipeline = `
steps:
  - name: build
    commands:
      - sleep 4
      - mkdir -p dist && echo "the build" > dist/app.txt
    artifacts: [dist/**]
  - name: lint
    depends_on: []
    failure: ignore
    commands:
      - 'echo "error: lint found a problem"'
      - exit 2
  - name: test
    depends_on: [build]
    commands: [cat dist/app.txt]
  - name: release
    depends_on: [test]
    when: {branch: release}
    commands: [echo releasing]
`

// TestPipelineJourney: a repository with its own .anvil.yaml runs it for
// real; the run page lists the steps live with their durations, why one was
// skipped and the ignored failure's first error; a step's name shows its
// log alone; the artifact downloads over HTTP; the page fits at 420 and
// 1280 px.
func TestPipelineJourney(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	repo := jobstest.GitRepoWith(t, map[string]string{".anvil.yaml": journeyPipeline})
	p := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{"slug": "piped", "name": "Piped", "repo_url": repo.URL,
		"default_branch": "main", "run_command": "echo the-project-command"})
	page := loggedIn(t, s)
	must(t, page.SetViewportSize(1280, 900), "viewport")
	run := apiJSON(t, s, "POST", "/api/private/projects/"+p["id"].(string)+"/runs", nil)
	runID := run["run_id"].(string)
	gotoPage(t, page, s.URL+"/runs/"+runID)
	// The steps arrive live: build runs while the page is open.
	if err := page.Locator(`[data-testid=step][data-step-key=build][data-status=running]`).WaitFor(); err != nil {
		html, _ := page.Locator("main").InnerHTML()
		t.Fatalf("build running, live: %v\n%v\n%s", err, apiJSON(t, s, "GET", "/api/private/runs/"+runID, nil), html)
	}
	must(t, page.Locator(`[data-testid=run-header][data-status=passed]`).WaitFor(playwright.LocatorWaitForOptions{Timeout: playwright.Float(60000)}), "the run's end")
	must(t, page.Locator(`[data-testid=step][data-step-key=test][data-status=passed]`).WaitFor(), "test passed, live")
	release := page.Locator(`[data-testid=step][data-step-key=release]`)
	if st, _ := release.GetAttribute("data-status"); st != "skipped" {
		t.Fatalf("release: %s", st)
	}
	if why, _ := release.Locator(`[data-testid=step-reason]`).TextContent(); why != "when: branch [release]" {
		t.Fatalf("release skipped because %q", why)
	}
	lint := page.Locator(`[data-testid=step][data-step-key=lint]`)
	if txt, _ := lint.TextContent(); !strings.Contains(txt, "failure ignored") {
		t.Fatalf("lint: %q", txt)
	}
	if dur, _ := page.Locator(`[data-testid=step][data-step-key=build] [data-testid=step-duration]`).TextContent(); !strings.HasSuffix(dur, "s") {
		t.Fatalf("build's duration %q", dur)
	}
	// The first error of lint: its log alone, the error line marked.
	must(t, lint.Locator(`[data-testid=step-first-error]`).Click(), "lint's first error")
	first := page.Locator(".log-error.outline").First()
	must(t, first.WaitFor(), "the first error")
	if txt, _ := first.TextContent(); !strings.Contains(txt, "error: lint found a problem") {
		t.Fatalf("first error %q", txt)
	}
	visible, err := page.Evaluate(`() => [...document.querySelectorAll("#run-log .log-line")].filter(l => l.style.display !== "none").map(l => l.textContent).join("\n")`)
	must(t, err, "visible lines")
	if v := fmt.Sprint(visible); strings.Contains(v, "the build") || !strings.Contains(v, "+ exit 2") {
		t.Fatalf("lint's log alone shows:\n%s", v)
	}
	must(t, testID(page, "step-all").Click(), "all logs")
	// The artifact, listed and downloaded over HTTP with the page's session.
	link := page.Locator(`[data-testid=artifact-link]`)
	href, _ := link.GetAttribute("href")
	if txt, _ := link.TextContent(); txt != "dist/app.txt" || href == "" {
		t.Fatalf("artifact link %q %q", txt, href)
	}
	cookies, err := page.Context().Cookies()
	must(t, err, "cookies")
	req, _ := http.NewRequest("GET", s.URL+href, nil)
	for _, c := range cookies {
		req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	}
	res, err := http.DefaultClient.Do(req)
	must(t, err, "download")
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(body) != "the build\n" {
		t.Fatalf("artifact: %d %q", res.StatusCode, body)
	}
	api := apiJSON(t, s, "GET", "/api/private/runs/"+runID, nil)
	if pl := api["pipeline"].(map[string]any); pl["file"] != ".anvil.yaml" || len(pl["steps"].([]any)) != 4 {
		t.Fatalf("pipeline: %v", pl)
	}
	for _, w := range []int{420, 1280} {
		must(t, page.SetViewportSize(w, 900), "viewport")
		gotoPage(t, page, s.URL+"/runs/"+runID)
		must(t, testID(page, "run-steps").WaitFor(), "the Steps section")
		fits(t, page, fmt.Sprintf("the run page with steps at %d px", w))
		screenshot(t, page, fmt.Sprintf("run-steps-%d", w))
	}
}
