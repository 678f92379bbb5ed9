package web_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"anvil/jobs/jobstest"
)

// TestRunHistory: the history API lists a project's runs newest first, a
// page at a time through next_before, narrowed by status, branch and
// trigger; a bad filter is a 422 naming it; the page shows the same runs
// with their actor; another organisation sees none of it.
func TestRunHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("shop"))
	pid := p["id"].(string)
	var ids []string
	for i := 1; i <= 5; i++ {
		in := map[string]any{}
		if i%2 == 0 {
			in["branch"] = "feature/x"
		}
		status, out := b.api(t, b.owner.Token, "POST", "/api/private/projects/"+pid+"/runs", in)
		if status != http.StatusAccepted || out["number"] != float64(i) || out["status"] != "queued" {
			t.Fatalf("trigger %d: %d %v", i, status, out)
		}
		ids = append(ids, out["run_id"].(string))
	}
	// The fifth run is canceled while queued.
	if status, out := b.api(t, b.owner.Token, "POST", "/api/private/runs/"+ids[4]+"/cancel", nil); status != http.StatusAccepted {
		t.Fatalf("cancel: %d %v", status, out)
	}

	numbers := func(out map[string]any) []int {
		var ns []int
		for _, r := range out["runs"].([]any) {
			ns = append(ns, int(r.(map[string]any)["number"].(float64)))
		}
		return ns
	}
	base := "/api/private/projects/" + pid + "/runs"
	status, out := b.api(t, b.owner.Token, "GET", base+"?limit=2", nil)
	if status != 200 || fmt.Sprint(numbers(out)) != "[5 4]" || out["next_before"] != float64(4) {
		t.Fatalf("first page: %d %v", status, out)
	}
	first := out["runs"].([]any)[0].(map[string]any)
	for _, k := range []string{"run_id", "number", "status", "branch", "commit_sha", "trigger", "actor", "queued_at", "started_at", "finished_at", "duration_seconds", "failure_reason", "reason"} {
		if _, ok := first[k]; !ok {
			t.Errorf("a history run lacks %s: %v", k, first)
		}
	}
	if first["actor"] != "owner@acme.test" || first["status"] != "canceled" || first["reason"] != "canceled before it started" {
		t.Fatalf("newest run: %v", first)
	}
	status, out = b.api(t, b.owner.Token, "GET", base+"?limit=2&before=4", nil)
	if status != 200 || fmt.Sprint(numbers(out)) != "[3 2]" || out["next_before"] != float64(2) {
		t.Fatalf("second page: %d %v", status, out)
	}
	status, out = b.api(t, b.owner.Token, "GET", base+"?limit=2&before=2", nil)
	if status != 200 || fmt.Sprint(numbers(out)) != "[1]" || out["next_before"] != nil {
		t.Fatalf("last page: %d %v", status, out)
	}
	for q, want := range map[string]string{
		"?branch=feature/x":                   "[4 2]",
		"?status=canceled":                    "[5]",
		"?status=queued":                      "[4 3 2 1]",
		"?trigger=manual&branch=feature/x":    "[4 2]",
		"?trigger=webhook":                    "[]",
		"?status=queued&before=3&branch=main": "[1]",
		"?branch=main&status=canceled":        "[5]",
	} {
		status, out := b.api(t, b.owner.Token, "GET", base+q, nil)
		if status != 200 || fmt.Sprint(numbers(out)) != want {
			t.Errorf("%s: %d %v, want %s", q, status, out, want)
		}
	}
	for q, field := range map[string]string{"?status=green": "status", "?trigger=cron": "trigger", "?before=abc": "before",
		"?before=0": "before", "?branch=..%2Fetc": "branch", "?limit=500": "limit"} {
		status, out := b.api(t, b.owner.Token, "GET", base+q, nil)
		msg, _ := out["message"].(string)
		if status != http.StatusUnprocessableEntity || out["error"] != "invalid_filter" || !strings.HasPrefix(msg, field+" ") {
			t.Errorf("%s: %d %v, want a 422 naming %s", q, status, out, field)
		}
	}

	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	res, body := br.get("/projects/shop/runs")
	if res.StatusCode != 200 || strings.Count(body, `data-testid="history-run"`) != 5 || !strings.Contains(body, "owner@acme.test") ||
		!strings.Contains(body, `sse-connect="/events?project=`+pid+`"`) {
		t.Fatalf("history page: %d %s", res.StatusCode, body)
	}
	res, body = br.get("/projects/shop/runs?branch=feature/x&fragment=rows")
	if res.StatusCode != 200 || strings.Count(body, `data-testid="history-run"`) != 2 || strings.Contains(body, "<html") {
		t.Fatalf("rows fragment: %d %s", res.StatusCode, body)
	}
	res, body = br.get("/projects/shop/runs?status=green")
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="history-error"`) || !strings.Contains(body, "status must be one of") {
		t.Fatalf("bad filter on the page: %d %s", res.StatusCode, body)
	}
	if _, body := br.get("/projects/shop"); !strings.Contains(body, `href="/projects/shop/runs"`) {
		t.Fatalf("the project page does not link its run history")
	}

	other, _ := b.accounts.Bootstrap(context.Background(), "globex", "x@globex.test", testPassword)
	if status, _ := b.api(t, other.Token, "GET", base, nil); status != 404 {
		t.Fatalf("another org's history: %d", status)
	}
}

// TestRunCreateBody: an unknown field of POST …/runs is a 422 naming it and
// queues nothing; a branch the repository does not have is refused before
// anything is queued, after one git ls-remote of the real repository.
func TestRunCreateBody(t *testing.T) {
	t.Parallel()
	b := setupLatest(t)
	repo := jobstest.GitRepo(t)
	in := validProject("local")
	in["repo_url"] = repo.URL
	status, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", in)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %v", status, p)
	}
	pid := p["id"].(string)
	status, out := b.api(t, b.owner.Token, "POST", "/api/private/projects/"+pid+"/runs", map[string]any{"brnach": "main"})
	if msg, _ := out["message"].(string); status != http.StatusUnprocessableEntity || out["error"] != "unknown_field" || !strings.Contains(msg, `"brnach"`) {
		t.Fatalf("unknown field: %d %v", status, out)
	}
	status, out = b.api(t, b.owner.Token, "POST", "/api/private/projects/"+pid+"/runs", map[string]any{"branch": "nope"})
	if msg, _ := out["message"].(string); status != http.StatusUnprocessableEntity || out["error"] != "unknown_branch" || !strings.Contains(msg, `"nope"`) {
		t.Fatalf("missing branch: %d %v", status, out)
	}
	if n := b.count(t, "project_runs", "project_id = ?", pid); n != 0 {
		t.Fatalf("%d runs after the refusals", n)
	}
	status, out = b.api(t, b.owner.Token, "POST", "/api/private/projects/"+pid+"/runs", map[string]any{"branch": "main"})
	if status != http.StatusAccepted || out["number"] != float64(1) {
		t.Fatalf("existing branch: %d %v", status, out)
	}
}

// TestRepairPatchOnTheRunPage: a repair run's kept patch is shown on its
// run page as a diff and downloadable; another organisation gets a 404.
func TestRepairPatchOnTheRunPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("shop"))
	_, out := b.api(t, b.owner.Token, "POST", "/api/private/projects/"+p["id"].(string)+"/runs", nil)
	id := out["run_id"].(string)
	ctx := context.Background()
	// The run stands for a repair whose change was kept (jobs/repair.go
	// writes it; TestRepairChecksProviderBeforePushing drives that path).
	if _, err := b.db.Bun.NewRaw(`UPDATE project_runs SET trigger = 'repair' WHERE id = ?`, id).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	patch := "diff --git a/README b/README\n--- a/README\n+++ b/README\n@@ -1 +1,2 @@\n second\n+fixed <script>\n"
	if _, err := b.db.Bun.NewRaw(`INSERT INTO run_patches (run_id, patch) VALUES (?, ?)`, id, patch).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	res, body := br.get("/runs/" + id)
	if res.StatusCode != 200 || !strings.Contains(body, `data-testid="run-patch"`) || !strings.Contains(body, "+fixed &lt;script&gt;") ||
		!strings.Contains(body, `href="/runs/`+id+`/patch.diff"`) {
		t.Fatalf("run page: %d %s", res.StatusCode, body)
	}
	res, body = br.get("/runs/" + id + "/patch.diff")
	if res.StatusCode != 200 || body != patch || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/x-diff") {
		t.Fatalf("download: %d %q", res.StatusCode, body)
	}
	_, _ = b.accounts.Bootstrap(ctx, "globex", "x@globex.test", testPassword)
	other := b.browser(t)
	other.login("x@globex.test", testPassword)
	if res, _ := other.get("/runs/" + id + "/patch.diff"); res.StatusCode != 404 {
		t.Fatalf("another org's patch: %d", res.StatusCode)
	}
}

// TestAuditDetailInWords: the audit page says an entry's detail in words
// (a new binding reads "added a binding for environment production …"),
// never raw JSON; TestAuditLogSaysEveryChangeInWords has every kind.
func TestAuditDetailInWords(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("shop"))
	if st, out := b.api(t, b.owner.Token, "PUT", "/api/private/projects/"+p["id"].(string)+"/bindings/production", map[string]any{"repair_policy": "observe"}); st != 200 {
		t.Fatalf("binding: %d %v", st, out)
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	_, body := br.get("/settings/audit")
	if !strings.Contains(body, `data-testid="audit-detail">added a binding for environment production of project shop with repair policy observe<`) ||
		strings.Contains(body, `data-testid="audit-detail">{`) {
		t.Fatalf("audit page: %s", body)
	}
}

// TestRunHistoryFormerMember: a member who started a run and has since
// left the organisation is "a former member" in the history and on the
// run's page; their address is no longer shown, though their account
// lives on.
func TestRunHistoryFormerMember(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("shop"))
	pid := p["id"].(string)
	tok, _ := b.person(t, "member")
	status, out := b.api(t, tok, "POST", "/api/private/projects/"+pid+"/runs", map[string]any{})
	if status != http.StatusAccepted {
		t.Fatalf("trigger: %d %v", status, out)
	}
	runID := out["run_id"].(string)
	actor := func() string {
		_, h := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+pid+"/runs", nil)
		return h["runs"].([]any)[0].(map[string]any)["actor"].(string)
	}
	if a := actor(); a != "member@acme.test" {
		t.Fatalf("actor while a member: %q", a)
	}
	if st, _ := b.api(t, b.owner.Token, "DELETE", "/api/private/members/"+memberID(t, b, b.owner.Token, "member@acme.test"), nil); st != http.StatusNoContent {
		t.Fatalf("remove: %d", st)
	}
	if b.count(t, "users", "email = 'member@acme.test'") != 1 {
		t.Fatal("the account went with the membership")
	}
	if a := actor(); a != "a former member" {
		t.Fatalf("actor after leaving: %q", a)
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	for _, path := range []string{"/projects/shop/runs", "/runs/" + runID} {
		res, body := br.get(path)
		if res.StatusCode != http.StatusOK || strings.Contains(body, "member@acme.test") || !strings.Contains(body, "a former member") {
			t.Fatalf("%s: %d, former member named or missing", path, res.StatusCode)
		}
	}
}
