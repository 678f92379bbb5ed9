package retention

// CountCheckInSQL counts one cron-monitor check-in in the project's daily
// usage, apart from its events (docs/retention.md, "The daily event
// budget"; docs/monitors.md): the monitor's check-in transaction runs it,
// so a check-in refused or rolled back is never counted. $1 the project,
// $2 the UTC day (YYYY-MM-DD).
const CountCheckInSQL = `INSERT INTO feed_daily_usage AS u (project_id, day, checkins) VALUES ($1, $2::date, 1)
	ON CONFLICT (project_id, day) DO UPDATE SET checkins = u.checkins + 1`
