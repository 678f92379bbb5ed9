package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/monitor"
	"anvil/views"
)

// monitorRow is a monitor as the cockpit shows it (docs/monitors.md,
// "The cockpit"): its strip oldest first, its next run in UTC (the page
// turns it into the viewer's time) and in its own timezone.
func monitorRow(m *monitor.Monitor) views.MonitorRow {
	row := views.MonitorRow{Slug: m.Slug, Schedule: scheduleWords(m.Schedule), Timezone: m.Timezone, Environment: m.Environment,
		Paused: m.Paused, PingKey: m.PingKey}
	for i := len(m.Runs) - 1; i >= 0; i-- {
		r := m.Runs[i]
		label := r.Status + " at " + r.StartedAt.Format("2006-01-02 15:04 UTC")
		if r.DurationMS != nil {
			label += ", " + durationWords(*r.DurationMS)
		}
		row.Ticks = append(row.Ticks, views.MonitorTick{Status: r.Status, Label: label})
	}
	if len(m.Runs) > 0 {
		row.LastStatus = m.Runs[0].Status
	}
	if m.LastDurationMS != nil {
		row.LastDuration = durationWords(*m.LastDurationMS)
	}
	if m.NextExpectedAt != nil {
		row.NextUTC = m.NextExpectedAt.Format(time.RFC3339)
		loc, err := time.LoadLocation(m.Timezone)
		if err != nil {
			loc = time.UTC
		}
		row.NextInZone = m.NextExpectedAt.In(loc).Format("15:04 Mon 2 Jan") + " (" + m.Timezone + ")"
	}
	return row
}

func scheduleWords(s monitor.Schedule) string {
	if s.Type == monitor.TypeInterval {
		if s.Value == "1" {
			return "every " + s.Unit
		}
		return "every " + s.Value + " " + s.Unit + "s"
	}
	return s.Value
}

// cronWords says the common crontab shapes in words ("daily at 02:00",
// "hourly at :15", "every 5 minutes", "Mondays at 06:30", "monthly on the
// 1st at 04:00"), "" for the others, which stay as the crontab reads.
func cronWords(expr string) string {
	f := strings.Fields(expr)
	if len(f) != 5 {
		return ""
	}
	num := func(s string, hi int) (int, bool) {
		n, err := strconv.Atoi(s)
		return n, err == nil && n >= 0 && n <= hi && len(s) <= 2
	}
	minute, okM := num(f[0], 59)
	hour, okH := num(f[1], 23)
	at := fmt.Sprintf("%02d:%02d", hour, minute)
	switch {
	case strings.HasPrefix(f[0], "*/") && f[1] == "*" && f[2] == "*" && f[3] == "*" && f[4] == "*":
		if n, ok := num(f[0][2:], 59); ok && n > 0 {
			if n == 1 {
				return "every minute"
			}
			return "every " + strconv.Itoa(n) + " minutes"
		}
	case f[0] == "*" && f[1] == "*" && f[2] == "*" && f[3] == "*" && f[4] == "*":
		return "every minute"
	case okM && f[1] == "*" && f[2] == "*" && f[3] == "*" && f[4] == "*":
		return fmt.Sprintf("hourly at :%02d", minute)
	case okM && okH && f[2] == "*" && f[3] == "*" && f[4] == "*":
		return "daily at " + at
	case okM && okH && f[2] == "*" && f[3] == "*":
		if d, ok := num(f[4], 7); ok {
			return time.Weekday(d%7).String() + "s at " + at
		}
	case okM && okH && f[3] == "*" && f[4] == "*":
		if d, ok := num(f[2], 31); ok && d > 0 {
			return "monthly on day " + strconv.Itoa(d) + " at " + at
		}
	}
	return ""
}

func durationWords(ms int64) string {
	return views.Duration(time.Duration(ms) * time.Millisecond)
}

func (s *Server) monitorsProps(c echo.Context, p *domain.Project) (views.MonitorsProps, error) {
	pr := principal(c)
	ms, err := s.Monitors.List(c.Request().Context(), pr, p.ID, monitorRuns)
	if err != nil {
		return views.MonitorsProps{}, err
	}
	props := views.MonitorsProps{Page: s.page(c, "Monitors · "+p.Name, "projects"), ProjectID: p.ID.String(), ProjectSlug: p.Slug,
		ProjectName: p.Name, CSRF: s.csrfToken(pr), CanAdmin: pr.AtLeast(domain.RoleAdmin)}
	for _, m := range ms {
		props.Monitors = append(props.Monitors, monitorRow(m))
	}
	return props, nil
}

// monitorsPage is a project's Monitors page; ?fragment=1 is its live part,
// which the page fetches again on every "monitor" live event.
func (s *Server) monitorsPage(c echo.Context) error {
	p, err := s.projectParam(c)
	if err != nil {
		return err
	}
	props, err := s.monitorsProps(c, p)
	if err != nil {
		return err
	}
	if c.QueryParam("fragment") != "" {
		return Render(c, http.StatusOK, views.MonitorsBody(props))
	}
	var rev monitorReveal
	if _, err := s.takeReveal(c, revealSlot("monitor-created", p.ID.String()), &rev); err != nil {
		return err
	}
	props.NewPingURL, props.NewSlug = rev.PingURL, rev.Slug
	return Render(c, http.StatusOK, views.MonitorsPage(props))
}

// monitorCreateSubmit creates a monitor from the form and shows its ping
// URL once, on the page itself (never in a redirect's address).
func (s *Server) monitorCreateSubmit(c echo.Context) error {
	p, err := s.projectParam(c)
	if err != nil {
		return err
	}
	in, cerr := monitorFormInput(c)
	in.Slug = formStr(c, "slug")
	var m *monitor.Monitor
	if cerr == nil {
		m, cerr = s.Monitors.Create(c.Request().Context(), principal(c), p.ID, in)
	}
	var de *domain.Error
	if cerr != nil && errors.As(cerr, &de) && (errors.Is(de.Kind, domain.ErrInvalid) || errors.Is(de.Kind, domain.ErrConflict)) {
		props, err := s.monitorsProps(c, p)
		if err != nil {
			return err
		}
		props.Error = de.Message
		props.Form = views.MonitorForm{Slug: c.FormValue("slug"), ScheduleType: c.FormValue("schedule_type"), ScheduleValue: c.FormValue("schedule_value"),
			ScheduleUnit: c.FormValue("schedule_unit"), Timezone: c.FormValue("timezone"), Environment: c.FormValue("environment"),
			CheckinMargin: c.FormValue("checkin_margin"), MaxRuntime: c.FormValue("max_runtime"),
			FailureThreshold: c.FormValue("failure_threshold"), RecoveryThreshold: c.FormValue("recovery_threshold")}
		return Render(c, statusOf(de.Kind), views.MonitorsPage(props))
	}
	if cerr != nil {
		return cerr
	}
	// The page the redirect leads to shows the ping URL once; a reload
	// neither shows it again nor creates the monitor twice (a 409).
	if err := s.stashReveal(c, revealSlot("monitor-created", p.ID.String()), monitorReveal{PingURL: m.PingURL, Slug: m.Slug}); err != nil {
		return err
	}
	return redirect(c, "/projects/"+p.Slug+"/monitors")
}

// formStr is a form field, nil when blank.
func formStr(c echo.Context, name string) *string {
	if v := strings.TrimSpace(c.FormValue(name)); v != "" {
		return &v
	}
	return nil
}

// monitorFormInput reads the settings of the create and edit forms.
func monitorFormInput(c echo.Context) (monitor.Input, error) {
	in := monitor.Input{}
	var fe domain.FieldErrors
	num := func(name string) *int {
		v := formStr(c, name)
		if v == nil {
			return nil
		}
		n, err := strconv.Atoi(*v)
		if err != nil {
			fe.Add(name, "invalid_"+name, "must be a whole number")
			return nil
		}
		return &n
	}
	in.Timezone, in.Environment = formStr(c, "timezone"), formStr(c, "environment")
	in.Schedule = &monitor.Schedule{Type: c.FormValue("schedule_type"), Value: strings.TrimSpace(c.FormValue("schedule_value")), Unit: c.FormValue("schedule_unit")}
	in.CheckinMargin, in.MaxRuntime, in.FailureThreshold, in.RecoveryThreshold = num("checkin_margin"), num("max_runtime"), num("failure_threshold"), num("recovery_threshold")
	return in, fe.Err()
}

// monitorEditSubmit changes a monitor's settings from its page. The ping
// URL stays; the settings' origin becomes the cockpit, so check-ins'
// monitor_config no longer change them (docs/monitors.md, "What a
// check-in may change"). A refusal shows the page again with the fields
// as typed.
func (s *Server) monitorEditSubmit(c echo.Context) error {
	p, err := s.projectParam(c)
	if err != nil {
		return err
	}
	in, cerr := monitorFormInput(c)
	in.Origin = monitor.OriginCockpit
	if cerr == nil {
		_, cerr = s.Monitors.Update(c.Request().Context(), principal(c), p.ID, c.Param("slug"), in)
	}
	var de *domain.Error
	if cerr != nil && errors.As(cerr, &de) && errors.Is(de.Kind, domain.ErrInvalid) {
		props, err := s.monitorProps(c, p)
		if err != nil {
			return err
		}
		props.Error = de.Message
		props.Edit = views.MonitorForm{ScheduleType: c.FormValue("schedule_type"), ScheduleValue: c.FormValue("schedule_value"),
			ScheduleUnit: c.FormValue("schedule_unit"), Timezone: c.FormValue("timezone"), Environment: c.FormValue("environment"),
			CheckinMargin: c.FormValue("checkin_margin"), MaxRuntime: c.FormValue("max_runtime"),
			FailureThreshold: c.FormValue("failure_threshold"), RecoveryThreshold: c.FormValue("recovery_threshold")}
		return Render(c, statusOf(de.Kind), views.MonitorPage(props))
	}
	if cerr != nil {
		return cerr
	}
	return redirect(c, "/projects/"+p.Slug+"/monitors/"+c.Param("slug"))
}

// monitorReveal is a new ping URL kept for the page that shows it once.
type monitorReveal struct {
	PingURL string `json:"ping_url"`
	Slug    string `json:"slug"`
}

func (s *Server) monitorProps(c echo.Context, p *domain.Project) (views.MonitorProps, error) {
	pr := principal(c)
	ctx := c.Request().Context()
	m, err := s.Monitors.Get(ctx, pr, p.ID, c.Param("slug"))
	if err != nil {
		return views.MonitorProps{}, err
	}
	runs, err := s.Monitors.Runs(ctx, m.ID, 60)
	if err != nil {
		return views.MonitorProps{}, err
	}
	strip := *m
	if len(runs) > monitorRuns {
		strip.Runs = runs[:monitorRuns]
	} else {
		strip.Runs = runs
	}
	props := views.MonitorProps{Page: s.page(c, m.Slug+" · Monitors · "+p.Name, "projects"), ProjectID: p.ID.String(), ProjectSlug: p.Slug,
		ProjectName: p.Name, CSRF: s.csrfToken(pr), CanAdmin: monitor.CanEditSettings(pr), CanPause: monitor.CanPause(pr), Monitor: monitorRow(&strip),
		Edit: views.MonitorForm{ScheduleType: m.Schedule.Type, ScheduleValue: m.Schedule.Value, ScheduleUnit: m.Schedule.Unit, Timezone: m.Timezone,
			Environment: m.Environment, CheckinMargin: strconv.Itoa(m.CheckinMargin), MaxRuntime: strconv.Itoa(m.MaxRuntime),
			FailureThreshold: strconv.Itoa(m.FailureThreshold), RecoveryThreshold: strconv.Itoa(m.RecoveryThreshold)},
		PingBase: s.opts.PublicURL + "/api/monitors/"}
	props.Bars, props.MaxLabel = durationBars(runs)
	for _, r := range runs {
		row := views.MonitorRunRow{Status: r.Status, Environment: r.Environment, Started: r.StartedAt.Format("2006-01-02 15:04:05"), Source: r.Source, Output: r.Output}
		if r.DurationMS != nil {
			row.Duration = durationWords(*r.DurationMS)
		}
		if r.ExitCode != nil {
			row.ExitCode = strconv.Itoa(*r.ExitCode)
		}
		props.Runs = append(props.Runs, row)
	}
	return props, nil
}

// durationBars lays the runs (newest first) out as the bars of a 600×160
// SVG, oldest on the left; a run without a duration (missed, in progress)
// is a short bar in its colour.
func durationBars(runs []monitor.Run) ([]views.ChartBar, string) {
	const w, h, base = 600.0, 140.0, 150.0
	var maxMS int64 = 1000
	for _, r := range runs {
		if r.DurationMS != nil && *r.DurationMS > maxMS {
			maxMS = *r.DurationMS
		}
	}
	n := len(runs)
	if n == 0 {
		return nil, durationWords(maxMS)
	}
	slot := w / float64(max(n, 30))
	bars := make([]views.ChartBar, 0, n)
	for i := n - 1; i >= 0; i-- {
		r := runs[i]
		height := 4.0
		label := r.Status + " at " + r.StartedAt.Format("2006-01-02 15:04 UTC")
		if r.DurationMS != nil {
			height = max(2, h*float64(*r.DurationMS)/float64(maxMS))
			label += ", " + durationWords(*r.DurationMS)
		}
		x := float64(n-1-i) * slot
		bars = append(bars, views.ChartBar{X: x + 1, Y: base - height, W: max(1, slot-2), H: height, Status: r.Status, Label: label})
	}
	return bars, durationWords(maxMS)
}

// monitorPage is one monitor's page; ?fragment=1 is its live part.
func (s *Server) monitorPage(c echo.Context) error {
	p, err := s.projectParam(c)
	if err != nil {
		return err
	}
	props, err := s.monitorProps(c, p)
	if err != nil {
		return err
	}
	if c.QueryParam("fragment") != "" {
		return Render(c, http.StatusOK, views.MonitorBody(props))
	}
	var rev monitorReveal
	if _, err := s.takeReveal(c, revealSlot("monitor-rotated", p.ID.String(), c.Param("slug")), &rev); err != nil {
		return err
	}
	props.NewPingURL = rev.PingURL
	return Render(c, http.StatusOK, views.MonitorPage(props))
}

// monitorPauseSubmit pauses (or resumes) a monitor: paused, no run is
// expected and none is missed.
func (s *Server) monitorPauseSubmit(c echo.Context) error {
	p, err := s.projectParam(c)
	if err != nil {
		return err
	}
	paused := c.FormValue("paused") != "false"
	if _, err := s.Monitors.Update(c.Request().Context(), principal(c), p.ID, c.Param("slug"), monitor.Input{Paused: &paused}); err != nil {
		return err
	}
	return redirect(c, "/projects/"+p.Slug+"/monitors/"+c.Param("slug"))
}

// monitorRotateSubmit makes a new ping key and shows its URL once.
func (s *Server) monitorRotateSubmit(c echo.Context) error {
	p, err := s.projectParam(c)
	if err != nil {
		return err
	}
	m, err := s.Monitors.RotatePingKey(c.Request().Context(), principal(c), p.ID, c.Param("slug"))
	if err != nil {
		return err
	}
	if err := s.stashReveal(c, revealSlot("monitor-rotated", p.ID.String(), m.Slug), monitorReveal{PingURL: m.PingURL, Slug: m.Slug}); err != nil {
		return err
	}
	return redirect(c, "/projects/"+p.Slug+"/monitors/"+m.Slug)
}

func (s *Server) monitorDeleteSubmit(c echo.Context) error {
	p, err := s.projectParam(c)
	if err != nil {
		return err
	}
	if err := s.Monitors.Delete(c.Request().Context(), principal(c), p.ID, c.Param("slug")); err != nil {
		return err
	}
	return redirect(c, "/projects/"+p.Slug+"/monitors")
}
