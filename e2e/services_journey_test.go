//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"

	"anvil/domain/image/imagetest"
	"anvil/jobs/jobstest"
)

// TestServicesJourney: a pipeline with a service in a pod, its images from
// a registry on loopback; the run page's Services section shows the service
// live (starting, then ready while the step runs, then stopped), its image
// and time to ready, and its log folded away; a service's log opened stays
// open across the section's live swaps; the page fits at 420 and 1280 px.
func TestServicesJourney(t *testing.T) {
	t.Parallel()
	if sandboxMode() != "bwrap" {
		t.Skip("services run in pods, which need bubblewrap")
	}
	reg := imagetest.NewRegistry(t)
	img := reg.Push(t, "bb:1", imagetest.BusyboxImage(t))
	s := startServer(t, "ANVIL_REGISTRIES_INSECURE="+reg.Addr, "ANVIL_RUNS_ALLOW_PRIVATE=true", "ANVIL_RUNS_ALLOW_LOOPBACK=true")
	file := `services:
  - name: web
    image: ` + img + `
    commands:
      - mkdir -p /tmp/www && echo hello > /tmp/www/index.html && echo web is up
      - exec httpd -f -v -p 8080 -h /tmp/www
    ports: [8080]
steps:
  - name: test
    image: ` + img + `
    commands:
      - wget -Y off -q -O - http://web:8080/
      - sleep 8
`
	repo := jobstest.GitRepoWith(t, map[string]string{".anvil.yaml": file})
	p := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{"slug": "served", "name": "Served", "repo_url": repo.URL,
		"default_branch": "main", "run_command": "true", "network_allow": []string{reg.Addr}})
	page := loggedIn(t, s)
	must(t, page.SetViewportSize(1280, 900), "viewport")
	run := apiJSON(t, s, "POST", "/api/private/projects/"+p["id"].(string)+"/runs", nil)
	runID := run["run_id"].(string)
	gotoPage(t, page, s.URL+"/runs/"+runID)
	// The service arrives live, ready while the step still runs.
	web := page.Locator(`[data-testid=service][data-service=web]`)
	if err := page.Locator(`[data-testid=service][data-service=web][data-status=ready]`).WaitFor(playwright.LocatorWaitForOptions{Timeout: playwright.Float(90000)}); err != nil {
		html, _ := page.Locator("main").InnerHTML()
		t.Fatalf("web ready, live: %v\n%v\n%s", err, apiJSON(t, s, "GET", "/api/private/runs/"+runID, nil), html)
	}
	// Its log, opened while the run runs, follows the service live (the
	// step's request arrives in it while the step still sleeps) and stays
	// open as the section swaps.
	must(t, web.Locator("summary").Click(), "open web's log")
	must(t, web.Locator(`[data-testid=service-log]`, playwright.LocatorLocatorOptions{HasText: "response:200"}).WaitFor(), "the step's request in web's log, live")
	if st, _ := testID(page, "run-header").GetAttribute("data-status"); st != "running" {
		t.Fatalf("the service's log came only with the run's end (%s)", st)
	}
	must(t, page.Locator(`[data-testid=run-header][data-status=passed]`).WaitFor(playwright.LocatorWaitForOptions{Timeout: playwright.Float(60000)}), "the run's end")
	must(t, page.Locator(`[data-testid=service][data-service=web][data-status=stopped]`).WaitFor(), "web stopped, live")
	if open, err := web.Locator("details").Evaluate("d => d.open", nil); err != nil || open != true {
		t.Fatalf("web's log closed on a live swap: %v %v", open, err)
	}
	must(t, web.Locator(`[data-testid=service-log]`).WaitFor(), "web's log stays open")
	if txt, _ := web.Locator(`[data-testid=service-log]`).TextContent(); !strings.Contains(txt, "web is up") {
		t.Fatalf("web's log %q", txt)
	}
	if txt, _ := web.Locator(`[data-testid=service-image]`).TextContent(); txt != img {
		t.Fatalf("web's image %q", txt)
	}
	if txt, _ := web.Locator(`[data-testid=service-ready]`).TextContent(); !strings.HasPrefix(txt, "ready in ") {
		t.Fatalf("web's time to ready %q", txt)
	}
	api := apiJSON(t, s, "GET", "/api/private/runs/"+runID, nil)
	svcs, _ := api["pipeline"].(map[string]any)["services"].([]any)
	if len(svcs) != 1 || svcs[0].(map[string]any)["status"] != "stopped" || !strings.HasPrefix(fmt.Sprint(svcs[0].(map[string]any)["image_digest"]), "sha256:") {
		t.Fatalf("services: %v", svcs)
	}
	for _, w := range []int{420, 1280} {
		must(t, page.SetViewportSize(w, 900), "viewport")
		gotoPage(t, page, s.URL+"/runs/"+runID)
		must(t, testID(page, "run-services").WaitFor(), "the Services section")
		must(t, web.Locator("summary").Click(), "open web's log")
		fits(t, page, fmt.Sprintf("the run page with services at %d px", w))
		screenshot(t, page, fmt.Sprintf("run-services-%d", w))
	}
}
