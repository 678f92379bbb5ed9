package web

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/retention"
	"anvil/views"
)

// retentionProps reads the organisation's policy and every project's
// storage, last clean-up, overrides and policy in force.
func (s *Server) retentionProps(c echo.Context) (views.RetentionProps, error) {
	p := principal(c)
	ctx := c.Request().Context()
	org, err := s.retention.OrgPolicy(ctx, p)
	if err != nil {
		return views.RetentionProps{}, err
	}
	stats, orgLast, err := s.retention.Stats(ctx, p)
	if err != nil {
		return views.RetentionProps{}, err
	}
	props := views.RetentionProps{Page: s.page(c, "Retention", "retention"), CanManage: p.AtLeast(domain.RoleAdmin),
		Org: retentionForm(org.Document), MaxEvents: org.MaxEvents}
	if orgLast != nil {
		props.OrgLastCleanup = cleanupLine(*orgLast, true)
	}
	maps, err := s.SourceMaps.Usage(ctx, p.OrgID)
	if err != nil {
		return views.RetentionProps{}, err
	}
	for _, st := range stats {
		row := views.RetentionProjectRow{ID: st.ProjectID.String(), Name: st.Name, Events: st.Events, SourceMapBytes: humanBytes(maps[st.ProjectID]),
			OldestEvent: when(st.OldestEvent), LogBytes: humanBytes(st.LogBytes), OldestLog: when(st.OldestLog),
			LastCleanup: "none yet", Policy: policyLine(st.Policy), Overrides: retentionForm(st.Overrides)}
		if st.LastCleanup != nil {
			row.LastCleanup = cleanupLine(*st.LastCleanup, false)
		}
		props.Projects = append(props.Projects, row)
	}
	return props, nil
}

func (s *Server) retentionPage(c echo.Context) error {
	props, err := s.retentionProps(c)
	if err != nil {
		return err
	}
	return Render(c, http.StatusOK, views.Retention(props))
}

func (s *Server) retentionSubmit(c echo.Context) error {
	in, err := retentionFromForm(c)
	if err == nil {
		_, err = s.retention.PutOrgPolicy(c.Request().Context(), principal(c), in)
	}
	return s.retentionAnswer(c, err, "")
}

func (s *Server) retentionProjectSubmit(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	in, err := retentionFromForm(c)
	if err == nil {
		_, err = s.retention.PutProjectPolicy(c.Request().Context(), principal(c), id, in)
	}
	return s.retentionAnswer(c, err, id.String())
}

// retentionAnswer redirects after a save, or shows the page again with the
// refusal beside the form that caused it (and the values as typed).
func (s *Server) retentionAnswer(c echo.Context, err error, projectID string) error {
	de, err := refusal(err)
	if err != nil {
		return err
	}
	if de == nil {
		return redirect(c, "/settings/retention")
	}
	props, err := s.retentionProps(c)
	if err != nil {
		return err
	}
	props.Error, props.ErrorProject = de.Message, projectID
	// The domain names a field as the JSON does; the form's first and last
	// are events_per_incident's.
	props.FieldErrors = map[string]string{}
	for _, f := range de.Fields {
		name := strings.TrimPrefix(f.Field, "events_per_incident.")
		if _, dup := props.FieldErrors[name]; !dup {
			props.FieldErrors[name] = f.Problem
		}
	}
	typed := views.RetentionForm{Events: c.FormValue("events"), Logs: c.FormValue("logs"), LogRuns: c.FormValue("log_runs"),
		Incidents: c.FormValue("incidents"), Audit: c.FormValue("audit"), First: c.FormValue("first"), Last: c.FormValue("last"),
		Budget: c.FormValue("daily_event_budget")}
	if projectID == "" {
		props.Org = typed
	}
	for i := range props.Projects {
		if props.Projects[i].ID == projectID {
			props.Projects[i].Overrides = typed
		}
	}
	return Render(c, statusOf(de.Kind), views.Retention(props))
}

// retentionFromForm reads a policy form: an empty field is null.
func retentionFromForm(c echo.Context) (retention.Document, error) {
	var d retention.Document
	str := func(name string) *string {
		if v := strings.TrimSpace(c.FormValue(name)); v != "" {
			return &v
		}
		return nil
	}
	var bad error
	num := func(name string) *int64 {
		v := strings.TrimSpace(c.FormValue(name))
		if v == "" {
			return nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil && bad == nil {
			bad = domain.Invalid("invalid_count", "%s must be a whole number", strings.ReplaceAll(name, "_", " "))
		}
		return &n
	}
	small := func(name string) *int {
		if n := num(name); n != nil {
			v := int(min(max(*n, -1), 1<<31-1))
			return &v
		}
		return nil
	}
	d.Events, d.Logs, d.Incidents, d.Audit = str("events"), str("logs"), str("incidents"), str("audit")
	d.LogRuns = small("log_runs")
	if first, last := small("first"), small("last"); first != nil || last != nil {
		d.EventsPerIncident = &retention.Samples{First: first, Last: last}
	}
	d.DailyEventBudget = num("daily_event_budget")
	return d, bad
}

// retentionForm is a document as form values.
func retentionForm(d retention.Document) views.RetentionForm {
	s := func(v *string) string {
		if v == nil {
			return ""
		}
		return *v
	}
	n := func(v *int) string {
		if v == nil {
			return ""
		}
		return strconv.Itoa(*v)
	}
	f := views.RetentionForm{Events: s(d.Events), Logs: s(d.Logs), LogRuns: n(d.LogRuns), Incidents: s(d.Incidents), Audit: s(d.Audit)}
	if d.EventsPerIncident != nil {
		f.First, f.Last = n(d.EventsPerIncident.First), n(d.EventsPerIncident.Last)
	}
	if d.DailyEventBudget != nil {
		f.Budget = strconv.FormatInt(*d.DailyEventBudget, 10)
	}
	return f
}

func policyLine(p retention.Policy) string {
	budget := "no daily budget"
	if p.DailyEventBudget > 0 {
		budget = fmt.Sprintf("at most %d events a day", p.DailyEventBudget)
	}
	return fmt.Sprintf("events %s (first %d and last %d per incident in full), logs %s or the last %d runs, closed incidents %s, %s",
		retention.FormatDuration(p.Events), p.First, p.Last, retention.FormatDuration(p.Logs), p.LogRuns,
		retention.FormatDuration(p.Incidents), budget)
}

func cleanupLine(l retention.LastCleanup, audit bool) string {
	at := l.StartedAt.UTC().Format("2006-01-02 15:04 UTC")
	state := "finished"
	if l.FinishedAt == nil {
		state = "unfinished (the next one goes on)"
	}
	if audit {
		return fmt.Sprintf("%s, %s: %d audit entries removed", at, state, l.Audit)
	}
	return fmt.Sprintf("%s, %s: %d events past their age, %d sampled away, %d incidents, %d log chunks (%s) removed",
		at, state, l.Events, l.Sampled, l.Incidents, l.LogChunks, humanBytes(l.LogBytes))
}

func when(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
