// Package jobs holds anvil's River workers and periodic jobs. A worker only
// unpacks its arguments and calls the domain; the job argument types live in
// domain next to the code that enqueues them.
package jobs

import (
	"log/slog"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"anvil/domain"
	"anvil/domain/erasure"
	"anvil/domain/forgestatus"
	"anvil/domain/monitor"
	"anvil/domain/retention"
	"anvil/domain/runcache"
	"anvil/domain/runsecret"
	"anvil/domain/wiring"
	"anvil/jobs/sandbox"
)

// Deps are what the workers need: the domain's services, the sandbox
// executor and this process's workspace folder.
type Deps struct {
	*wiring.Services
	Executor sandbox.Executor
	// Git checks repositories out under the checkout policy (required).
	Git      *sandbox.Git
	Limits   sandbox.Limits // of every run's command (zero: sandbox.DefaultLimits)
	WorkRoot string
	// Caches keeps the projects' caches between runs (docs/caches.md); nil:
	// runs get none.
	Caches *sandbox.Caches
	// ImageStore runs commands in container images (docs/images.md);
	// nil: a run with an image fails.
	ImageStore *Images
	Log        *slog.Logger
	// ParallelSteps and ArtifactsMaxBytes bound a run's pipeline
	// (ANVIL_RUN_PARALLEL_STEPS, ANVIL_ARTIFACTS_MAX_MB; zero: the
	// defaults). Images and LaunchStep: see ExecuteRunWorker.
	ParallelSteps     int
	ArtifactsMaxBytes int64
	Images            bool
	LaunchStep        StepLauncher
	// Reporter posts commit statuses (default: one built on Services with
	// no public URL, so links are relative).
	Reporter *forgestatus.Reporter
}

// Register adds every worker to the bundle; repair runs are handled by
// NewRepair over the same services.
func Register(w *river.Workers, d Deps) {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Reporter == nil {
		d.Reporter = forgestatus.NewReporter(d.Store, d.Projects, "")
	}
	river.AddWorker(w, &ReportStatusWorker{reporter: d.Reporter})
	river.AddWorker(w, &PurgeSessionsWorker{accounts: d.Accounts, log: d.Log})
	river.AddWorker(w, &ReconcileRunWorker{queue: d.Queue})
	river.AddWorker(w, &RunWatchdogWorker{queue: d.Queue, log: d.Log})
	river.AddWorker(w, &WebhookRetentionWorker{webhooks: d.Webhooks, log: d.Log})
	river.AddWorker(w, &RetentionCleanupWorker{retention: d.Services.Retention, log: d.Log})
	river.AddWorker(w, &RefreshCardWorker{cards: d.Cards})
	river.AddWorker(w, &RefreshCardAgainWorker{cards: d.Cards})
	river.AddWorker(w, &DispatchRepairWorker{incidents: d.Incidents})
	river.AddWorker(w, &CardSweepWorker{cards: d.Cards, log: d.Log})
	prune := gonePruner(d.Store, d.WorkRoot, d.Caches, d.Log)
	river.AddWorker(w, &EraseProjectWorker{erasure: d.Erasure, log: d.Log, prune: prune})
	river.AddWorker(w, &EraseOrganizationWorker{erasure: d.Erasure, log: d.Log, prune: prune})
	river.AddWorker(w, &ClearRunCacheWorker{caches: d.Caches})
	river.AddWorker(w, &EraseSweepWorker{erasure: d.Erasure, log: d.Log})
	river.AddWorker(w, &DeliverAlertWorker{alerts: d.Alerts})
	river.AddWorker(w, &ReprocessEventsWorker{feed: d.Feed})
	river.AddWorker(w, &FoldDeltasWorker{feed: d.Feed, log: d.Log})
	river.AddWorker(w, &FixCheckWorker{fixes: d.Fixes, log: d.Log})
	river.AddWorker(w, &CheckAncestryWorker{fixes: d.Fixes, git: d.Git, workRoot: d.WorkRoot})
	river.AddWorker(w, &AlertDigestWorker{alerts: d.Alerts})
	river.AddWorker(w, &MailInvitationWorker{accounts: d.Accounts})
	river.AddWorker(w, NewMonitorSweepWorker(d.Monitors, d.Log))
	river.AddWorker(w, &ExecuteRunWorker{Queue: d.Queue, Projects: d.Projects, Logs: d.Logs, Hub: d.Hub,
		Executor: d.Executor, Git: d.Git, Limits: d.Limits, WorkRoot: d.WorkRoot, Repair: NewRepair(d.Incidents, d.Projects, d.Git.Policy), Log: d.Log,
		Heartbeat: heartbeatInterval(d.Queue.HeartbeatTimeout()), ID: ExecutorID(),
		Secrets: runsecret.New(d.Store).ForRun, Network: d.Network, Bridge: installBridge(d),
		Caches: d.Caches, CacheState: runcache.New(d.Store, cacheMax(d.Caches)),
		ParallelSteps: d.ParallelSteps, ArtifactsMaxBytes: d.ArtifactsMaxBytes, ImageStore: d.ImageStore, Images: d.Images, LaunchStep: d.LaunchStep})
}

func cacheMax(c *sandbox.Caches) int64 {
	if c == nil {
		return 0
	}
	return c.MaxBytes
}

// installBridge returns what puts the network bridge where bwrap
// sandboxes can run it, once, at the first run with a network list (a
// worker whose projects list nothing never copies it); "" for the process
// executor, which needs none.
func installBridge(d Deps) func() (string, error) {
	return sync.OnceValues(func() (string, error) {
		if d.Executor == nil || !d.Executor.Sandboxed() {
			return "", nil
		}
		return sandbox.InstallBridge(d.WorkRoot)
	})
}

// Periodic returns the periodic jobs; River runs them on the elected leader.
func Periodic(heartbeatTimeout time.Duration) []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
			func() (river.JobArgs, *river.InsertOpts) { return domain.PurgeSessionsArgs{}, nil },
			&river.PeriodicJobOpts{ID: "purge_sessions", RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(domain.FoldDeltasEvery),
			func() (river.JobArgs, *river.InsertOpts) { return domain.FoldDeltasArgs{}, nil },
			&river.PeriodicJobOpts{ID: "fold_incident_deltas", RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(cardSweepEvery),
			func() (river.JobArgs, *river.InsertOpts) { return domain.CardSweepArgs{}, nil },
			&river.PeriodicJobOpts{ID: "card_sweep"}),
		river.NewPeriodicJob(river.PeriodicInterval(watchdogInterval(heartbeatTimeout)),
			func() (river.JobArgs, *river.InsertOpts) { return domain.WatchdogArgs{}, nil },
			&river.PeriodicJobOpts{ID: "run_watchdog", RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
			func() (river.JobArgs, *river.InsertOpts) { return domain.WebhookRetentionArgs{}, nil },
			&river.PeriodicJobOpts{ID: "webhook_retention", RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(RetentionCleanupEvery),
			func() (river.JobArgs, *river.InsertOpts) { return retention.CleanupArgs{}, nil },
			&river.PeriodicJobOpts{ID: "retention_cleanup", RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(eraseSweepEvery),
			func() (river.JobArgs, *river.InsertOpts) { return erasure.SweepArgs{}, nil },
			&river.PeriodicJobOpts{ID: "erase_sweep", RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(monitor.SweepEvery),
			func() (river.JobArgs, *river.InsertOpts) { return monitor.SweepArgs{}, nil },
			&river.PeriodicJobOpts{ID: "monitor_sweep", RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(FixCheckEvery),
			func() (river.JobArgs, *river.InsertOpts) { return domain.FixCheckArgs{}, nil },
			&river.PeriodicJobOpts{ID: "fix_check", RunOnStart: true}),
	}
}

// heartbeatInterval beats several times per watchdog timeout.
func heartbeatInterval(timeout time.Duration) time.Duration {
	iv := timeout / 6
	if iv < 200*time.Millisecond {
		iv = 200 * time.Millisecond
	}
	if iv > 10*time.Second {
		iv = 10 * time.Second
	}
	return iv
}
