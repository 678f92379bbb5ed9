package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"anvil/domain/monitor"
)

// MonitorSweepWorker finds cron monitors' missed and timed-out runs
// (docs/monitors.md, "Missed and timed-out runs").
type MonitorSweepWorker struct {
	river.WorkerDefaults[monitor.SweepArgs]
	monitors *monitor.Service
	log      *slog.Logger
}

// Timeout bounds one pass; the next one goes on where it stopped.
func (w *MonitorSweepWorker) Timeout(*river.Job[monitor.SweepArgs]) time.Duration { return time.Minute }

// Work runs one pass.
func (w *MonitorSweepWorker) Work(ctx context.Context, _ *river.Job[monitor.SweepArgs]) error {
	rep, err := w.monitors.Sweep(ctx)
	if rep.Missed+rep.TimedOut > 0 && w.log != nil {
		w.log.Info("monitor sweep", "missed", rep.Missed, "timed_out", rep.TimedOut, "projects", rep.Projects)
	}
	return err
}

// NewMonitorSweepWorker is the sweep's worker on m (for processes and tests
// that register workers one by one).
func NewMonitorSweepWorker(m *monitor.Service, log *slog.Logger) *MonitorSweepWorker {
	return &MonitorSweepWorker{monitors: m, log: log}
}
