package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"anvil/domain"
)

// The loop from the pages, for a project without a forge: a fix recorded
// by hand on the incident page (CSRF, roles, a refusal shown in place) and
// a release declared with its commit on the Releases page, listed as
// declared by a member.
func TestFixByHandAndReleaseFromThePages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pid, feedTok := b.incidentProject(t)
	b.feedEvent(t, feedTok, "NullPointerException in CheckoutService")
	_, out := b.api(t, b.owner.Token, "GET", "/api/private/incidents?project_id="+pid, nil)
	id := out["incidents"].([]any)[0].(map[string]any)["id"].(string)

	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	_, page := br.get("/incidents/" + id)
	if !strings.Contains(page, `data-testid="fix-form"`) {
		t.Fatalf("no fix form on the incident page")
	}
	csrf := csrfRE.FindStringSubmatch(page)[1]
	sha := "3f9c1e2d4b5a69788796a5b4c3d2e1f0a9b8c7d6"
	if res, _ := br.post("/incidents/"+id+"/fix", url.Values{"commit_sha": {sha}}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("without the CSRF token: %d", res.StatusCode)
	}
	if st, body := br.htmx("/incidents/"+id+"/fix", csrf, url.Values{"commit_sha": {"12345"}}); st != http.StatusOK ||
		!strings.Contains(body, `data-testid="fix-error"`) || !strings.Contains(body, "7 to 40 hexadecimal digits") {
		t.Fatalf("a bad commit: %d %s", st, body)
	}
	res, _ := br.post("/incidents/"+id+"/fix", url.Values{"_csrf": {csrf}, "commit_sha": {sha}, "pr_url": {"https://git.example/acme/shop/pull/7"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("record: %d", res.StatusCode)
	}
	_, out = b.api(t, b.owner.Token, "GET", "/api/private/incidents/"+id, nil)
	fix, _ := out["incident"].(map[string]any)["fix"].(map[string]any)
	if fix == nil || fix["commit_sha"] != sha || fix["source"] != "manual" || fix["pr_number"] != float64(7) {
		t.Fatalf("recorded fix: %v", out["incident"])
	}
	// The API does the same.
	if st, out := b.api(t, b.owner.Token, "POST", "/api/private/incidents/"+id+"/fix", map[string]any{"pr_url": "https://git.example/acme/shop/pull/7"}); st != http.StatusUnprocessableEntity || out["error"] != "commit_required" {
		t.Fatalf("API without a commit: %d %v", st, out)
	}

	// A viewer sees no form and may not record.
	_, viewer := b.person(t, domain.RoleViewer)
	_, vpage := viewer.get("/incidents/" + id)
	if strings.Contains(vpage, `data-testid="fix-form"`) {
		t.Fatalf("a viewer is offered the fix form")
	}
	if res, _ := viewer.post("/incidents/"+id+"/fix", url.Values{"_csrf": {csrfRE.FindStringSubmatch(vpage)[1]}, "commit_sha": {sha}}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("a viewer recorded a fix: %d", res.StatusCode)
	}

	// The Releases page declares a release with its commit.
	_, page = br.get("/projects/shop/releases")
	if !strings.Contains(page, `data-testid="declare-release"`) {
		t.Fatalf("no declaration form on the Releases page")
	}
	res, body := br.post("/projects/shop/releases", url.Values{"_csrf": {csrf}, "version": {"shop@2.5.0"}, "commit_sha": {"zz"}})
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="declare-error"`) || !strings.Contains(body, `value="shop@2.5.0"`) {
		t.Fatalf("a bad commit: %d", res.StatusCode)
	}
	if res, _ := br.post("/projects/shop/releases", url.Values{"_csrf": {csrf}, "version": {"shop@2.5.0"}, "commit_sha": {sha}, "environment": {"production"}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("declare: %d", res.StatusCode)
	}
	_, out = b.api(t, b.owner.Token, "GET", "/api/private/projects/"+pid+"/releases", nil)
	found := false
	for _, it := range out["releases"].([]any) {
		r := it.(map[string]any)
		if r["version"] == "shop@2.5.0" {
			found = r["commit_sha"] == sha && r["source"] == "member" && r["trusted"] == true && r["environment"] == "production"
		}
	}
	if !found {
		t.Fatalf("declared release: %v", out["releases"])
	}
	if _, page := br.get("/projects/shop/releases"); !strings.Contains(page, "declared by a member") || !strings.Contains(page, `data-label="Commit"`) {
		t.Fatalf("the Releases page does not show the source or label its cells")
	}
}

// The verification window on the project's edit form (a refusal in the
// field's words, nothing saved), and the Releases page linked from the
// project page.
func TestFixWindowOnTheEditForm(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pid, _ := b.incidentProject(t)
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	if _, page := br.get("/projects/shop"); !strings.Contains(page, `href="/projects/shop/releases"`) {
		t.Fatalf("the project page does not link its Releases page")
	}
	_, edit := br.get("/projects/shop/edit")
	if !strings.Contains(edit, `name="fix_verification_window"`) || !strings.Contains(edit, `value="24h"`) {
		t.Fatalf("the edit form lacks the window")
	}
	csrf := csrfRE.FindStringSubmatch(edit)[1]
	form := func(window string) url.Values {
		return url.Values{"_csrf": {csrf}, "slug": {"shop"}, "name": {"shop"}, "repo_url": {"https://git.example/shop.git"},
			"default_branch": {"main"}, "run_command": {"make test"}, "repair_command": {"./fix.sh"}, "fix_verification_window": {window}}
	}
	res, body := br.post("/projects/shop/edit", form("30s"))
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "Fix verification window") || !strings.Contains(body, "at least 1m") {
		t.Fatalf("a window under a minute: %d", res.StatusCode)
	}
	if res, _ := br.post("/projects/shop/edit", form("2h")); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("save: %d", res.StatusCode)
	}
	if _, out := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+pid, nil); out["fix_verification_window"] != "2h" {
		t.Fatalf("window: %v", out["fix_verification_window"])
	}
}

// A repair whose pull request could not be opened kept its change as a
// patch: the incident page says "patch ready", neutral, not a failed run
// that "the forge refused".
func TestRepairKeptAsPatchReadsPatchReady(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pid, feedTok := b.incidentProject(t)
	b.feedEvent(t, feedTok, "NullPointerException in CheckoutService")
	_, out := b.api(t, b.owner.Token, "GET", "/api/private/incidents?project_id="+pid, nil)
	id := out["incidents"].([]any)[0].(map[string]any)["id"].(string)
	if st, out := b.api(t, b.owner.Token, "POST", "/api/private/incidents/"+id+"/decisions", map[string]any{"decision": "approve"}); st != http.StatusOK {
		t.Fatalf("approve: %d %v", st, out)
	}
	ctx := context.Background()
	var runID string
	if err := b.db.Bun.NewRaw(`SELECT repair_run_id::text FROM incidents WHERE id = ?`, id).Scan(ctx, &runID); err != nil || runID == "" {
		t.Fatalf("repair run: %v", err)
	}
	// As the repair job leaves a run whose forge could not be used.
	if _, err := b.db.Bun.NewRaw(`UPDATE project_runs SET state = 'failed', position = NULL, failure_reason = 'provider_error', finished_at = now(), started_at = now() WHERE id = ?`,
		runID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	_, page := br.get("/incidents/" + id)
	if strings.Contains(page, `data-testid="repair-patch-ready"`) {
		t.Fatalf("patch ready without a patch")
	}
	if _, err := b.db.Bun.NewRaw(`INSERT INTO run_patches (run_id, patch) VALUES (?, ?)`, runID, "--- a/x\n+++ b/x\n").Exec(ctx); err != nil {
		t.Fatal(err)
	}
	_, page = br.get("/incidents/" + id)
	if !strings.Contains(page, `data-testid="repair-patch-ready"`) || strings.Contains(page, "the forge refused") ||
		!strings.Contains(page, "repair run: patch ready") {
		t.Fatalf("a kept patch does not read as ready:\n%s", page)
	}
}

// A repair without a forge passes with its patch ready: the incident page
// offers the patch in one click, the run page and the run list say "patch
// ready — download or apply", and none says "the forge refused".
func TestRepairWithoutForgeReadsPatchReadyEverywhere(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pid, feedTok := b.incidentProject(t)
	b.feedEvent(t, feedTok, "NullPointerException in CheckoutService")
	_, out := b.api(t, b.owner.Token, "GET", "/api/private/incidents?project_id="+pid, nil)
	id := out["incidents"].([]any)[0].(map[string]any)["id"].(string)
	if st, out := b.api(t, b.owner.Token, "POST", "/api/private/incidents/"+id+"/decisions", map[string]any{"decision": "approve"}); st != http.StatusOK {
		t.Fatalf("approve: %d %v", st, out)
	}
	ctx := context.Background()
	var runID, slug string
	if err := b.db.Bun.NewRaw(`SELECT i.repair_run_id::text, p.slug FROM incidents i JOIN projects p ON p.id = i.project_id WHERE i.id = ?`, id).Scan(ctx, &runID, &slug); err != nil || runID == "" {
		t.Fatalf("repair run: %v", err)
	}
	// As the repair job leaves a run without a forge: passed, patch ready.
	if _, err := b.db.Bun.NewRaw(`UPDATE project_runs SET state = 'passed', exit_code = 0, position = NULL, finished_at = now(), started_at = now() WHERE id = ?`,
		runID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Bun.NewRaw(`INSERT INTO run_patches (run_id, patch, ready) VALUES (?, ?, true)`, runID, "--- a/x\n+++ b/x\n").Exec(ctx); err != nil {
		t.Fatal(err)
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	_, page := br.get("/incidents/" + id)
	if !strings.Contains(page, `data-testid="repair-patch-ready"`) || !strings.Contains(page, `href="/runs/`+runID+`/patch.diff"`) ||
		strings.Contains(page, "forge refused") {
		t.Fatalf("the incident page does not offer the ready patch:\n%s", page)
	}
	_, page = br.get("/runs/" + runID)
	if !strings.Contains(page, "patch ready — download or apply") || !strings.Contains(page, `data-testid="run-patch-ready"`) || strings.Contains(page, "forge refused") {
		t.Fatalf("the run page does not say patch ready:\n%s", page)
	}
	_, page = br.get("/projects/" + slug + "/runs")
	if !strings.Contains(page, "patch ready — download or apply") || !strings.Contains(page, `data-testid="history-patch"`) {
		t.Fatalf("the run list does not say patch ready:\n%s", page)
	}
}
