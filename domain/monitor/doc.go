// Package monitor is anvil's cron monitors (docs/monitors.md): a
// monitor per project and slug with a crontab-with-timezone or interval
// schedule, its runs as check-ins — from the Sentry SDKs' envelope item
// check_in or from a Healthchecks.io-style ping URL —, the periodic sweep
// that finds missed and timed-out runs exactly once across any number of
// worker processes, and the incidents a failing monitor opens and a
// recovered one closes, through domain/incident's doors.
//
// Settings change in the project's transaction (Store.WithProject). A
// check-in locks its monitor's row, then the state row of its environment,
// so a monitor's check-ins are serial while a project's monitors check in
// side by side; the sweep takes the project's lock, then the states still
// due FOR UPDATE — re-read under the lock, so a missed run is recorded once
// however many sweeps race (docs/monitors.md, "Missed and timed-out runs").
package monitor
