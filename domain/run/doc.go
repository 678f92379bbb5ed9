// Package run is the run queue: acceptance (manual, webhook, repair,
// rerun, latest commit) with its group commit, the webhook delivery ledger
// written in that group transaction, the row-locked state machine of a
// run, logs, the run_index read model and its reconciliation, and the
// watchdog (tables project_runs, run_index, run_log_chunks,
// project_webhook_deliveries). It imports the base domain and project.
package run
