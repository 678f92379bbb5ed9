package domain

import (
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// The arguments of every River job (XArgs with Kind and InsertOpts): they
// live in the base so that any capability package may insert a job in its
// transaction, and jobs/ may work it, without importing each other
// (docs/architecture.md, "Job flows").

// WebhookRetentionArgs is the periodic job that deletes ledger rows older
// than run.DeliveryRetention (72 h, docs/contracts/webhooks.md, "The ledger").
type WebhookRetentionArgs struct{}

// Kind implements river.JobArgs.
func (WebhookRetentionArgs) Kind() string { return "webhook_retention" }

// InsertOpts keeps one sweep waiting at a time: sweeps are idempotent, so a
// second one queued behind the first would only repeat it.
func (WebhookRetentionArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 5, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
		rivertype.JobStateRetryable, rivertype.JobStateScheduled,
	}}}
}

// RefreshCardArgs replaces a project's production card from the incident
// store (docs/architecture.md, "Incidents and cards"). Not unique by River: card_changes.queued keeps one job
// per project responsible at a time (a burst of changes is one refresh),
// and a unique job that already existed when a change enqueued could start
// before that change committed and never read it (see card.EnqueueRefresh).
type RefreshCardArgs struct {
	ProjectID uuid.UUID `json:"project_id"`
}

// Kind implements river.JobArgs.
func (RefreshCardArgs) Kind() string { return "refresh_card" }

// InsertOpts retries a refresh the database refused.
func (RefreshCardArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 10} }

// ExecuteRunArgs is the job that executes a promoted run. It is inserted in
// the same transaction that promotes the run to executable.
type ExecuteRunArgs struct {
	RunID uuid.UUID `json:"run_id"`
}

// Kind implements river.JobArgs.
func (ExecuteRunArgs) Kind() string { return "execute_run" }

// RunsQueue is the River queue of run executions, apart from short jobs so
// that long runs never starve reconciliation or the watchdog.
const RunsQueue = "runs"

// InsertOpts puts executions on their own queue. A retry after a crash is
// harmless: the claim refuses a run that is no longer executable.
func (ExecuteRunArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: RunsQueue, MaxAttempts: 3}
}

// ReconcileRunArgs brings one run's run_index row up to date. Unique per run
// and sync target while waiting or running, so bursts of changes coalesce;
// the target keeps a terminal update from being swallowed by a metadata
// update that is already running (River keeps running jobs unique too).
type ReconcileRunArgs struct {
	RunID  uuid.UUID `json:"run_id" river:"unique"`
	Target string    `json:"target" river:"unique"`
}

// Kind implements river.JobArgs.
func (ReconcileRunArgs) Kind() string { return "reconcile_run" }

// InsertOpts makes the job unique per run among jobs not yet finished.
func (ReconcileRunArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 25, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
		rivertype.JobStateRetryable, rivertype.JobStateScheduled,
	}}}
}

// WatchdogArgs is the periodic job that sweeps runs whose read model fell
// behind. Lost runners are not its business: River runs periodic jobs on
// its elected leader only, and a leader that dies takes about 15 s to be
// replaced — so every worker process sweeps for lost runners on its own
// ticker instead (jobs.LostRunnerSweeper, Queue.RecoverLostRunners).
type WatchdogArgs struct{}

// Kind implements river.JobArgs.
func (WatchdogArgs) Kind() string { return "run_watchdog" }

// RefreshCardAgainArgs is the follow-up refresh of a project's card that
// earlier versions inserted while a refresh ran. Nothing inserts it any
// more (a refresh now repeats until it has read every change, see
// Cards.Refresh); its worker stays for the jobs still queued at an upgrade.
type RefreshCardAgainArgs struct {
	ProjectID uuid.UUID `json:"project_id" river:"unique"`
}

// Kind implements river.JobArgs.
func (RefreshCardAgainArgs) Kind() string { return "refresh_card_again" }

// InsertOpts makes the follow-up unique per project.
func (RefreshCardAgainArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 10, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
		rivertype.JobStateRetryable, rivertype.JobStateScheduled,
	}}}
}

// CardSweepArgs is the periodic job that catches card refreshes lost
// between an ingest's commit and its refresh enqueue (a crash there).
type CardSweepArgs struct{}

// Kind implements river.JobArgs.
func (CardSweepArgs) Kind() string { return "card_sweep" }

// ReportStatusArgs posts a run's latest state to its forge as a commit
// status (domain/forgestatus, jobs.ReportStatusWorker). It is inserted in
// the transaction that changes the run, so no change goes unreported.
//
// Unique per run and public status while waiting or running: a burst of
// changes to one status coalesces, while a change to a new status always
// gets a job even when the previous one is still posting (River keeps
// running jobs unique too). Which one posts what is decided by the worker,
// which always posts the run's state as it is then.
type ReportStatusArgs struct {
	RunID  uuid.UUID `json:"run_id" river:"unique"`
	Status string    `json:"status" river:"unique"`
}

// Kind implements river.JobArgs.
func (ReportStatusArgs) Kind() string { return "report_status" }

// InsertOpts retries a forge that is down for about a day with River's
// back-off; rate limits snooze rather than count as attempts.
func (ReportStatusArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 12, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
		rivertype.JobStateRetryable, rivertype.JobStateScheduled,
	}}}
}

// DispatchRepairArgs asks for a repair run of an incident the `auto` policy
// queued. The ingest inserts it in its own transaction; the ingest takes no
// project lock (its senders must not wait for each other), so accepting the
// run into the project's queue — which needs that lock — happens here, in
// the worker, under the lock, in the order project → incident that every
// decision uses.
type DispatchRepairArgs struct {
	IncidentID uuid.UUID `json:"incident_id" river:"unique"`
}

// Kind implements river.JobArgs.
func (DispatchRepairArgs) Kind() string { return "dispatch_repair" }

// InsertOpts makes a dispatch unique per incident while it waits.
func (DispatchRepairArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 10, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// PurgeSessionsArgs is the periodic job that deletes expired sessions.
type PurgeSessionsArgs struct{}

// Kind implements river.JobArgs.
func (PurgeSessionsArgs) Kind() string { return "purge_sessions" }

// FixCheckArgs is the periodic check of the fix chain (docs/releases.md):
// shipped fixes, events judged against them, windows that ended.
type FixCheckArgs struct{}

// Kind implements river.JobArgs.
func (FixCheckArgs) Kind() string { return "fix_check" }

// InsertOpts keeps one check waiting at a time.
func (FixCheckArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 3, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateRetryable, rivertype.JobStateScheduled,
	}}}
}

// CheckAncestryArgs answers a project's open ancestry questions in its
// repository's mirror (docs/releases.md, "Shipped"); unique per project
// while one waits.
type CheckAncestryArgs struct {
	ProjectID uuid.UUID `json:"project_id"`
}

// Kind implements river.JobArgs.
func (CheckAncestryArgs) Kind() string { return "check_ancestry" }

// InsertOpts keeps one job per project waiting or running (a question
// asked meanwhile is answered by the job the next fix check asks for).
func (CheckAncestryArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 5, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateRetryable, rivertype.JobStateScheduled,
	}}}
}

// ReprocessEventsArgs maps an incident's latest events again through the
// source maps uploaded since they arrived (docs/sourcemap.md,
// "Re-processing").
type ReprocessEventsArgs struct {
	IncidentID uuid.UUID `json:"incident_id"`
}

// Kind implements river.JobArgs.
func (ReprocessEventsArgs) Kind() string { return "reprocess_events" }

// InsertOpts keeps one re-process of an incident waiting at a time.
func (ReprocessEventsArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 3, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
		rivertype.JobStateRetryable, rivertype.JobStateScheduled,
	}}}
}

// FoldDeltasArgs is the periodic fold of incident deltas (docs/feed.md,
// "The write path and its costs"): the process that appended deltas folds
// them within feed.FoldGap; this job folds what a process that died first
// left behind. Unique while waiting or running within one period: one fold
// at a time is all there is to do.
type FoldDeltasArgs struct{}

// FoldDeltasEvery is how often the periodic fold runs: the bound on how
// late a crash can make an incident's count.
const FoldDeltasEvery = 15 * time.Second

// Kind implements river.JobArgs.
func (FoldDeltasArgs) Kind() string { return "fold_incident_deltas" }

// InsertOpts makes the fold unique while it waits or runs, per period. Not
// beyond its period: a worker killed during a fold leaves its job looking
// running until River rescues it (an hour), and a uniqueness across
// periods skipped every periodic fold meanwhile — the deltas a crashed web
// process left waited that hour (docs/feed.md, "The write path and its
// costs"). Two folds at once are harmless: they take turns on one lock.
func (FoldDeltasArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByPeriod: FoldDeltasEvery, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
		rivertype.JobStateRetryable, rivertype.JobStateScheduled,
	}}}
}
