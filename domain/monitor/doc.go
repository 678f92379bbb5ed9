// Package monitor is anvil's cron monitors (issue 31, docs/monitors.md): a
// monitor per project and slug with a crontab-with-timezone or interval
// schedule, its runs as check-ins — from the Sentry SDKs' envelope item
// check_in or from a Healthchecks.io-style ping URL —, the periodic sweep
// that finds missed and timed-out runs exactly once across any number of
// worker processes, and the incidents a failing monitor opens and a
// recovered one closes, through domain/incident's doors.
//
// Every change of a monitor's state runs in the project's transaction
// (Store.WithProject): the check-ins of one project and the sweep's claims
// serialize on the project row, and the sweep re-reads what is due after
// the lock, so a missed run is recorded once however many sweeps race.
package monitor
