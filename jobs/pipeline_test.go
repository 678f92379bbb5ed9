package jobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/run"
	"anvil/domain/runsecret"
	"anvil/jobs/jobstest"
)

// acceptAt accepts a run of the project pinned to a commit.
func (b *testBundle) acceptAt(t *testing.T, p *domain.Project, trigger, sha string) *run.Run {
	t.Helper()
	var r *run.Run
	if err := b.store.WithProject(context.Background(), p.ID, func(ctx context.Context, tx bun.Tx, proj *domain.Project) error {
		var err error
		r, err = b.queue.AcceptTx(ctx, tx, proj, run.AcceptSpec{Trigger: trigger, Branch: "main", CommitSHA: &sha})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return r
}

func (b *testBundle) steps(t *testing.T, id uuid.UUID) map[string]run.Step {
	t.Helper()
	p, err := b.logs.PipelineOf(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]run.Step{}
	for _, s := range p.Steps {
		out[s.Key] = s
	}
	return out
}

func (b *testBundle) stepLog(t *testing.T, id uuid.UUID, step string) string {
	t.Helper()
	s, err := b.logs.StepText(context.Background(), b.owner.OrgID, id, step)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const dagPipeline = `
steps:
  - name: build
    commands:
      - echo built > out.txt
      - mkdir -p dist/sub && echo artifact-body > dist/sub/app.txt
      - ln -s /etc/passwd dist/passwd
    artifacts: [dist/**]
  - name: lint
    depends_on: []
    failure: ignore
    commands: [echo lint-says-no, exit 3]
  - name: slow
    depends_on: []
    failure: ignore
    timeout: 1s
    commands: [sleep 30]
  - name: release
    depends_on: [build]
    when: {branch: release}
    commands: [echo releasing]
  - name: server
    depends_on: []
    detach: true
    commands: [sleep 60]
  - name: test
    depends_on: [build]
    environment:
      GREETING: hello
      TOKEN: {from_secret: DEPLOY_KEY}
    commands:
      - test "$TOKEN" = s3cr3t-pipeline-value && echo "token=$TOKEN"
      - test -z "${DEPLOY_KEY:-}"
      - test "$CI_STEP_NAME" = test
      - echo "sha=$CI_COMMIT_SHA event=$CI_PIPELINE_EVENT branch=$CI_COMMIT_BRANCH ci=$CI greeting=$GREETING"
      - cat out.txt
`

// TestPipelineDAG runs a real .anvil.yaml through the real sandbox: a DAG
// with a step skipped by its when, an ignored failure, a timed-out step and
// an artifact kept (a symlink beside it is not followed).
func TestPipelineDAG(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	repo := jobstest.GitRepoWith(t, map[string]string{".anvil.yaml": dagPipeline})
	p := b.project(t, "dag", repo.URL, "echo the-project-command", 0)
	// A run secret reaches a step through from_secret only, masked.
	if _, _, err := runsecret.New(b.store).Put(context.Background(), b.owner, p.ID, "DEPLOY_KEY", "s3cr3t-pipeline-value"); err != nil {
		t.Fatal(err)
	}
	r := b.acceptAt(t, p, run.TriggerWebhook, repo.Head)
	got := b.waitTerminal(t, r.ID, 90*time.Second)
	log := b.logText(t, r.ID)
	if got.Status() != run.StatusPassed || got.PipelineFile == nil || *got.PipelineFile != ".anvil.yaml" {
		t.Fatalf("run %s (%v):\n%s", got.Status(), got.PipelineFile, log)
	}
	if strings.Contains(log, "the-project-command") {
		t.Fatalf("the project's command ran beside the pipeline:\n%s", log)
	}
	st := b.steps(t, r.ID)
	check := func(key, status string, code int, ignored bool, reason string) {
		t.Helper()
		s, ok := st[key]
		if !ok {
			t.Fatalf("no step %s in %v", key, st)
		}
		gotCode := -1
		if s.ExitCode != nil {
			gotCode = *s.ExitCode
		}
		if s.Status != status || gotCode != code || s.Ignored != ignored || !strings.HasPrefix(s.Reason, reason) {
			t.Fatalf("step %s: %s code %d ignored %v reason %q; want %s %d %v %q\n%s", key, s.Status, gotCode, s.Ignored, s.Reason, status, code, ignored, reason, log)
		}
	}
	check("build", run.StepPassed, 0, false, "")
	check("lint", run.StepFailed, 3, true, "exit code 3")
	check("slow", run.StepFailed, 143, true, "timeout: stopped after 1s")
	check("release", run.StepSkipped, -1, false, "when: branch [release]")
	check("test", run.StepPassed, 0, false, "")
	check("server", run.StepCanceled, 143, false, "detached: stopped when the pipeline ended")
	if st["slow"].StartedAt == nil || st["slow"].FinishedAt == nil || st["release"].StartedAt != nil {
		t.Fatalf("times: %+v %+v", st["slow"], st["release"])
	}
	testLog := b.stepLog(t, r.ID, "test")
	if strings.Contains(log, "s3cr3t-pipeline-value") {
		t.Fatalf("the secret in the log:\n%s", log)
	}
	for _, want := range []string{"+ cat out.txt", "built", "token=***", "sha=" + repo.Head + " event=push branch=main ci=true greeting=hello"} {
		if !strings.Contains(testLog, want) {
			t.Fatalf("test's log lacks %q:\n%s", want, testLog)
		}
	}
	if strings.Contains(testLog, "lint-says-no") || !strings.Contains(b.stepLog(t, r.ID, "lint"), "lint-says-no") {
		t.Fatalf("each step's log is its own:\n%s", testLog)
	}
	arts, err := b.logs.Artifacts(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(arts) != 1 || arts[0].Path != "dist/sub/app.txt" || arts[0].Step != "build" || arts[0].Size != int64(len("artifact-body\n")) {
		t.Fatalf("artifacts: %+v\n%s", arts, b.stepLog(t, r.ID, "build"))
	}
	_, body, err := b.logs.ArtifactBody(context.Background(), b.owner.OrgID, r.ID, "dist/sub/app.txt")
	if err != nil || string(body) != "artifact-body\n" {
		t.Fatalf("artifact body %q %v", body, err)
	}
}

// TestPipelineFailureAndMatrix: a matrix of two; the failing combination's
// step skips its dependent, the other runs to the end; the run fails with
// the step's exit code.
func TestPipelineFailureAndMatrix(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	repo := jobstest.GitRepoWith(t, map[string]string{".anvil.yaml": `
matrix:
  V: [a, b]
steps:
  - name: check
    commands: ['echo "v=$V"', 'test "$V" = a']
  - name: after
    commands: [echo after]
`})
	p := b.project(t, "matrix", repo.URL, "true", 0)
	r := b.acceptAt(t, p, run.TriggerWebhook, repo.Head)
	got := b.waitTerminal(t, r.ID, 90*time.Second)
	log := b.logText(t, r.ID)
	if got.Status() != run.StatusFailed || got.ExitCode == nil || *got.ExitCode != 1 || *got.FailureReason != run.ReasonExitCode {
		t.Fatalf("run %s %v:\n%s", got.Status(), got.ExitCode, log)
	}
	st := b.steps(t, r.ID)
	want := map[string]string{"check (V=a)": run.StepPassed, "after (V=a)": run.StepPassed, "check (V=b)": run.StepFailed, "after (V=b)": run.StepSkipped}
	for k, status := range want {
		if st[k].Status != status {
			t.Fatalf("step %s: %s, want %s\n%s", k, st[k].Status, status, log)
		}
	}
	if st["after (V=b)"].Reason != "a step before it failed: check (V=b)" || st["check (V=b)"].Matrix["V"] != "b" {
		t.Fatalf("%+v", st["after (V=b)"])
	}
	if l := b.stepLog(t, r.ID, "check"); !strings.Contains(l, "v=a") || !strings.Contains(l, "v=b") {
		t.Fatalf("a step's name gives every combination's log:\n%s", l)
	}
}

// TestPipelineRefused: a file that does not hold fails the run before any
// step, with its line first in the log and in pipeline_error.
func TestPipelineRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	repo := jobstest.GitRepoWith(t, map[string]string{".anvil.yaml": "steps:\n  - name: a\n    commands: [touch ran]\n  - name: b\n    depend_on: [a]\n    commands: [x]\n"})
	p := b.project(t, "refused", repo.URL, "echo the-project-command", 0)
	r := b.acceptAt(t, p, run.TriggerWebhook, repo.Head)
	got := b.waitTerminal(t, r.ID, 60*time.Second)
	log := b.logText(t, r.ID)
	first, _, _ := strings.Cut(log, "\n")
	if got.Status() != run.StatusFailed || got.FailureReason == nil || *got.FailureReason != run.ReasonPipeline {
		t.Fatalf("run %s %v:\n%s", got.Status(), got.FailureReason, log)
	}
	if !strings.HasPrefix(first, `.anvil.yaml:5: unknown key "depend_on" in a step`) {
		t.Fatalf("first line %q", first)
	}
	if got.PipelineError == nil || *got.PipelineError != first || strings.Contains(log, "the-project-command") {
		t.Fatalf("pipeline_error %v:\n%s", got.PipelineError, log)
	}
	if st := b.steps(t, r.ID); len(st) != 0 {
		t.Fatalf("steps of a refused file: %v", st)
	}
}

// TestPipelineFromTheCommit: a pull request that adds its own pipeline runs
// it (the file is read from the checked-out commit), the commit before it
// runs the project's command, and a re-run of the pull request's run reads
// the same file again.
func TestPipelineFromTheCommit(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	repo := jobstest.GitRepoWith(t, map[string]string{".anvil.yml": "steps:\n  - name: pr-step\n    commands: ['echo \"event=$CI_PIPELINE_EVENT\"']\n"})
	p := b.project(t, "prfile", repo.URL, "echo the-project-command", 0)
	old := b.acceptAt(t, p, run.TriggerWebhook, repo.Old)
	if got := b.waitTerminal(t, old.ID, 60*time.Second); got.Status() != run.StatusPassed || got.PipelineFile != nil {
		t.Fatalf("old commit: %s %v", got.Status(), got.PipelineFile)
	}
	if log := b.logText(t, old.ID); !strings.Contains(log, "the-project-command") {
		t.Fatalf("without a file the project's command runs:\n%s", log)
	}
	if st := b.steps(t, old.ID); st["run"].Status != run.StepPassed {
		t.Fatalf("the implicit step: %+v", st)
	}
	pr := b.acceptAt(t, p, run.TriggerPullRequest, repo.Head)
	if got := b.waitTerminal(t, pr.ID, 60*time.Second); got.Status() != run.StatusPassed || got.PipelineFile == nil || *got.PipelineFile != ".anvil.yml" {
		t.Fatalf("pull request: %s %v\n%s", got.Status(), got.PipelineFile, b.logText(t, pr.ID))
	}
	if l := b.stepLog(t, pr.ID, "pr-step"); !strings.Contains(l, "event=pull_request") {
		t.Fatalf("pr-step:\n%s", l)
	}
	again, err := b.queue.Rerun(context.Background(), b.owner, pr.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.waitTerminal(t, again.ID, 60*time.Second); got.Status() != run.StatusPassed || *got.CommitSHA != repo.Head {
		t.Fatalf("re-run: %s", got.Status())
	}
	if st := b.steps(t, again.ID); st["pr-step"].Status != run.StepPassed {
		t.Fatalf("the re-run read the same file: %+v\n%s", st, b.logText(t, again.ID))
	}
}

// TestPipelineCancelDuringParallelSteps: a cancel stops every running step
// and cancels the steps that had not started.
func TestPipelineCancelDuringParallelSteps(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	repo := jobstest.GitRepoWith(t, map[string]string{".anvil.yaml": `
steps:
  - name: one
    depends_on: []
    commands: [sleep 60]
  - name: two
    depends_on: []
    commands: [sleep 60]
  - name: join
    depends_on: [one, two]
    commands: [echo never]
`})
	p := b.project(t, "cancel", repo.URL, "true", 0)
	r := b.acceptAt(t, p, run.TriggerWebhook, repo.Head)
	waitFor(t, 60*time.Second, "both steps to run", func() bool {
		st := b.steps(t, r.ID)
		return st["one"].Status == run.StepRunning && st["two"].Status == run.StepRunning
	})
	if _, err := b.queue.RequestCancel(context.Background(), b.owner, r.ID); err != nil {
		t.Fatal(err)
	}
	got := b.waitTerminal(t, r.ID, 30*time.Second)
	if got.Status() != run.StatusCanceled {
		t.Fatalf("run %s:\n%s", got.Status(), b.logText(t, r.ID))
	}
	st := b.steps(t, r.ID)
	for _, k := range []string{"one", "two", "join"} {
		if st[k].Status != run.StepCanceled {
			t.Fatalf("step %s: %s", k, st[k].Status)
		}
	}
}

// TestPipelinePathFilter: `when: path` is matched against the files the
// commit changes against its parent (README and the pipeline file here).
func TestPipelinePathFilter(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	repo := jobstest.GitRepoWith(t, map[string]string{".anvil.yaml": `
steps:
  - name: docs
    when: {path: ['docs/**']}
    commands: [echo docs]
  - name: readme
    depends_on: []
    when: {path: [README, '*.md']}
    commands: [echo readme]
`})
	p := b.project(t, "paths", repo.URL, "true", 0)
	for _, r := range []*run.Run{b.acceptAt(t, p, run.TriggerWebhook, repo.Head), nil} {
		if r == nil {
			// A manual run of the branch's head: the same commit.
			var err error
			if r, err = b.queue.AcceptManual(context.Background(), b.owner, p.ID, ""); err != nil {
				t.Fatal(err)
			}
		}
		got := b.waitTerminal(t, r.ID, 60*time.Second)
		st := b.steps(t, r.ID)
		if got.Status() != run.StatusPassed || st["docs"].Status != run.StepSkipped || st["docs"].Reason != "when: path [docs/**]" || st["readme"].Status != run.StepPassed {
			t.Fatalf("run %s, steps %+v\n%s", got.Status(), st, b.logText(t, r.ID))
		}
	}
}
