//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"

	"anvil/jobs/jobstest"
)

// TestNetworkJourney: an admin gives a project a network list in its edit
// form (a bad line refused beside its field), a run of the real binary
// reaches the listed server through anvil's proxy and is refused another;
// the run page's Network section lists both live, "First error" lands on
// the refusal, and both pages fit at 420 and 1280 px.
func TestNetworkJourney(t *testing.T) {
	t.Parallel()
	if sandboxMode() != "bwrap" {
		t.Skip("the network journey runs in the bwrap sandbox")
	}
	// The servers listen on 127.0.0.2: loopback on the host, but not a
	// destination the sandbox keeps to itself (NO_PROXY).
	listen := func(body string) int {
		l, err := net.Listen("tcp", "127.0.0.2:0")
		if err != nil {
			t.Skipf("cannot listen on 127.0.0.2: %v", err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) })}
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { srv.Close() })
		return l.Addr().(*net.TCPAddr).Port
	}
	port, other := listen("the registry answered\n"), listen("never\n")
	s := startServer(t, "ANVIL_RUNS_ALLOW_PRIVATE=true", "ANVIL_RUNS_ALLOW_LOOPBACK=true")
	repo := jobstest.GitRepo(t)
	// The command waits a little before it connects, so that the page is
	// open when the connections arrive: they must come live.
	cmd := fmt.Sprintf(`sleep 3; curl -fsS http://127.0.0.2:%d/ && curl -s -o /dev/null -w 'other: %%{http_code}\n' http://127.0.0.2:%d/; exit 1`, port, other)
	p := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{"slug": "shop", "name": "Shop", "repo_url": repo.URL,
		"default_branch": "main", "run_command": cmd})
	pid := p["id"].(string)

	page := loggedIn(t, s)
	for _, w := range []int{420, 1280} {
		must(t, page.SetViewportSize(w, 900), "viewport")
		gotoPage(t, page, s.URL+"/projects/shop/edit")
		must(t, testID(page, "network-allow").Fill(fmt.Sprintf("127.0.0.2:%d\nhttps://registry.example/path", port)), "fill")
		must(t, testID(page, "repair-network-allow").Fill("api.anthropic.com"), "fill")
		fits(t, page, fmt.Sprintf("the edit form at %d px", w))
		must(t, testID(page, "project-save").Click(), "save")
		must(t, expect.Locator(testID(page, "field-error-network_allow")).ToContainText(`Network list of runs has a bad entry "https://registry.example/path"`), "the refusal beside its field")
		body, _ := page.Locator("main").TextContent()
		if !strings.Contains(body, `"https://registry.example/path"`) || !strings.Contains(body, "without a scheme, a path or a user") {
			t.Fatalf("the refusal does not name the entry: %s", body)
		}
		fits(t, page, fmt.Sprintf("the refused form at %d px", w))
	}
	must(t, testID(page, "network-allow").Fill(fmt.Sprintf("127.0.0.2:%d", port)), "fill")
	must(t, testID(page, "project-save").Click(), "save")
	must(t, page.WaitForURL(urlPath(s, "/projects/shop")), "saved")
	got := apiJSON(t, s, "GET", "/api/private/projects/"+pid, nil)
	if fmt.Sprint(got["network_allow"]) != fmt.Sprintf("[127.0.0.2:%d]", port) || fmt.Sprint(got["repair_network_allow"]) != "[api.anthropic.com]" {
		t.Fatalf("saved lists: %v %v", got["network_allow"], got["repair_network_allow"])
	}

	run := apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/runs", nil)
	runID := run["run_id"].(string)
	must(t, page.SetViewportSize(1280, 900), "viewport")
	gotoPage(t, page, s.URL+"/runs/"+runID)
	rows := page.Locator(`[data-testid=connection]`)
	must(t, page.Locator(`[data-testid=connection][data-verdict=refused]`).WaitFor(), "the refused connection, live")
	must(t, page.Locator(`[data-testid=connection][data-verdict=allowed]`).WaitFor(), "the allowed connection, live")
	if n, _ := rows.Count(); n != 2 {
		t.Fatalf("%d connections on the page", n)
	}
	reason, _ := page.Locator(`[data-testid=connection][data-verdict=refused] [data-testid=connection-reason]`).TextContent()
	if !strings.Contains(reason, fmt.Sprintf("not in this project's network list: 127.0.0.2:%d", other)) {
		t.Fatalf("refusal reason %q", reason)
	}
	bytes, _ := page.Locator(`[data-testid=connection][data-verdict=allowed] [data-testid=connection-bytes]`).TextContent()
	if !strings.Contains(bytes, "↓ 22 B") {
		t.Fatalf("allowed bytes %q", bytes)
	}
	must(t, page.Locator(`[data-testid=run-header][data-status=failed]`).WaitFor(playwright.LocatorWaitForOptions{Timeout: playwright.Float(60000)}), "the run's end")
	must(t, testID(page, "log-first-error").Click(), "first error")
	first := page.Locator(".log-error.outline").First()
	must(t, first.WaitFor(), "the first error")
	if txt, _ := first.TextContent(); !strings.Contains(txt, fmt.Sprintf("refused 127.0.0.2:%d", other)) {
		t.Fatalf("First error landed on %q", txt)
	}
	for _, w := range []int{420, 1280} {
		must(t, page.SetViewportSize(w, 900), "viewport")
		gotoPage(t, page, s.URL+"/runs/"+runID)
		must(t, testID(page, "run-network").WaitFor(), "the Network section")
		fits(t, page, fmt.Sprintf("the run page at %d px", w))
		screenshot(t, page, fmt.Sprintf("run-network-%d", w))
	}
}

// fits fails the test when the page scrolls sideways.
func fits(t *testing.T, page playwright.Page, what string) {
	t.Helper()
	ok, err := page.Evaluate(`() => document.documentElement.scrollWidth <= window.innerWidth`)
	must(t, err, "measure "+what)
	if ok != true {
		t.Errorf("%s scrolls sideways", what)
	}
}
