package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/run"
)

const pinned = "199eddf46df50de8d02e99bf1c5fdb4101338224"

// TestRerunPinsTheSameCommit re-runs a finished run through the API: 202
// with the new run's id and status, the same branch and SHA, rerun_of the
// original, the next number; an unfinished run is a 409, and so is a full
// queue.
func TestRerunPinsTheSameCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("again"))
	pid := uuid.MustParse(p["id"].(string))
	owner, _ := b.accounts.Authenticate(ctx, b.owner.Token)
	proj, _ := b.projects.Get(ctx, owner.OrgID, pid)
	var first *run.Run
	sha := pinned
	if err := b.store.WithProject(ctx, pid, func(ctx context.Context, tx bun.Tx, _ *domain.Project) error {
		var err error
		first, err = b.queue.AcceptTx(ctx, tx, proj, run.AcceptSpec{Trigger: run.TriggerManual, Branch: "release/1.2", CommitSHA: &sha})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if st, out := b.api(t, b.owner.Token, "POST", "/api/private/runs/"+first.ID.String()+"/rerun", nil); st != http.StatusConflict {
		t.Fatalf("re-run of a queued run: %d %v", st, out)
	}
	if _, _, err := b.queue.Claim(ctx, first.ID, "test"); err != nil {
		t.Fatal(err)
	}
	code := 1
	if _, err := b.queue.ReportTerminal(ctx, first.ID, run.TerminalReport{State: run.StateFailed, ExitCode: &code, FailureReason: run.ReasonExitCode}); err != nil {
		t.Fatal(err)
	}
	st, out := b.api(t, b.owner.Token, "POST", "/api/private/runs/"+first.ID.String()+"/rerun", nil)
	if st != http.StatusAccepted || out["status"] != "queued" || out["run_id"] == nil {
		t.Fatalf("re-run: %d %v", st, out)
	}
	again, err := b.queue.RunByID(ctx, uuid.MustParse(out["run_id"].(string)))
	if err != nil {
		t.Fatal(err)
	}
	if again.Branch != "release/1.2" || again.CommitSHA == nil || *again.CommitSHA != pinned || again.RerunOf == nil || *again.RerunOf != first.ID || again.Number != 2 {
		t.Fatalf("re-run %+v", again)
	}
	_, got := b.api(t, b.owner.Token, "GET", "/api/private/runs/"+again.ID.String(), nil)
	if got["number"] != float64(2) || got["rerun_of"] != first.ID.String() {
		t.Fatalf("run JSON %v", got)
	}
	// Fill the queue: the re-run is refused like any trigger.
	for range run.MaxQueued - 1 {
		if _, err := b.queue.AcceptManual(ctx, owner, pid, ""); err != nil {
			t.Fatal(err)
		}
	}
	if st, out := b.api(t, b.owner.Token, "POST", "/api/private/runs/"+first.ID.String()+"/rerun", nil); st != http.StatusConflict || out["error"] != "project_queue_full" {
		t.Fatalf("re-run into a full queue: %d %v", st, out)
	}

	// The run page: its number, why it ended in words, the re-run's origin;
	// /projects/:slug/runs/:n leads to it; the project page by slug.
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	_, body := br.get("/runs/" + first.ID.String())
	for _, want := range []string{`data-testid="run-number">#1<`, "the command exited with code 1", `data-testid="rerun"`} {
		if !strings.Contains(body, want) {
			t.Errorf("run page lacks %q", want)
		}
	}
	_, body = br.get("/runs/" + again.ID.String())
	for _, want := range []string{`#2`, `Re-run by owner@acme.test of`, `>#1</a>`, `1st in line`} {
		if !strings.Contains(body, want) {
			t.Errorf("re-run page lacks %q", want)
		}
	}
	res, _ := br.get("/projects/again/runs/2")
	if res.StatusCode != http.StatusFound || res.Header.Get("Location") != "/runs/"+again.ID.String() {
		t.Fatalf("by number: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	if res, _ := br.get("/projects/again/runs/99"); res.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown number: %d", res.StatusCode)
	}
	if res, body := br.get("/projects/again"); res.StatusCode != http.StatusOK || !strings.Contains(body, "Web shop") {
		t.Fatalf("project by slug: %d", res.StatusCode)
	}
	if res, _ := br.get("/projects/" + pid.String()); res.StatusCode != http.StatusOK {
		t.Fatalf("project by id: %d", res.StatusCode)
	}
}

// TestRunSecretsAPI: values go in and never come out; bad names and values
// are refused with nothing stored; the page lists names only.
func TestRunSecretsAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("vault"))
	base := "/api/private/projects/" + p["id"].(string) + "/secrets/"
	st, out := b.api(t, b.owner.Token, "PUT", base+"NPM_TOKEN", map[string]any{"value": "npm_abcdefgh"})
	if st != http.StatusCreated || out["name"] != "NPM_TOKEN" || out["value"] != nil || strings.Contains(toJSON(out), "npm_abcdefgh") {
		t.Fatalf("put: %d %v", st, out)
	}
	if st, _ := b.api(t, b.owner.Token, "PUT", base+"NPM_TOKEN", map[string]any{"value": "npm_ijklmnop"}); st != http.StatusOK {
		t.Fatalf("replace: %d", st)
	}
	if st, out := b.api(t, b.owner.Token, "GET", base+"NPM_TOKEN", nil); st != 200 || strings.Contains(toJSON(out), "npm_") {
		t.Fatalf("get: %d %v", st, out)
	}
	for name, body := range map[string]map[string]any{
		"lower":  {"value": "abcdefgh"},
		"PATH":   {"value": "abcdefgh"},
		"SHORT":  {"value": "abc"},
		"NOVAL":  {},
		"ANVIL_": {"value": "abcdefgh"},
	} {
		if st, out := b.api(t, b.owner.Token, "PUT", base+name, body); st != http.StatusBadRequest && st != http.StatusUnprocessableEntity {
			t.Errorf("%s: %d %v", name, st, out)
		}
	}
	_, list := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+p["id"].(string)+"/secrets", nil)
	if n := len(list["secrets"].([]any)); n != 1 {
		t.Fatalf("%d secrets listed, want 1: %v", n, list)
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	tok := br.csrf("/projects/vault/secrets")
	res, _ := br.post("/projects/vault/secrets", url.Values{"_csrf": {tok}, "name": {"DEPLOY_KEY"}, "value": {"k3y-material"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("form: %d", res.StatusCode)
	}
	_, page := br.get(res.Header.Get("Location"))
	if !strings.Contains(page, `data-name="DEPLOY_KEY"`) || strings.Contains(page, "k3y-material") || strings.Contains(page, "npm_") {
		t.Fatal("the page shows a value or lacks the name")
	}
	if st, _ := b.api(t, b.owner.Token, "DELETE", base+"NPM_TOKEN", nil); st != http.StatusNoContent {
		t.Fatalf("delete: %d", st)
	}
	if st, _ := b.api(t, b.owner.Token, "DELETE", base+"NPM_TOKEN", nil); st != http.StatusNotFound {
		t.Fatalf("delete again: %d", st)
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
