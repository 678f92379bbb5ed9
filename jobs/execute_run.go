package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"anvil/domain"
	"anvil/domain/network"
	"anvil/domain/project"
	runs "anvil/domain/run"
	"anvil/domain/runcache"
	"anvil/jobs/sandbox"
)

// RepairHandler prepares and finishes repair runs: the command and
// environment to run, and what to do with the working tree afterwards
// (commit, push, pull request). Manual and webhook runs need none.
type RepairHandler interface {
	Prepare(ctx context.Context, run *runs.Run, proj *domain.Project, workspace string) (RepairPlan, error)
	Finish(ctx context.Context, run *runs.Run, proj *domain.Project, workspace string, res sandbox.Result, log *runs.LogWriter) (runs.TerminalReport, error)
}

// RepairPlan is what a repair run executes.
type RepairPlan struct {
	Command       string
	Env           map[string]string
	ExtraReadOnly []string
}

// ExecuteRunWorker is the execution agent (the queue consumer): it
// claims a promoted run, checks the repository out into a fresh workspace,
// runs the command in the sandbox with live logs and heartbeats, tears the
// sandbox down and reports the terminal result. The queue service decides
// everything; this worker only calls it.
type ExecuteRunWorker struct {
	river.WorkerDefaults[domain.ExecuteRunArgs]
	Queue     *runs.Queue
	Projects  *project.Projects
	Logs      *runs.Logs
	Hub       *domain.Hub
	Executor  sandbox.Executor
	Git       *sandbox.Git   // checks repositories out under the checkout policy
	Limits    sandbox.Limits // of every run's command (zero: sandbox.DefaultLimits)
	WorkRoot  string         // this process's own workspace folder
	Repair    RepairHandler
	Log       *slog.Logger
	Heartbeat time.Duration // how often to heartbeat; a fraction of the watchdog's timeout
	ID        string        // executor id recorded on claimed runs
	// Secrets returns the environment of a run's command: the project's
	// run secrets (none for a run from a fork). Nil: none.
	Secrets func(ctx context.Context, r *runs.Run) (map[string]string, error)
	// Network starts the egress proxy of a run whose project lists hosts;
	// Bridge installs (once) and returns the bridge binary bwrap
	// sandboxes run (run_network.go).
	Network *network.Service
	Bridge  func() (string, error)
	// Caches keeps the projects' caches on this worker, CacheState their
	// generations and figures (run_cache.go); nil Caches: no cache.
	Caches     *sandbox.Caches
	CacheState *runcache.Service
	// ImageStore runs commands in container images (run_image.go,
	// docs/images.md); nil: a run with an image fails.
	ImageStore *Images
	// ParallelSteps bounds the pipeline steps that run at once in a run's
	// workspace (ANVIL_RUN_PARALLEL_STEPS; ≤ 0: the machine's cores);
	// ArtifactsMaxBytes a run's kept files (ANVIL_ARTIFACTS_MAX_MB).
	ParallelSteps     int
	ArtifactsMaxBytes int64
	// Images is the planner's switch for steps with an image and for
	// services (pipeline.PlanOptions.Images); LaunchStep, when set, runs
	// each step instead of Executor (run_pipeline.go).
	Images     bool
	LaunchStep StepLauncher
}

// Timeout disables River's job timeout: a run is bounded by its project's
// run_timeout and the heartbeat watchdog, never by River (whose default
// would kill every run after a minute).
func (w *ExecuteRunWorker) Timeout(*river.Job[domain.ExecuteRunArgs]) time.Duration { return -1 }

// Work executes one run.
func (w *ExecuteRunWorker) Work(ctx context.Context, job *river.Job[domain.ExecuteRunArgs]) error {
	run, proj, err := w.Queue.Claim(ctx, job.Args.RunID, w.ID)
	if errors.Is(err, runs.ErrNotExecutable) || errors.Is(err, domain.ErrNotFound) {
		return nil // canceled while queued, or already handled: nothing to do
	}
	if err != nil {
		return err
	}
	// The workspace is removed after the report: removing a checkout takes
	// milliseconds nobody waiting for the run's result needs to wait for.
	var removeWorkspace func()
	defer func() {
		if removeWorkspace != nil {
			removeWorkspace()
		}
	}()
	rep := w.execute(ctx, run, proj, &removeWorkspace)
	// Report even when the job's context is gone (shutdown): the run must
	// not wait for the watchdog when we can say what happened.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := w.Queue.ReportTerminal(rctx, run.ID, rep); err != nil {
		if errors.Is(err, domain.ErrConflict) {
			return nil // the watchdog terminalized it first (runner declared lost)
		}
		return fmt.Errorf("report terminal of run %s: %w", run.ID, err)
	}
	return nil
}

// execute runs everything between claim and terminal report and returns
// the report; when it made a workspace, it sets *removeWorkspace to the
// function that removes it, which the caller calls on every path (nothing
// runs in the workspace any more once execute has returned).
func (w *ExecuteRunWorker) execute(ctx context.Context, run *runs.Run, proj *domain.Project, removeWorkspace *func()) runs.TerminalReport {
	logw := w.Logs.Writer(ctx, run)
	defer logw.Close(context.WithoutCancel(ctx))

	// The secrets are read first, so that the log masks them from its
	// first line on.
	// The worker's own folders are masked as secrets are: a log (a
	// repair's above all, whose host git and incident file live there)
	// never shows where this worker keeps its workspaces and caches
	// (docs/security.md, "Masking").
	vals := hostPaths(w.WorkRoot)
	secrets := map[string]string{}
	if w.Secrets != nil {
		var err error
		if secrets, err = w.Secrets(ctx, run); err != nil {
			w.Log.Error("read run secrets", "run_id", run.ID, "error", err)
			logw.Printf("could not read the project's secrets")
			return failed(runs.ReasonInfra, nil)
		}
		for _, v := range secrets {
			vals = append(vals, v)
		}
	}
	logw.Mask(vals)
	if run.FromFork {
		logw.Printf("this run's code comes from a fork: the project's secrets are withheld")
	}

	// runCtx is canceled with a cause: ErrCanceled (a person asked),
	// errRunnerStopping (shutdown) or the loss of this runner.
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	go w.watch(runCtx, run, stop)

	ws, cleanup, err := sandbox.NewWorkspace(w.WorkRoot)
	if err != nil {
		logw.Printf("could not prepare a workspace: %v", err)
		return failed(runs.ReasonSandbox, nil)
	}
	*removeWorkspace = func() {
		if err := cleanup(); err != nil {
			w.Log.Error("workspace cleanup failed", "run_id", run.ID, "error", err)
		}
	}

	token, err := w.Projects.ProviderToken(proj)
	if err != nil {
		logw.Printf("could not decrypt the project's provider token")
		return failed(runs.ReasonInfra, nil)
	}
	// The checkout's narration is held until the pipeline file is read: a
	// refused file's line comes first in the log (docs/pipelines.md).
	held := &heldLog{}
	sha := ""
	if run.CommitSHA != nil {
		sha = *run.CommitSHA
		held.Printf("checking out %s at %s", run.Branch, sha)
	} else {
		held.Printf("checking out the head of %s", run.Branch)
	}
	got, err := w.Git.Checkout(runCtx, proj.RepoURL, run.Branch, sha, token, ws, held)
	if err != nil {
		_, _ = logw.Write(held.Bytes())
		if r, ok := w.stopped(runCtx, logw); ok {
			return r
		}
		logw.Printf("checkout failed: %v", err)
		return failed(runs.ReasonCheckout, nil)
	}
	// The commit's changed files, for `when: path`: asked of git only when
	// a condition needs them (docs/pipelines.md).
	changed := func() ([]string, bool) {
		files, ok, err := w.Git.ChangedFiles(runCtx, proj.RepoURL, token, ws, got)
		if err != nil {
			w.Log.Warn("changed files", "run_id", run.ID, "error", err)
		}
		if !ok {
			held.Printf("the commit's changed files are unknown: every when: path condition holds")
		}
		return files, ok
	}
	plan, file, perr := w.loadPlan(ws, run, proj.RunCommand, changed)
	if perr != nil {
		fmt.Fprintf(logw, "%s\n", perr)
		_, _ = logw.Write(held.Bytes())
		if err := w.Logs.SetPipeline(context.WithoutCancel(ctx), run, file, perr.Error()); err != nil {
			w.Log.Error("store pipeline error", "run_id", run.ID, "error", err)
		}
		logw.Printf("the pipeline file was refused: no step ran")
		// Started first, so that a manual run records the commit whose
		// file was refused (a re-run reads the same file).
		if _, err := w.start(ctx, run.ID, backfill(run, got)); err != nil {
			w.Log.Warn("start a refused run", "run_id", run.ID, "error", err)
		}
		return failed(runs.ReasonPipeline, nil)
	}
	_, _ = logw.Write(held.Bytes())
	if file != "" {
		logw.Printf("pipeline: %s, %d step(s)", file, len(plan.Steps))
		if err := w.Logs.SetPipeline(context.WithoutCancel(ctx), run, file, ""); err != nil {
			w.Log.Error("store pipeline file", "run_id", run.ID, "error", err)
		}
	}
	// A manual run's commit is backfilled by Queue.StartChecked, in the
	// transaction that starts it.
	backfill := ""
	if run.CommitSHA == nil {
		backfill = got
		run.CommitSHA = &got
	}

	limits := w.Limits
	if limits == (sandbox.Limits{}) {
		limits = sandbox.DefaultLimits()
	}
	// The spec's variables are a copy: the network's and the cache's join
	// them, and a pipeline step gets the secrets only by from_secret.
	spec := sandbox.Spec{Workspace: ws, Command: proj.RunCommand, Limits: limits, Env: maps.Clone(secrets)}
	afterRun := func() {} // what ends with the sandbox's processes
	if run.Trigger == runs.TriggerRepair {
		if w.Repair == nil {
			logw.Printf("this anvil cannot run repairs (no repair handler)")
			return failed(runs.ReasonInfra, nil)
		}
		plan, err := w.Repair.Prepare(runCtx, run, proj, ws)
		if err != nil {
			logw.Printf("could not prepare the repair: %v", err)
			return failed(runs.ReasonInfra, nil)
		}
		// Repair runs get the secrets too; the repair's own variables win.
		for k, v := range plan.Env {
			secrets[k] = v
		}
		spec.Command, spec.Env, spec.ExtraReadOnly = plan.Command, secrets, plan.ExtraReadOnly
	}

	if list := proj.NetworkFor(run.Trigger == runs.TriggerRepair); len(list) > 0 {
		stopNetwork, err := w.startNetwork(ctx, run, ws, list, &spec, logw)
		if err != nil {
			logw.Printf("could not start the run's network: %v", err)
			return failed(runs.ReasonSandbox, nil)
		}
		defer stopNetwork()
		afterRun = stopNetwork
	}

	if w.Caches != nil {
		releaseCache, err := w.startCache(ctx, run, proj, ws, &spec, logw)
		if err != nil {
			logw.Printf("could not prepare the project's cache: %v", err)
			return failed(runs.ReasonSandbox, nil)
		}
		defer releaseCache()
		stopNetwork := afterRun
		afterRun = func() { stopNetwork(); releaseCache() }
	}

	repair := run.Trigger == runs.TriggerRepair
	projectImage := ""
	if file == "" {
		// The project's image is that of a run without a pipeline file;
		// a file's steps name their own.
		projectImage = proj.ImageFor(repair)
	}
	releaseImage, err := w.startImage(runCtx, run, projectImage, proj.ImagePullSecret, secrets, proj.NetworkFor(repair), &spec, logw)
	if err != nil {
		if r, ok := w.stopped(runCtx, logw); ok {
			return r
		}
		logw.Printf("%v", err)
		return failed(runs.ReasonSandbox, nil)
	}
	defer releaseImage()

	state, err := w.start(ctx, run.ID, backfill)
	if err != nil {
		logw.Printf("could not start: %v", err)
		return failed(runs.ReasonInfra, nil)
	}
	if state == runs.StateCancelRequested {
		stop(sandbox.ErrCanceled)
		if r, ok := w.stopped(runCtx, logw); ok {
			return r
		}
	}
	if !w.Executor.Sandboxed() {
		logw.Printf("WARNING: this run executes WITHOUT a sandbox (ANVIL_SANDBOX=process): no isolation from the host")
	}
	if file == "" {
		// The implicit step runs the command as before: the repair's own.
		plan.Steps[0].Step.Commands[0] = spec.Command
	}
	infra := map[string]string{}
	for k, v := range spec.Env {
		if _, secret := secrets[k]; !secret || run.Trigger == runs.TriggerRepair {
			infra[k] = v
		}
	}
	pr := &pipelineRun{w: w, run: run, plan: plan, implicit: file == "", base: spec, infra: infra, secrets: secrets,
		logw: logw, arts: newArtifactBudget(w.ArtifactsMaxBytes), timeout: proj.RunTimeout()}
	var ri *runImages
	if w.ImageStore != nil && w.LaunchStep == nil {
		ri = &runImages{w: w, run: run, list: proj.NetworkFor(repair), secrets: secrets, logw: logw, plan: plan, ws: ws, base: spec}
		defer ri.close()
		pr.launcher = ri.launch
	}

	execCtx, cancelTimeout := context.WithTimeoutCause(runCtx, proj.RunTimeout(), sandbox.ErrTimeout)
	defer cancelTimeout()
	rep := pr.execute(runCtx, execCtx)
	if ri != nil {
		ri.close() // the services end with the workflow's steps
	}
	afterRun()
	// A repair's Finish looks at what its command left, whatever its exit
	// code; a repair stopped, timed out or failed by the sandbox ends here.
	if run.Trigger != runs.TriggerRepair || !pr.ran || pr.sandboxErr ||
		(rep.State != runs.StatePassed && rep.FailureReason != runs.ReasonExitCode) {
		return rep
	}
	res := pr.last
	rep, err = w.Repair.Finish(ctx, run, proj, ws, res, logw)
	if err != nil {
		logw.Printf("repair: %v", err)
		return failed(runs.ReasonInfra, &res.ExitCode)
	}
	return rep
}

// backfill is the commit to record on a manual run (none on a pinned one).
func backfill(r *runs.Run, got string) string {
	if r.CommitSHA == nil {
		return got
	}
	return ""
}

// start records that the command runs, with the checked-out commit of a
// manual run (backfill; "" for a pinned run).
func (w *ExecuteRunWorker) start(ctx context.Context, runID uuid.UUID, backfill string) (string, error) {
	if backfill != "" {
		state, err := w.Queue.StartChecked(ctx, runID, w.Executor.Sandboxed(), backfill)
		if !errors.Is(err, domain.ErrInvalid) {
			return state, err
		}
		w.Log.Warn("backfill commit", "run_id", runID, "error", err)
	}
	return w.Queue.Start(ctx, runID, w.Executor.Sandboxed())
}

// stopped turns a canceled run context into its report.
func (w *ExecuteRunWorker) stopped(runCtx context.Context, logw *runs.LogWriter) (runs.TerminalReport, bool) {
	switch cause := context.Cause(runCtx); {
	case errors.Is(cause, sandbox.ErrCanceled):
		logw.Printf("canceled")
		return runs.TerminalReport{State: runs.StateCanceled}, true
	case cause != nil:
		logw.Printf("stopped: this runner is shutting down")
		return failed(runs.ReasonRunnerLost, nil), true
	}
	return runs.TerminalReport{}, false
}

// watch heartbeats and learns of cancel requests within milliseconds
// through live events (and at the latest at the next heartbeat).
func (w *ExecuteRunWorker) watch(ctx context.Context, run *runs.Run, stop context.CancelCauseFunc) {
	sub, leave := w.Hub.Subscribe(func(ev domain.LiveEvent) bool {
		return ev.Kind == "resync" || (ev.Kind == "run" && ev.RunID == run.ID)
	})
	defer leave()
	t := time.NewTicker(w.Heartbeat)
	defer t.Stop()
	check := func(beat bool) bool {
		var state string
		var err error
		if beat {
			state, err = w.Queue.Heartbeat(context.WithoutCancel(ctx), run.ID)
		} else {
			var r *runs.Run
			r, err = w.Queue.RunByID(context.WithoutCancel(ctx), run.ID)
			if err == nil {
				state = r.State
			}
		}
		if err != nil {
			return true
		}
		switch {
		case state == runs.StateCancelRequested:
			if err := w.Queue.Canceling(context.WithoutCancel(ctx), run.ID); err != nil {
				w.Log.Warn("canceling", "run_id", run.ID, "error", err)
			}
			stop(sandbox.ErrCanceled)
			return false
		case state == runs.StateCanceling:
			stop(sandbox.ErrCanceled)
			return false
		case runs.IsTerminal(state):
			// Declared lost by the watchdog: stop the work; the report will be refused.
			stop(fmt.Errorf("run %s was terminalized elsewhere (%s)", run.ID, state))
			return false
		}
		return true
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !check(true) {
				return
			}
		case ev := <-sub.C:
			if ev.Status == runs.StatusCancelRequested || ev.Kind == "resync" {
				if !check(false) {
					return
				}
			}
		}
	}
}

func failed(reason string, code *int) runs.TerminalReport {
	return runs.TerminalReport{State: runs.StateFailed, FailureReason: reason, ExitCode: code}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// hostPaths are the worker's folders as a log could name them: the work
// directory that holds every process's workspaces and the caches, as
// configured and with its links resolved.
func hostPaths(workRoot string) []string {
	if workRoot == "" {
		return nil
	}
	dir := filepath.Dir(workRoot)
	out := []string{dir}
	if real, err := filepath.EvalSymlinks(dir); err == nil && real != dir {
		out = append(out, real)
	}
	return out
}

// ProcessWorkRoot returns this process's own workspace folder under root
// and removes the folders of processes of this host that no longer exist
// (a worker killed with SIGKILL leaves its workspace behind; its sandbox
// died with it). A folder of this very host and pid is an earlier
// process's — a container restarted gives its worker the same pid —, and
// what its runs left in it is swept too: workspaces, the copies of a
// cache given to forks' runs, the proxies' sockets (its mirrors and the
// bridge stay, they are no run's).
func ProcessWorkRoot(root string) (string, error) {
	host, _ := os.Hostname()
	if host == "" {
		host = "local"
	}
	if err := os.MkdirAll(root, 0o711); err != nil {
		return "", err
	}
	entries, _ := os.ReadDir(root)
	prefix := host + "-"
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, prefix) {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimPrefix(name, prefix))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = removeTree(filepath.Join(root, name))
		}
	}
	dir := filepath.Join(root, prefix+strconv.Itoa(os.Getpid()))
	if own, err := os.ReadDir(dir); err == nil {
		for _, e := range own {
			if n := e.Name(); strings.HasPrefix(n, "ws-") {
				_ = removeTree(filepath.Join(dir, n))
			}
		}
	}
	return dir, os.MkdirAll(dir, 0o711)
}

// removeTree removes dir whatever modes a run left in it, never following
// a symbolic link out of it.
func removeTree(dir string) error { return sandbox.RemoveAll(dir) }

// ExecutorID names this process for claimed runs.
func ExecutorID() string {
	host, _ := os.Hostname()
	return host + ":" + strconv.Itoa(os.Getpid()) + ":" + uuid.NewString()[:8]
}
