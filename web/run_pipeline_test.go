package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/run"
)

// pipelineRun stores a run with two steps, their logs and an artifact, as
// the executor does.
func (b *testBundle) pipelineRun(t *testing.T, slug string) *run.Run {
	t.Helper()
	ctx := context.Background()
	_, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject(slug))
	pid := uuid.MustParse(p["id"].(string))
	owner, _ := b.accounts.Authenticate(ctx, b.owner.Token)
	r, err := b.queue.AcceptManual(ctx, owner, pid, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.logs.SetPipeline(ctx, r, ".anvil.yaml", ""); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	zero, three := 0, 3
	steps := []run.Step{
		{Index: 0, Key: "build", Name: "build", Status: run.StepPending},
		{Index: 1, Key: "lint", Name: "lint", Status: run.StepPending},
		{Index: 2, Key: "release", Name: "release", Status: run.StepPending, Needs: []int{0}},
	}
	if err := b.logs.SetSteps(ctx, r, steps); err != nil {
		t.Fatal(err)
	}
	steps[0].Status, steps[0].ExitCode, steps[0].StartedAt, steps[0].FinishedAt = run.StepPassed, &zero, &now, &now
	steps[1].Status, steps[1].ExitCode, steps[1].Ignored, steps[1].Reason, steps[1].StartedAt, steps[1].FinishedAt = run.StepFailed, &three, true, "exit code 3", &now, &now
	steps[2].Status, steps[2].Reason = run.StepSkipped, "when: branch [release]"
	for i := range steps {
		if err := b.logs.UpdateStep(ctx, r, &steps[i]); err != nil {
			t.Fatal(err)
		}
	}
	w := b.logs.Writer(ctx, r)
	w.Printf("pipeline: .anvil.yaml, 3 step(s)")
	w.Step(0).Write([]byte("+ make\nbuilt it\n"))
	w.Step(1).Write([]byte("+ lint\nerror: lint says no\n"))
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.logs.SaveArtifact(ctx, r.ID, "build", "dist/app.txt", []byte("<script>alert(1)</script>")); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRunPipelineAPI: the run carries its pipeline and steps, ?step= gives
// one step's log alone, artifacts list and download for members (as a
// download, never a page), not for viewers nor another organisation.
func TestRunPipelineAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.pipelineRun(t, "piped")
	base := "/api/private/runs/" + r.ID.String()
	st, got := b.api(t, b.owner.Token, "GET", base, nil)
	pl, _ := got["pipeline"].(map[string]any)
	if st != http.StatusOK || pl == nil || pl["file"] != ".anvil.yaml" || pl["error"] != nil {
		t.Fatalf("run: %d %v", st, got)
	}
	steps := pl["steps"].([]any)
	lint := steps[1].(map[string]any)
	if len(steps) != 3 || lint["name"] != "lint" || lint["status"] != "failed" || lint["exit_code"] != 3.0 || lint["ignored"] != true ||
		lint["reason"] != "exit code 3" || lint["started_at"] == nil || steps[2].(map[string]any)["reason"] != "when: branch [release]" {
		t.Fatalf("steps: %v", steps)
	}
	for _, k := range []string{"workflow", "matrix", "image", "image_digest", "finished_at"} {
		if _, ok := lint[k]; !ok {
			t.Fatalf("step lacks %s: %v", k, lint)
		}
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	if res, text := br.get(base + "/logs?step=lint"); res.StatusCode != 200 || text != "+ lint\nerror: lint says no\n" {
		t.Fatalf("lint's log: %d %q", res.StatusCode, text)
	}
	if res, text := br.get(base + "/logs"); res.StatusCode != 200 || !strings.Contains(text, "built it") || !strings.Contains(text, "lint says no") {
		t.Fatalf("whole log: %q", text)
	}
	if res, _ := br.get(base + "/logs?step=nope"); res.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown step: %d", res.StatusCode)
	}
	st, list := b.api(t, b.owner.Token, "GET", base+"/artifacts", nil)
	arts, _ := list["artifacts"].([]any)
	if st != 200 || len(arts) != 1 || arts[0].(map[string]any)["path"] != "dist/app.txt" || arts[0].(map[string]any)["size"] != 25.0 ||
		len(arts[0].(map[string]any)["sha256"].(string)) != 64 {
		t.Fatalf("artifacts: %d %v", st, list)
	}
	res, body := br.get(base + "/artifacts/dist/app.txt")
	if res.StatusCode != 200 || body != "<script>alert(1)</script>" || res.Header.Get("Content-Type") != "application/octet-stream" ||
		!strings.HasPrefix(res.Header.Get("Content-Disposition"), "attachment") || res.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("download: %d %v %q", res.StatusCode, res.Header, body)
	}
	for _, bad := range []string{"/artifacts/dist/../dist/app.txt", "/artifacts/nope", "/artifacts/"} {
		if res, _ := br.get(base + bad); res.StatusCode != http.StatusNotFound {
			t.Fatalf("%s: %d", bad, res.StatusCode)
		}
	}
	viewerToken, viewer := b.person(t, domain.RoleViewer)
	if st, _ := b.api(t, viewerToken, "GET", base+"/artifacts", nil); st != http.StatusForbidden {
		t.Fatalf("a viewer lists artifacts: %d", st)
	}
	if res, _ := viewer.get(base + "/artifacts/dist/app.txt"); res.StatusCode != http.StatusForbidden {
		t.Fatalf("a viewer downloads an artifact: %d", res.StatusCode)
	}
	other, _ := b.accounts.Bootstrap(context.Background(), "globex", "owner@globex.test", testPassword)
	if st, _ := b.api(t, other.Token, "GET", base+"/artifacts", nil); st != http.StatusNotFound {
		t.Fatalf("another organisation lists artifacts: %d", st)
	}
}

// TestRunPipelinePage: the run's page lists its steps with why one was
// skipped and a failed step's first error, marks each log line with its
// step, and lists artifacts for members only.
func TestRunPipelinePage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.pipelineRun(t, "paged")
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	res, page := br.get("/runs/" + r.ID.String())
	if res.StatusCode != 200 {
		t.Fatalf("page: %d", res.StatusCode)
	}
	for _, want := range []string{`data-testid="run-steps"`, `data-step-key="release" data-status="skipped"`, `when: branch [release]`,
		`data-testid="step-first-error"`, `error: lint says no`, `data-step="1"`, `data-testid="artifact-link"`, `after build`,
		`/runs/` + r.ID.String() + `/artifacts/dist/app.txt`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if _, frag := br.get("/runs/" + r.ID.String() + "?fragment=steps"); !strings.Contains(frag, `data-testid="run-steps"`) || strings.Contains(frag, "<html") {
		t.Fatalf("steps fragment: %q", frag)
	}
	_, viewer := b.person(t, domain.RoleViewer)
	if _, vpage := viewer.get("/runs/" + r.ID.String()); strings.Contains(vpage, `data-testid="artifact-link"`) || !strings.Contains(vpage, `data-testid="run-steps"`) {
		t.Fatal("a viewer sees the steps and no artifact link")
	}
}
