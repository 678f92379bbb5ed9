// Package jobs holds anvil's River workers and periodic jobs. A worker only
// unpacks its arguments and calls the domain; the job argument types live in
// domain next to the code that enqueues them.
package jobs

import (
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"anvil/domain"
)

// Deps are what the workers need.
type Deps struct {
	Accounts *domain.Accounts
	Queue    *domain.Queue
	Log      *slog.Logger
}

// Register adds every worker to the bundle.
func Register(w *river.Workers, d Deps) {
	river.AddWorker(w, &PurgeSessionsWorker{accounts: d.Accounts, log: d.Log})
	river.AddWorker(w, &ReconcileRunWorker{queue: d.Queue})
	river.AddWorker(w, &RunWatchdogWorker{queue: d.Queue, log: d.Log})
}

// Periodic returns the periodic jobs; River runs them on the elected leader.
func Periodic(heartbeatTimeout time.Duration) []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
			func() (river.JobArgs, *river.InsertOpts) { return domain.PurgeSessionsArgs{}, nil },
			&river.PeriodicJobOpts{ID: "purge_sessions", RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(watchdogInterval(heartbeatTimeout)),
			func() (river.JobArgs, *river.InsertOpts) { return domain.WatchdogArgs{}, nil },
			&river.PeriodicJobOpts{ID: "run_watchdog", RunOnStart: true}),
	}
}
