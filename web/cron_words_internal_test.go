package web

import "testing"

// The common crontab shapes read in words; every other one says nothing,
// so the page shows the crontab as written.
func TestCronWords(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string]string{
		"0 2 * * *":    "daily at 02:00",
		"30 14 * * *":  "daily at 14:30",
		"15 * * * *":   "hourly at :15",
		"*/5 * * * *":  "every 5 minutes",
		"*/1 * * * *":  "every minute",
		"* * * * *":    "every minute",
		"30 6 * * 1":   "Mondays at 06:30",
		"0 0 * * 7":    "Sundays at 00:00",
		"0 4 1 * *":    "monthly on day 1 at 04:00",
		"0 2 * * 1-5":  "",
		"0 2,14 * * *": "",
		"0 2 * 6 *":    "",
		"*/0 * * * *":  "",
		"99 2 * * *":   "",
		"0 24 * * *":   "",
		"0 2 * *":      "",
		"@daily":       "",
		"":             "",
		"-1 2 * * *":   "",
		"0 2 32 * *":   "",
		"000 2 * * *":  "",
	} {
		if got := cronWords(expr); got != want {
			t.Errorf("cronWords(%q) = %q, want %q", expr, got, want)
		}
	}
}
