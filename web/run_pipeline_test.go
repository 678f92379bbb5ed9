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

// servicesRun adds services to a pipeline run as the executor records
// them: a ready one with a log, one that never got ready, and two of one
// name in two workflows.
func (b *testBundle) servicesRun(t *testing.T, r *run.Run) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	ready := now.Add(1500 * time.Millisecond)
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, s := range []run.Service{
		{Name: "web", Image: "registry.test/web:1", ImageDigest: digest, Ports: []int{8080}, Status: run.ServiceStopped, StartedAt: &now, ReadyAt: &ready, FinishedAt: &ready,
			Log: "web is up\n\x1b[31mGET / 200\x1b[0m\n", LogBytes: 29},
		{Name: "db", Image: "registry.test/db:1", Status: run.ServiceFailed, Reason: "the service db: its healthcheck failed 3 times (last exit 1)", StartedAt: &now, FinishedAt: &now,
			Log: "initdb: broken\n", LogBytes: 15},
		{Name: "cache", Workflow: "api", Image: "registry.test/cache:1", Status: run.ServiceReady, StartedAt: &now, ReadyAt: &now, Log: "api cache\n"},
		{Name: "cache", Workflow: "web", Image: "registry.test/cache:1", Status: run.ServiceStarting, StartedAt: &now},
	} {
		log, bytes, status, reason, readyAt, finished := s.Log, s.LogBytes, s.Status, s.Reason, s.ReadyAt, s.FinishedAt
		s.Status, s.Log, s.Reason, s.ReadyAt, s.FinishedAt = run.ServiceStarting, "", "", nil, nil
		if err := b.logs.StartService(ctx, r, &s); err != nil {
			t.Fatal(err)
		}
		s.Log, s.LogBytes, s.Status, s.Reason, s.ReadyAt, s.FinishedAt = log, bytes, status, reason, readyAt, finished
		if err := b.logs.UpdateService(ctx, r, &s); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRunServicesAPIAndPage: the run carries its services in order with
// their state; ?service= gives one service's log, &workflow= picks one of
// two of a name, an unknown name is a 404 that says so; another
// organisation sees nothing; the page's Services section (and its live
// fragment) shows each service with its log folded away.
func TestRunServicesAPIAndPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.pipelineRun(t, "served")
	b.servicesRun(t, r)
	base := "/api/private/runs/" + r.ID.String()
	st, got := b.api(t, b.owner.Token, "GET", base, nil)
	pl, _ := got["pipeline"].(map[string]any)
	if st != http.StatusOK || pl == nil {
		t.Fatalf("run: %d %v", st, got)
	}
	svcs, _ := pl["services"].([]any)
	if len(svcs) != 4 {
		t.Fatalf("services: %v", pl["services"])
	}
	web, db := svcs[0].(map[string]any), svcs[1].(map[string]any)
	if web["name"] != "web" || web["workflow"] != "" || web["status"] != "stopped" || web["image"] != "registry.test/web:1" ||
		!strings.HasPrefix(web["image_digest"].(string), "sha256:ab") || web["ready_at"] == nil || web["finished_at"] == nil || web["started_at"] == nil ||
		len(web["ports"].([]any)) != 1 || web["ports"].([]any)[0] != 8080.0 || web["reason"] != "" {
		t.Fatalf("web: %v", web)
	}
	if db["status"] != "failed" || !strings.Contains(db["reason"].(string), "healthcheck failed") || db["ready_at"] != nil {
		t.Fatalf("db: %v", db)
	}
	if _, ok := web["log"]; ok {
		t.Fatalf("the run's JSON carries a service's log: %v", web)
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	if res, text := br.get(base + "/logs?service=db"); res.StatusCode != 200 || text != "initdb: broken\n" {
		t.Fatalf("db's log: %d %q", res.StatusCode, text)
	}
	if res, text := br.get(base + "/logs?service=cache&workflow=api"); res.StatusCode != 200 || text != "api cache\n" {
		t.Fatalf("api's cache: %d %q", res.StatusCode, text)
	}
	for q, want := range map[string]struct {
		status int
		code   string
	}{
		"service=cache":                       {http.StatusUnprocessableEntity, "service_ambiguous"},
		"service=nope":                        {http.StatusNotFound, "service_not_found"},
		"service=web&workflow=api":            {http.StatusNotFound, "service_not_found"},
		"service=web&step=build":              {http.StatusUnprocessableEntity, "invalid_query"},
		"service=" + strings.Repeat("x", 300): {http.StatusNotFound, "service_not_found"},
	} {
		if st, body := b.api(t, b.owner.Token, "GET", base+"/logs?"+q, nil); st != want.status || body["error"] != want.code {
			t.Errorf("%s: %d %v", q, st, body)
		}
	}
	other, _ := b.accounts.Bootstrap(context.Background(), "globex", "owner@globex.test", testPassword)
	if st, body := b.api(t, other.Token, "GET", base+"/logs?service=web", nil); st != http.StatusNotFound || body["error"] != "not_found" {
		t.Fatalf("another organisation reads a service's log: %d %v", st, body)
	}

	_, page := br.get("/runs/" + r.ID.String())
	for _, want := range []string{`data-testid="run-services"`, `data-service="web" data-status="stopped"`, `ready in 1.5 s`, `sha256:abababababab`,
		`data-service="db" data-status="failed"`, `healthcheck failed 3 times`, `initdb: broken`, `in api`, `data-service-key="web/cache"`,
		`Nothing written yet.`, `<span class="text-red-`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if _, frag := br.get("/runs/" + r.ID.String() + "?fragment=services"); !strings.Contains(frag, `data-testid="run-services"`) || strings.Contains(frag, "<html") {
		t.Fatalf("services fragment: %q", frag)
	}
	// A run without services has no section, only its live wrapper.
	plain := b.pipelineRun(t, "plain")
	if _, page := br.get("/runs/" + plain.ID.String()); strings.Contains(page, `data-testid="run-services"`) || !strings.Contains(page, `id="run-services-live"`) {
		t.Fatal("a run without services shows a Services section")
	}
}
