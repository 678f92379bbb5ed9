package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"anvil/domain/pipeline"
	runs "anvil/domain/run"
	"anvil/jobs/sandbox"
)

// StepLauncher starts one pipeline step and returns once every process of
// it is gone, as sandbox.Executor.Run does. It is the seam where a worker
// that runs steps in their images plugs in (with
// ExecuteRunWorker.Images): it gets the planned step (its image, its
// services' workflow) and the spec the worker built, and returns the
// digest of the image it ran ("" for none).
type StepLauncher func(ctx context.Context, p *pipeline.Planned, spec sandbox.Spec, out io.Writer) (res sandbox.Result, digest string, err error)

// launch runs a step through the worker's launcher, or its executor.
func (w *ExecuteRunWorker) launch(ctx context.Context, p *pipeline.Planned, spec sandbox.Spec, out io.Writer) (sandbox.Result, string, error) {
	if w.LaunchStep != nil {
		return w.LaunchStep(ctx, p, spec, out)
	}
	if p.Step.Image != "" {
		return sandbox.Result{}, "", errors.New("this worker cannot run a step in an image")
	}
	res, err := w.Executor.Run(ctx, spec, out)
	return res, "", err
}

// readPipeline reads the commit's pipeline files from the checkout: none
// (nil, nil) when it has none. Every file is opened without following a
// symlink and bounded, so a repository cannot make the worker read a file
// of its host (docs/pipelines.md, "The file").
func readPipeline(ws string) ([]pipeline.Source, error) {
	isFile := func(rel string) (bool, error) {
		fi, err := os.Lstat(filepath.Join(ws, rel))
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if !fi.Mode().IsRegular() {
			return false, &pipeline.Error{File: rel, Msg: "not a regular file (a symlink?)"}
		}
		return true, nil
	}
	hasYAML, err := isFile(".anvil.yaml")
	if err != nil {
		return nil, err
	}
	hasYML, err := isFile(".anvil.yml")
	if err != nil {
		return nil, err
	}
	var entries []string
	if fi, err := os.Lstat(filepath.Join(ws, ".anvil")); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return nil, &pipeline.Error{File: ".anvil", Msg: "a symlink; pipelines are read from the commit's own files"}
	} else if err == nil && fi.IsDir() {
		des, err := os.ReadDir(filepath.Join(ws, ".anvil"))
		if err != nil {
			return nil, err
		}
		for _, de := range des {
			if de.Type().IsRegular() {
				entries = append(entries, de.Name())
			} else if strings.HasSuffix(de.Name(), ".yaml") {
				return nil, &pipeline.Error{File: ".anvil/" + de.Name(), Msg: "not a regular file (a symlink?)"}
			}
		}
		sort.Strings(entries)
	}
	names, err := pipeline.Select(hasYAML, hasYML, entries)
	if err != nil || names == nil {
		return nil, err
	}
	out := make([]pipeline.Source, 0, len(names))
	for _, n := range names {
		data, err := readBounded(filepath.Join(ws, n), pipeline.MaxFileBytes)
		if err != nil {
			return nil, &pipeline.Error{File: n, Msg: err.Error()}
		}
		out = append(out, pipeline.Source{Path: n, Data: data})
	}
	return out, nil
}

func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot be read")
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("cannot be read")
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	return data, nil
}

// eventOf is a run's CI_PIPELINE_EVENT and `when: event`.
func eventOf(r *runs.Run) string {
	switch r.Trigger {
	case runs.TriggerWebhook:
		return pipeline.EventPush
	case runs.TriggerPullRequest:
		return pipeline.EventPullRequest
	}
	return pipeline.EventManual
}

// loadPlan reads and plans the commit's pipeline; a run without a file
// (and every repair) gets the project's command as its one step. file is
// what the run read ("" for none).
func (w *ExecuteRunWorker) loadPlan(ws string, r *runs.Run, command string, changed func() ([]string, bool)) (plan *pipeline.Plan, file string, err error) {
	if r.Trigger == runs.TriggerRepair {
		return pipeline.Implicit(command), "", nil
	}
	srcs, err := readPipeline(ws)
	if err != nil {
		var pe *pipeline.Error
		if errors.As(err, &pe) {
			return nil, pe.File, err
		}
		return nil, "", &pipeline.Error{File: ".anvil.yaml", Msg: "cannot be read"}
	}
	if srcs == nil {
		return pipeline.Implicit(command), "", nil
	}
	file = srcs[0].Path
	if len(srcs) > 1 {
		file = ".anvil/"
	}
	cfg, err := pipeline.Parse(srcs)
	if err != nil {
		return nil, file, err
	}
	opt := pipeline.PlanOptions{Images: w.Images, Event: eventOf(r), Branch: r.Branch}
	if pipeline.NeedsChangedFiles(cfg) {
		opt.ChangedFiles, opt.ChangedKnown = changed()
	}
	plan, err = pipeline.Build(cfg, opt)
	return plan, file, err
}

// stepResult is how one launched step ended.
type stepResult struct {
	idx     int
	outcome pipeline.Outcome
	res     sandbox.Result
}

// pipelineRun is the state of one run's pipeline while it executes.
type pipelineRun struct {
	w    *ExecuteRunWorker
	run  *runs.Run
	plan *pipeline.Plan
	// launcher runs the steps of a worker with images (run_step_image.go);
	// nil: the worker's launch.
	launcher StepLauncher
	implicit bool
	base     sandbox.Spec      // the run's spec: workspace, limits, network, cache
	infra    map[string]string // the run's variables that are no secret (network, cache)
	secrets  map[string]string
	logw     *runs.LogWriter
	rows     []runs.Step
	arts     *artifactBudget
	timeout  time.Duration // the run's own (the project's run_timeout)
	// The implicit step's result, for the run's report and a repair's
	// Finish: whether it was launched, and whether the sandbox failed.
	last       sandbox.Result
	ran        bool
	sandboxErr bool
}

// runPipeline executes a planned run: it walks the DAG with at most
// ParallelSteps steps at once in the one workspace, records each step's
// status, and returns the run's report. execCtx bounds the whole run (its
// timeout); runCtx tells a cancel or a shutdown.
func (pr *pipelineRun) execute(runCtx, execCtx context.Context) runs.TerminalReport {
	w, logw := pr.w, pr.logw
	pr.rows = make([]runs.Step, len(pr.plan.Steps))
	for i, p := range pr.plan.Steps {
		row := runs.Step{Index: i, Key: p.Key, Name: p.Name, Workflow: p.Workflow, Image: p.Step.Image, Status: runs.StepPending,
			Needs: p.Needs, Detached: p.Step.Detach}
		if len(p.Matrix) > 0 {
			row.Matrix = map[string]string{}
			for _, kv := range p.Matrix {
				row.Matrix[kv.Key] = kv.Value
			}
		}
		pr.rows[i] = row
	}
	ctx := context.WithoutCancel(runCtx)
	if err := w.Logs.SetSteps(ctx, pr.run, pr.rows); err != nil {
		w.Log.Error("store run steps", "run_id", pr.run.ID, "error", err)
	}
	parallel := w.ParallelSteps
	if parallel <= 0 {
		parallel = runtime.NumCPU()
	}
	sched := pipeline.NewScheduler(pr.plan)
	results := make(chan stepResult)
	var ready []int
	running := 0
	detached := map[int]context.CancelCauseFunc{}
	var detachedWG sync.WaitGroup
	var failedStep *pipeline.Planned
	failedCode := 0
	timedOut := false
	for {
		var next []pipeline.Decision
		if execCtx.Err() == nil { // once stopped, what did not start is canceled, not skipped
			next = sched.Next()
		}
		for _, d := range next {
			if d.Run {
				ready = append(ready, d.Index)
				continue
			}
			pr.finish(ctx, d.Index, runs.StepSkipped, nil, d.Reason, false)
		}
		for len(ready) > 0 && running < parallel && execCtx.Err() == nil {
			idx := ready[0]
			ready = ready[1:]
			p := pr.plan.Steps[idx]
			if p.Step.Detach {
				dctx, cancel := context.WithCancelCause(execCtx)
				detached[idx] = cancel
				detachedWG.Add(1)
				go func() {
					defer detachedWG.Done()
					pr.step(dctx, p, true)
				}()
				// A detached step is done for the DAG as soon as it starts.
				sched.Done(idx, pipeline.Passed)
				continue
			}
			running++
			go func() { results <- pr.step(execCtx, p, false) }()
		}
		if running == 0 && (len(ready) == 0 || execCtx.Err() != nil) {
			if len(ready) > 0 || !sched.Finished() {
				// Stopped (cancel, shutdown, the run's timeout): what did
				// not start is canceled.
				for _, idx := range append(ready, sched.Pending()...) {
					pr.finish(ctx, idx, runs.StepCanceled, nil, "the run stopped before it started", false)
				}
				ready = nil
			}
			break
		}
		r := <-results
		running--
		sched.Done(r.idx, r.outcome)
		if r.outcome == pipeline.Failed && failedStep == nil {
			failedStep, failedCode = pr.plan.Steps[r.idx], r.res.ExitCode
		}
		if r.res.TimedOut && errors.Is(context.Cause(execCtx), sandbox.ErrTimeout) {
			timedOut = true
		}
	}
	// Detached steps end with the pipeline.
	for _, cancel := range detached {
		cancel(sandbox.ErrCanceled)
	}
	detachedWG.Wait()

	if pr.implicit {
		// The project's command alone: the report is today's.
		return pr.implicitReport(runCtx, execCtx)
	}
	if rep, ok := w.stopped(runCtx, logw); ok {
		return rep
	}
	if timedOut || errors.Is(context.Cause(execCtx), sandbox.ErrTimeout) {
		logw.Printf("timed out after %s", pr.timeout)
		return failed(runs.ReasonTimeout, nil)
	}
	if failedStep != nil {
		logw.Printf("step %s failed (exit code %d)", failedStep.Key, failedCode)
		return failed(runs.ReasonExitCode, &failedCode)
	}
	code := 0
	logw.Printf("every step passed")
	return runs.TerminalReport{State: runs.StatePassed, ExitCode: &code}
}

// implicitReport is the report of a run of the project's command, as it
// was before pipelines.
func (pr *pipelineRun) implicitReport(runCtx, execCtx context.Context) runs.TerminalReport {
	w, logw, res := pr.w, pr.logw, pr.last
	if pr.sandboxErr {
		return failed(runs.ReasonSandbox, nil)
	}
	if res.TimedOut || errors.Is(context.Cause(execCtx), sandbox.ErrTimeout) && (res.Canceled || !pr.ran) {
		logw.Printf("timed out after %s", pr.timeout)
		if !pr.ran {
			return failed(runs.ReasonTimeout, nil)
		}
		return failed(runs.ReasonTimeout, &res.ExitCode)
	}
	if res.Canceled || !pr.ran {
		if r, ok := w.stopped(runCtx, logw); ok {
			return r
		}
	}
	logw.Printf("exit code %d", res.ExitCode)
	code := res.ExitCode
	if code == 0 {
		return runs.TerminalReport{State: runs.StatePassed, ExitCode: &code}
	}
	return failed(runs.ReasonExitCode, &code)
}

// step runs one step and records how it ended.
func (pr *pipelineRun) step(ctx context.Context, p *pipeline.Planned, detached bool) stepResult {
	w, logw := pr.w, pr.logw
	// An offline step's first failed lookup is preceded by anvil's hint
	// (docs/network.md, "A run without a network"); with a pipeline, in each
	// step's own log.
	out := offlineOut(logw.Step(p.Index), pr.base.Network == nil && w.Executor.Sandboxed(), pr.run.Trigger == runs.TriggerRepair)
	bctx := context.WithoutCancel(ctx)
	now := time.Now().UTC()
	pr.rows[p.Index].Status, pr.rows[p.Index].StartedAt = runs.StepRunning, &now
	if err := w.Logs.UpdateStep(bctx, pr.run, &pr.rows[p.Index]); err != nil {
		w.Log.Warn("store step", "run_id", pr.run.ID, "step", p.Key, "error", err)
	}
	spec := pr.base
	if pr.implicit {
		logw.Printf("$ %s", firstLine(spec.Command))
	} else {
		logw.Printf("step %s started", p.Key)
		env, err := pipeline.Env(p, pipeline.CI{CommitSHA: deref(pr.run.CommitSHA), Branch: pr.run.Branch,
			Event: eventOf(pr.run), Workspace: spec.Workspace}, pr.secrets)
		if err != nil {
			fmt.Fprintf(out, "%s\n", err)
			return pr.ended(bctx, p, sandbox.Result{ExitCode: -1}, runs.StepFailed, err.Error(), detached)
		}
		for k, v := range pr.infra {
			if _, set := env[k]; !set {
				env[k] = v
			}
		}
		spec.Env, spec.Command = env, pipeline.Script(p.Step)
	}
	sctx := ctx
	if p.Timeout > 0 {
		var cancel context.CancelFunc
		sctx, cancel = context.WithTimeoutCause(ctx, p.Timeout, errStepTimeout)
		defer cancel()
	}
	launch := w.launch
	if pr.launcher != nil {
		launch = pr.launcher
	}
	res, digest, err := launch(sctx, p, spec, out)
	pr.rows[p.Index].ImageDigest = digest
	if pr.implicit {
		pr.last, pr.ran, pr.sandboxErr = res, true, err != nil
	}
	switch {
	case err != nil:
		logw.Printf("the sandbox failed: %v", err)
		res.ExitCode = -1
		return pr.ended(bctx, p, res, runs.StepFailed, "the sandbox failed", detached)
	case errors.Is(context.Cause(sctx), errStepTimeout) && (res.Canceled || res.TimedOut):
		fmt.Fprintf(out, "[anvil] timed out after %s\n", p.Timeout)
		res.TimedOut = false // the step's own timeout, not the run's
		return pr.ended(bctx, p, res, runs.StepFailed, "timeout: stopped after "+p.Timeout.String(), detached)
	case res.TimedOut:
		return pr.ended(bctx, p, res, runs.StepFailed, "the run timed out", detached)
	case res.Canceled && detached:
		return pr.ended(bctx, p, res, runs.StepCanceled, "detached: stopped when the pipeline ended", detached)
	case res.Canceled:
		return pr.ended(bctx, p, res, runs.StepCanceled, "the run was stopped", detached)
	}
	if len(p.Step.Artifacts) > 0 {
		pr.arts.keep(bctx, w, pr.run, pr.base.Workspace, p, out)
	}
	if res.ExitCode != 0 {
		return pr.ended(bctx, p, res, runs.StepFailed, fmt.Sprintf("exit code %d", res.ExitCode), detached)
	}
	return pr.ended(bctx, p, res, runs.StepPassed, "", detached)
}

var errStepTimeout = errors.New("pipeline: the step's timeout passed")

// ended records a step's end and turns it into the scheduler's outcome.
func (pr *pipelineRun) ended(ctx context.Context, p *pipeline.Planned, res sandbox.Result, status, reason string, detached bool) stepResult {
	code := res.ExitCode
	var codep *int
	if code >= 0 {
		codep = &code
	}
	ignored := status == runs.StepFailed && p.Step.FailureIgnore
	if err := pr.logw.EndStep(ctx, p.Index); err != nil {
		pr.w.Log.Warn("store step log", "run_id", pr.run.ID, "step", p.Key, "error", err)
	}
	pr.finish(ctx, p.Index, status, codep, reason, ignored)
	if !pr.implicit {
		took := time.Since(*pr.rows[p.Index].StartedAt).Round(time.Millisecond)
		switch {
		case ignored:
			pr.logw.Printf("step %s failed (%s) after %s; failure: ignore", p.Key, reason, took)
		case status == runs.StepPassed:
			pr.logw.Printf("step %s passed in %s", p.Key, took)
		default:
			pr.logw.Printf("step %s %s after %s: %s", p.Key, status, took, reason)
		}
	}
	o := pipeline.Passed
	switch {
	case detached:
	case ignored:
		o = pipeline.Ignored
	case status == runs.StepFailed:
		o = pipeline.Failed
	case status == runs.StepCanceled:
		o = pipeline.Canceled
	}
	return stepResult{idx: p.Index, outcome: o, res: res}
}

// finish stores a step's final status.
func (pr *pipelineRun) finish(ctx context.Context, idx int, status string, code *int, reason string, ignored bool) {
	row := &pr.rows[idx]
	now := time.Now().UTC()
	row.Status, row.ExitCode, row.Reason, row.Ignored = status, code, reason, ignored
	if status != runs.StepSkipped && !(status == runs.StepCanceled && row.StartedAt == nil) {
		row.FinishedAt = &now
	}
	if status == runs.StepSkipped && !pr.implicit {
		pr.logw.Printf("step %s skipped: %s", row.Key, reason)
	}
	if err := pr.w.Logs.UpdateStep(ctx, pr.run, row); err != nil {
		pr.w.Log.Warn("store step", "run_id", pr.run.ID, "step", row.Key, "error", err)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// heldLog keeps the checkout's narration until the pipeline file is read,
// so that a refused file's line comes first in the run's log; bounded.
type heldLog struct{ bytes.Buffer }

const heldMax = 256 << 10

func (h *heldLog) Write(p []byte) (int, error) {
	if room := heldMax - h.Len(); room > 0 {
		h.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// Printf narrates as LogWriter.Printf does.
func (h *heldLog) Printf(format string, args ...any) {
	fmt.Fprintf(h, "[anvil] "+format+"\n", args...)
}
