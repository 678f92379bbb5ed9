package monitor

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // a monitor's timezone must load on a machine without /usr/share/zoneinfo

	"github.com/robfig/cron/v3"

	"anvil/domain"
	"anvil/domain/internal/ttlcache"
)

// Schedule is a monitor's schedule in the shape of Sentry's monitor_config
// (docs/monitors.md, "Schedules"): {type: "crontab", value: "0 2 * * *"} or
// {type: "interval", value: 1, unit: "hour"}.
type Schedule struct {
	Type  string `json:"type"`
	Value string `json:"value"`
	Unit  string `json:"unit,omitempty"`
}

// Schedule types and interval units, as Sentry names them.
const (
	TypeCrontab  = "crontab"
	TypeInterval = "interval"
)

var units = map[string]bool{"minute": true, "hour": true, "day": true, "week": true, "month": true, "year": true}

// maxInterval bounds an interval's count: a year of minutes.
const maxInterval = 525600

// plan is a parsed schedule: next expected run after a time.
type plan struct {
	cron   cron.Schedule
	loc    *time.Location
	n      int
	unit   string
	isCron bool
}

// planKey is what a plan is a function of.
type planKey struct {
	s  Schedule
	tz string
}

// plans remembers the plans parsed: every check-in plans its monitor's
// next run, and loading a zone (tzdata) and parsing a crontab line cost
// more than the rest of the check-in's Go. A plan never changes, so its
// entries do not expire. The cache is bounded in bytes by construction:
// at most maxPlans entries, each a key of at most maxScheduleBytes +
// maxTimezoneBytes of text (parsePlan refuses longer ones before looking)
// and a plan of fixed size (a crontab's bit sets, a *time.Location that
// tzdata shares) — about 2 MB at most.
var plans = ttlcache.New[planKey, *plan](0, maxPlans)

// maxPlans is how many parsed plans are remembered.
const maxPlans = 4096

// parsePlan checks a schedule and its timezone and returns its plan; every
// refusal names its field ("schedule.value", "schedule.unit", "timezone").
// It is parseFresh remembered (TestScheduleNext holds the two alike).
func parsePlan(s Schedule, tz string) (*plan, error) {
	if len(s.Type)+len(s.Value)+len(s.Unit) > maxScheduleBytes || len(tz) > maxTimezoneBytes {
		return nil, domain.Invalid("invalid_schedule", "a schedule is at most %d bytes and a timezone %d", maxScheduleBytes, maxTimezoneBytes)
	}
	k := planKey{s, tz}
	if p, ok := plans.Get(k, time.Time{}); ok {
		return p, nil
	}
	p, err := parseFresh(s, tz)
	if err == nil {
		plans.Put(k, p, time.Time{})
	}
	return p, err
}

// parseFresh is parsePlan without the memory.
func parseFresh(s Schedule, tz string) (*plan, error) {
	var fe domain.FieldErrors
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || strings.ContainsAny(tz, " \t\n") || tz == "Local" {
		fe.Add("timezone", "invalid_timezone", "%q is not an IANA time zone (e.g. Europe/Berlin, America/New_York, UTC)", domain.ClipString(tz, 64))
		loc = time.UTC
	}
	p := &plan{loc: loc}
	switch s.Type {
	case TypeCrontab:
		p.isCron = true
		v := strings.TrimSpace(s.Value)
		switch {
		case v == "":
			fe.Add("schedule.value", "invalid_schedule", "is empty: give a crontab line such as \"0 2 * * *\"")
		case strings.Contains(v, "TZ="):
			fe.Add("schedule.value", "invalid_schedule", "must not carry a time zone; set timezone instead")
		case strings.HasPrefix(v, "@every"):
			fe.Add("schedule.value", "invalid_schedule", "@every is an interval: use type \"interval\"")
		case s.Unit != "":
			fe.Add("schedule.unit", "invalid_schedule", "is only for interval schedules")
		default:
			// robfig/cron's standard parser: five fields or a descriptor
			// (@daily, @hourly …), CRON_TZ for the zone (docs/monitors.md).
			sch, err := cron.ParseStandard("CRON_TZ=" + loc.String() + " " + v)
			if err != nil {
				fe.Add("schedule.value", "invalid_schedule", "is not a crontab line: %s", strings.TrimPrefix(err.Error(), "failed to parse "))
			} else if sch.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
				fe.Add("schedule.value", "invalid_schedule", "never fires (no such date)")
			} else {
				p.cron = sch
			}
		}
	case TypeInterval:
		n, err := strconv.Atoi(strings.TrimSpace(s.Value))
		switch {
		case err != nil || n < 1 || n > maxInterval:
			fe.Add("schedule.value", "invalid_schedule", "must be a whole number between 1 and %d for an interval", maxInterval)
		case !units[s.Unit]:
			fe.Add("schedule.unit", "invalid_schedule", "must be one of minute, hour, day, week, month, year")
		}
		p.n, p.unit = n, s.Unit
	default:
		fe.Add("schedule.type", "invalid_schedule", "must be \"crontab\" or \"interval\"")
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	return p, nil
}

// next is the first run expected after t. A crontab expects its times in its
// timezone; an interval expects one interval after t (the last check-in, or
// the last run expected), as Sentry does.
func (p *plan) next(t time.Time) time.Time {
	if !p.isCron {
		switch p.unit {
		case "minute":
			return t.Add(time.Duration(p.n) * time.Minute)
		case "hour":
			return t.Add(time.Duration(p.n) * time.Hour)
		case "day":
			return t.In(p.loc).AddDate(0, 0, p.n).UTC()
		case "week":
			return t.In(p.loc).AddDate(0, 0, 7*p.n).UTC()
		case "month":
			return addMonths(t.In(p.loc), p.n).UTC()
		default: // year
			return addMonths(t.In(p.loc), 12*p.n).UTC()
		}
	}
	n := p.cron.Next(t)
	// When the clock falls back, a wall time happens twice; a crontab runs
	// it once (cron daemons do not repeat the hour), so the second instant is
	// not expected. robfig/cron would expect both.
	if repeatedWallTime(n, p.loc) {
		n = p.cron.Next(n)
	}
	return n.UTC()
}

// repeatedWallTime reports whether t's wall clock in loc already happened
// earlier the same night (the second pass through a fall-back hour).
func repeatedWallTime(t time.Time, loc *time.Location) bool {
	lt := t.In(loc)
	_, off := lt.Zone()
	_, before := t.Add(-3 * time.Hour).In(loc).Zone()
	if before <= off {
		return false
	}
	earlier := t.Add(-time.Duration(before-off) * time.Second).In(loc)
	return earlier.Hour() == lt.Hour() && earlier.Minute() == lt.Minute() && earlier.Day() == lt.Day()
}

// addMonths adds n months, ending on the month's last day when the day does
// not exist (Jan 31 + 1 month = Feb 28 or 29), as people mean "monthly".
func addMonths(t time.Time, n int) time.Time {
	y, m, d := t.Date()
	first := time.Date(y, m+time.Month(n), 1, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), t.Location())
	last := first.AddDate(0, 1, -1).Day()
	if d > last {
		d = last
	}
	return time.Date(first.Year(), first.Month(), d, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), t.Location())
}

// describe is the schedule in words, for the cockpit and titles.
func (s Schedule) describe() string {
	if s.Type == TypeInterval {
		if s.Value == "1" {
			return "every " + s.Unit
		}
		return "every " + s.Value + " " + s.Unit + "s"
	}
	return s.Value
}

// String implements fmt.Stringer.
func (s Schedule) String() string { return fmt.Sprintf("%s %s", s.Type, s.describe()) }

// MarshalJSON writes the schedule as Sentry's monitor_config does: an
// interval's value is a number, a crontab's a string.
func (s Schedule) MarshalJSON() ([]byte, error) {
	type wire struct {
		Type  string `json:"type"`
		Value any    `json:"value"`
		Unit  string `json:"unit,omitempty"`
	}
	w := wire{Type: s.Type, Value: s.Value, Unit: s.Unit}
	if n, err := strconv.Atoi(s.Value); err == nil && s.Type == TypeInterval {
		w.Value = n
	}
	return json.Marshal(w)
}
