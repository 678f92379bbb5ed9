package monitor

import (
	"testing"
	"time"
)

// TestScheduleNext holds the expected runs of crontab and interval
// schedules across DST changes in Europe/Berlin and America/New_York,
// month ends and leap days (docs/monitors.md, "Schedules").
func TestScheduleNext(t *testing.T) {
	t.Parallel()
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		name  string
		sched Schedule
		tz    string
		from  string
		want  []string // the next runs, in UTC
	}{
		{"berlin 02:00 before spring forward (CET, +1)", Schedule{Type: TypeCrontab, Value: "0 2 * * *"}, "Europe/Berlin", "2026-03-27T12:00:00Z",
			[]string{"2026-03-28T01:00:00Z", "2026-03-30T00:00:00Z", "2026-03-31T00:00:00Z"}}, // 29 Mar 02:00 does not exist there: not expected
		{"berlin 03:00 across spring forward", Schedule{Type: TypeCrontab, Value: "0 3 * * *"}, "Europe/Berlin", "2026-03-28T00:00:00Z",
			[]string{"2026-03-28T02:00:00Z", "2026-03-29T01:00:00Z", "2026-03-30T01:00:00Z"}},
		{"berlin 02:30 across fall back runs once", Schedule{Type: TypeCrontab, Value: "30 2 * * *"}, "Europe/Berlin", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z", "2026-10-27T01:30:00Z"}},
		{"new york 01:30 across fall back runs once", Schedule{Type: TypeCrontab, Value: "30 1 * * *"}, "America/New_York", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"new york 02:30 skipped at spring forward", Schedule{Type: TypeCrontab, Value: "30 2 * * *"}, "America/New_York", "2026-03-07T12:00:00Z",
			[]string{"2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"}},
		{"new york hourly across fall back: 01:00 once", Schedule{Type: TypeCrontab, Value: "0 * * * *"}, "America/New_York", "2026-11-01T04:30:00Z",
			[]string{"2026-11-01T05:00:00Z", "2026-11-01T07:00:00Z", "2026-11-01T08:00:00Z"}},
		{"the 31st skips short months", Schedule{Type: TypeCrontab, Value: "0 0 31 * *"}, "UTC", "2026-04-01T00:00:00Z",
			[]string{"2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z", "2026-08-31T00:00:00Z"}},
		{"29 February waits for a leap year", Schedule{Type: TypeCrontab, Value: "0 12 29 2 *"}, "Europe/Berlin", "2026-01-01T00:00:00Z",
			[]string{"2028-02-29T11:00:00Z", "2032-02-29T11:00:00Z"}},
		{"last day of February in a leap year (L is not crontab: 28,29)", Schedule{Type: TypeCrontab, Value: "0 0 28,29 2 *"}, "UTC", "2028-02-28T00:00:00Z",
			[]string{"2028-02-29T00:00:00Z", "2029-02-28T00:00:00Z"}},
		{"@daily descriptor in New York", Schedule{Type: TypeCrontab, Value: "@daily"}, "America/New_York", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"}},
		{"interval of a day keeps the wall clock across spring forward", Schedule{Type: TypeInterval, Value: "1", Unit: "day"}, "Europe/Berlin", "2026-03-28T09:00:00Z",
			[]string{"2026-03-29T08:00:00Z", "2026-03-30T08:00:00Z"}}, // 10:00 CET, then 10:00 CEST
		{"interval of an hour is 60 minutes across fall back", Schedule{Type: TypeInterval, Value: "1", Unit: "hour"}, "America/New_York", "2026-11-01T05:00:00Z",
			[]string{"2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z"}},
		{"monthly from 31 January ends on February's last day (leap year)", Schedule{Type: TypeInterval, Value: "1", Unit: "month"}, "UTC", "2028-01-31T10:00:00Z",
			[]string{"2028-02-29T10:00:00Z", "2028-03-29T10:00:00Z"}},
		{"monthly from 31 January, common year", Schedule{Type: TypeInterval, Value: "1", Unit: "month"}, "UTC", "2027-01-31T10:00:00Z",
			[]string{"2027-02-28T10:00:00Z"}},
		{"yearly from 29 February", Schedule{Type: TypeInterval, Value: "1", Unit: "year"}, "UTC", "2028-02-29T00:00:00Z",
			[]string{"2029-02-28T00:00:00Z"}},
		{"every 10 minutes", Schedule{Type: TypeInterval, Value: "10", Unit: "minute"}, "UTC", "2026-12-31T23:55:00Z",
			[]string{"2027-01-01T00:05:00Z", "2027-01-01T00:15:00Z"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The remembered plan (parsed, then from the cache) answers as
			// a fresh parse does, in every case.
			first, err := parsePlan(tc.sched, tc.tz)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := parsePlan(tc.sched, tc.tz)
			if again != first {
				t.Fatal("the second parse was not remembered")
			}
			fresh, err := parseFresh(tc.sched, tc.tz)
			if err != nil {
				t.Fatal(err)
			}
			for name, p := range map[string]*plan{"remembered": again, "fresh": fresh} {
				at := utc(tc.from)
				for i, w := range tc.want {
					at = p.next(at)
					if !at.Equal(utc(w)) {
						t.Fatalf("%s plan, run %d: %s, want %s", name, i+1, at.Format(time.RFC3339), w)
					}
				}
			}
		})
	}
}

// TestScheduleRefusals: every bad schedule or timezone names its field.
func TestScheduleRefusals(t *testing.T) {
	t.Parallel()
	cases := []struct {
		sched Schedule
		tz    string
		field string
	}{
		{Schedule{Type: TypeCrontab, Value: "0 2 * *"}, "UTC", "schedule.value"},
		{Schedule{Type: TypeCrontab, Value: "61 2 * * *"}, "UTC", "schedule.value"},
		{Schedule{Type: TypeCrontab, Value: "0 0 30 2 *"}, "UTC", "schedule.value"},
		{Schedule{Type: TypeCrontab, Value: "CRON_TZ=UTC 0 2 * * *"}, "UTC", "schedule.value"},
		{Schedule{Type: TypeCrontab, Value: "@every 5m"}, "UTC", "schedule.value"},
		{Schedule{Type: TypeCrontab, Value: "0 2 * * *"}, "Mars/Olympus", "timezone"},
		{Schedule{Type: TypeInterval, Value: "0", Unit: "minute"}, "UTC", "schedule.value"},
		{Schedule{Type: TypeInterval, Value: "5", Unit: "fortnight"}, "UTC", "schedule.unit"},
		{Schedule{Type: "weekly", Value: "1"}, "UTC", "schedule.type"},
	}
	for _, tc := range cases {
		for range 2 { // a refusal is not remembered as a plan
			_, err := parsePlan(tc.sched, tc.tz)
			if err == nil || !hasField(err, tc.field) {
				t.Errorf("%+v in %s: %v, want a refusal of %s", tc.sched, tc.tz, err, tc.field)
			}
		}
	}
}
