package web_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"

	"anvil/domain/run"
)

func TestRunAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("shop"))
	pid := p["id"].(string)

	status, out := b.api(t, b.owner.Token, "POST", "/api/private/projects/"+pid+"/runs", nil)
	if status != http.StatusAccepted || out["status"] != "queued" {
		t.Fatalf("trigger: %d %v", status, out)
	}
	first := out["run_id"].(string)
	status, out = b.api(t, b.owner.Token, "POST", "/api/private/projects/"+pid+"/runs", map[string]any{"branch": "feature/y"})
	if status != http.StatusAccepted {
		t.Fatalf("trigger with branch: %d %v", status, out)
	}
	second := out["run_id"].(string)
	if status, out := b.api(t, b.owner.Token, "POST", "/api/private/projects/"+pid+"/runs", map[string]any{"branch": "../etc"}); status != 422 || out["error"] != "invalid_branch" {
		t.Fatalf("bad branch: %d %v", status, out)
	}

	status, q := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+pid+"/queue", nil)
	if status != 200 {
		t.Fatal(status)
	}
	active := q["active"].(map[string]any)
	queued := q["queued"].([]any)
	if active["run_id"] != first || active["status"] != "queued" || len(queued) != 1 || queued[0].(map[string]any)["run_id"] != second {
		t.Fatalf("queue: %v", q)
	}
	status, r := b.api(t, b.owner.Token, "GET", "/api/private/runs/"+second, nil)
	if status != 200 || r["branch"] != "feature/y" || r["trigger"] != "manual" || r["project_id"] != pid || r["position"] == nil {
		t.Fatalf("run: %d %v", status, r)
	}
	for _, k := range []string{"run_id", "project_id", "status", "trigger", "branch", "commit_sha", "position", "exit_code", "failure_reason", "queued_at", "started_at", "finished_at"} {
		if _, ok := r[k]; !ok {
			t.Errorf("run lacks %s", k)
		}
	}
	status, r = b.api(t, b.owner.Token, "POST", "/api/private/runs/"+second+"/cancel", nil)
	if status != http.StatusAccepted || r["status"] != "canceled" || r["position"] != nil {
		t.Fatalf("cancel: %d %v", status, r)
	}
	if status, r := b.api(t, b.owner.Token, "POST", "/api/private/runs/"+second+"/cancel", nil); status != 409 || r["error"] != "run_finished" {
		t.Fatalf("cancel twice: %d %v", status, r)
	}
	// Fill the queue: the 21st queued run is refused with 409.
	for i := 0; i < 19; i++ {
		if status, _ := b.api(t, b.owner.Token, "POST", "/api/private/projects/"+pid+"/runs", nil); status != 202 {
			t.Fatalf("fill %d: %d", i, status)
		}
	}
	status, out = b.api(t, b.owner.Token, "POST", "/api/private/projects/"+pid+"/runs", nil)
	if status != http.StatusConflict || out["error"] != "project_queue_full" {
		t.Fatalf("full queue: %d %v", status, out)
	}
	// Another organisation sees none of it.
	other, _ := b.accounts.Bootstrap(context.Background(), "globex", "x@globex.test", testPassword)
	for _, c := range []struct{ m, p string }{{"GET", "/api/private/projects/" + pid + "/queue"}, {"POST", "/api/private/projects/" + pid + "/runs"},
		{"GET", "/api/private/runs/" + first}, {"POST", "/api/private/runs/" + first + "/cancel"}, {"GET", "/api/private/runs/" + uuid.NewString()}} {
		if status, _ := b.api(t, other.Token, c.m, c.p, nil); status != 404 {
			t.Errorf("%s %s by another org: %d", c.m, c.p, status)
		}
	}
}

var runPagePath = regexp.MustCompile(`^/runs/[0-9a-f-]{36}$`)

func TestProjectPageShowsTheQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("shop"))
	pid := p["id"].(string)
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	csrf := br.csrf("/projects/" + pid)
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest("POST", b.srv.URL+"/projects/"+pid+"/runs", strings.NewReader(url.Values{"_csrf": {csrf}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("HX-Request", "true")
		res, err := br.c.Do(req)
		if err != nil {
			t.Fatalf("run now: %v", err)
		}
		res.Body.Close()
		// Run now goes to the run's page.
		if to := res.Header.Get("HX-Redirect"); res.StatusCode != http.StatusNoContent || !runPagePath.MatchString(to) {
			t.Fatalf("run now: %d, HX-Redirect %q, want 204 to /runs/<id>", res.StatusCode, to)
		}
	}
	_, q := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+pid+"/queue", nil)
	_, body := br.get("/projects/" + pid)
	active := q["active"].(map[string]any)["run_id"].(string)
	if !strings.Contains(body, `data-testid="active-run" data-run-id="`+active+`"`) {
		t.Fatal("page does not show the API's active run")
	}
	idx := -1
	for _, r := range q["queued"].([]any) {
		id := r.(map[string]any)["run_id"].(string)
		i := strings.Index(body, `data-testid="queued-run" data-run-id="`+id+`"`)
		if i < 0 || i < idx {
			t.Fatalf("queued run %s missing or out of order on the page", id)
		}
		idx = i
	}
	if !strings.Contains(body, `data-testid="run-now"`) || !strings.Contains(body, `data-testid="cancel-run"`) {
		t.Fatal("run now / cancel buttons missing")
	}

	// "Recent runs" lists finished runs only: the active and queued ones are
	// shown once, where the queue puts them, even while the read model is a
	// step behind (it still says starting; the queue says running).
	ctx := context.Background()
	sync := func(ids ...string) {
		t.Helper()
		for _, id := range ids {
			if _, err := b.queue.Reconcile(ctx, uuid.MustParse(id)); err != nil {
				t.Fatal(err)
			}
		}
	}
	all := []string{active}
	for _, r := range q["queued"].([]any) {
		all = append(all, r.(map[string]any)["run_id"].(string))
	}
	if _, _, err := b.queue.Claim(ctx, uuid.MustParse(active), "test"); err != nil {
		t.Fatal(err)
	}
	sync(all...)
	if _, err := b.queue.Start(ctx, uuid.MustParse(active), false); err != nil {
		t.Fatal(err)
	}
	_, body = br.get("/projects/" + pid)
	for _, id := range all {
		if n := strings.Count(body, `data-run-id="`+id+`"`); n != 1 {
			t.Fatalf("run %s is listed %d times", id, n)
		}
	}
	if strings.Contains(body, `data-testid="recent-run"`) || !strings.Contains(body, `data-testid="no-recent-runs"`) {
		t.Fatal("unfinished runs are listed as recent")
	}
	if !strings.Contains(body, `data-testid="active-run" data-run-id="`+active+`"`) || strings.Contains(body, ">starting<") {
		t.Fatal("the active run's status disagrees with the queue")
	}
	code := 0
	if _, err := b.queue.ReportTerminal(ctx, uuid.MustParse(active), run.TerminalReport{State: run.StatePassed, ExitCode: &code}); err != nil {
		t.Fatal(err)
	}
	sync(all...)
	_, body = br.get("/projects/" + pid)
	if !strings.Contains(body, `data-testid="recent-run" data-run-id="`+active+`" data-status="passed"`) {
		t.Fatal("the finished run is not listed as recent")
	}
	for _, id := range all {
		if n := strings.Count(body, `data-run-id="`+id+`"`); n != 1 {
			t.Fatalf("after the first run finished, run %s is listed %d times", id, n)
		}
	}
}
