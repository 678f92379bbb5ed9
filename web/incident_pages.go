package web

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/event"
	"anvil/domain/incident"
	"anvil/domain/monitor"
	"anvil/domain/run"
	"anvil/domain/sourcemap"
	"anvil/views"
)

func incidentRow(v incident.IncidentView) views.IncidentRow {
	return views.IncidentRow{ID: v.ID.String(), ProjectID: v.ProjectID.String(), ProjectName: v.ProjectName, Title: v.Title,
		ExceptionType: v.ExceptionType, Status: v.Status, Environment: v.Environment, EventCount: v.EventCount,
		FirstSeen: v.FirstSeen, LastSeen: v.LastSeen, Release: v.Release, PRURL: v.PRURL,
		NeedsHumanReason: v.NeedsHumanReason, Decisions: incident.DecisionsOf(v), ShortID: v.ShortID, FixNote: incident.FixNote(v.Fix),
		Level: v.Level, Culprit: v.Culprit}
}

// inboxProps reads one inbox page for the request's filters.
func (s *Server) inboxProps(c echo.Context) (views.InboxProps, error) {
	p := principal(c)
	ctx := c.Request().Context()
	f, err := s.incidentFilter(c)
	if err != nil {
		return views.InboxProps{}, err
	}
	// The inbox opens on what is unresolved; closed and ignored incidents
	// wait behind their own filters, and ?status=ALL shows every one.
	shown := strings.ToUpper(strings.TrimSpace(f.Status))
	if shown == "" {
		f.Status = incident.FilterUnresolved
	}
	pg, err := s.Incidents.List(ctx, p.OrgID, f)
	if err != nil {
		return views.InboxProps{}, err
	}
	statuses := append(append([]string{}, domain.IncidentStatuses...), incident.FilterVerifying)
	props := views.InboxProps{Page: s.page(c, "Inbox", "inbox"), Statuses: statuses, Counts: pg.Counts, Unresolved: pg.Unresolved,
		Environments: pg.Environments, HasMore: pg.HasMore, CanWrite: p.CanWrite(),
		Filter: views.InboxFilter{Status: shown, Environment: strings.ToLower(f.Environment), Page: f.Page,
			Text: strings.TrimSpace(f.Query), Level: strings.ToLower(strings.TrimSpace(f.Level)), Release: strings.TrimSpace(f.Release)}}
	if f.ProjectID != uuid.Nil {
		props.Filter.ProjectID = f.ProjectID.String()
	}
	for _, v := range pg.Incidents {
		props.Rows = append(props.Rows, incidentRow(v))
	}
	if c.QueryParam("fragment") == "" { // the full page's project filter
		ps, err := s.Projects.List(ctx, p.OrgID)
		if err != nil {
			return views.InboxProps{}, err
		}
		for _, pr := range ps {
			props.Projects = append(props.Projects, views.Option{Value: pr.ID.String(), Label: pr.Name})
		}
	}
	return props, nil
}

// inbox: GET /inbox (?project, status, environment, page); ?fragment=body
// answers the live part only.
func (s *Server) inbox(c echo.Context) error {
	props, err := s.inboxProps(c)
	if err != nil {
		return err
	}
	if c.QueryParam("fragment") == "body" {
		return Render(c, http.StatusOK, views.InboxBody(props))
	}
	return Render(c, http.StatusOK, views.Inbox(props))
}

// domainRefusal splits an error into a message to show in place (a
// refusal a person can act on) or an error for the error handler.
func domainRefusal(err error) (string, error) {
	var de *domain.Error
	if errors.As(err, &de) && !errors.Is(de.Kind, domain.ErrNotFound) && !errors.Is(de.Kind, domain.ErrForbidden) {
		return de.Message, nil
	}
	return "", err
}

// incidentDecisionSubmit: POST /incidents/:id/decisions (htmx). From the
// inbox (?from=inbox) it answers the inbox body, else the incident page's
// live part; a refused decision is shown in place (200, so htmx swaps it).
func (s *Server) incidentDecisionSubmit(c echo.Context) error {
	id, err := s.incidentParam(c)
	if err != nil {
		return err
	}
	// The close form's "closed in the current release" (docs/releases.md).
	inRelease := c.FormValue("in_current_release") == "true" || c.FormValue("in_current_release") == "on"
	_, derr := s.Incidents.DecideIn(c.Request().Context(), principal(c), id, c.FormValue("decision"), inRelease)
	msg, err := domainRefusal(derr)
	if err != nil {
		return err
	}
	if !isHTMX(c) {
		if c.QueryParam("from") == "inbox" {
			return redirect(c, "/inbox")
		}
		return redirect(c, "/incidents/"+id.String())
	}
	if c.QueryParam("from") == "inbox" {
		props, err := s.inboxProps(c)
		if err != nil {
			return err
		}
		props.Error = msg
		return Render(c, http.StatusOK, views.InboxBody(props))
	}
	props, err := s.incidentProps(c, id)
	if err != nil {
		return err
	}
	props.Error = msg
	return Render(c, http.StatusOK, views.IncidentLive(props))
}

// inboxBulkSubmit: POST /inbox/bulk (ids=…&decision=ignore|close).
func (s *Server) inboxBulkSubmit(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "could not read the form")
	}
	var ids []uuid.UUID
	for _, v := range form["ids"] {
		id, err := uuid.Parse(v)
		if err != nil {
			return domain.Invalid("invalid_incident_id", "incident ids must be UUIDs")
		}
		ids = append(ids, id)
	}
	res, berr := s.Incidents.DecideMany(c.Request().Context(), principal(c), ids, form.Get("decision"))
	msg, err := domainRefusal(berr)
	if err != nil {
		return err
	}
	if !isHTMX(c) {
		return redirect(c, "/inbox")
	}
	props, err := s.inboxProps(c)
	if err != nil {
		return err
	}
	props.Error = msg
	if len(res.Refused) > 0 {
		props.Error = fmt.Sprintf("%d incidents were left alone: %s", len(res.Refused), res.Refused[0].Message)
	}
	if msg == "" && len(res.Done) > 0 {
		props.Notice = fmt.Sprintf("%d incidents: %s.", len(res.Done), form.Get("decision"))
	}
	return Render(c, http.StatusOK, views.InboxBody(props))
}

// incidentProps reads everything an incident's page shows.
func (s *Server) incidentProps(c echo.Context, id uuid.UUID) (views.IncidentProps, error) {
	p := principal(c)
	ctx := c.Request().Context()
	d, err := s.Incidents.Detail(ctx, p.OrgID, id)
	if err != nil {
		return views.IncidentProps{}, err
	}
	d.Incident.ProjectName = d.ProjectName
	props := views.IncidentProps{Page: s.page(c, d.Incident.Title, "inbox"), Incident: incidentRow(d.Incident),
		Hourly: d.Hourly, CanWrite: p.CanWrite()}
	if props.SampledAway, err = s.retention.SampledAway(ctx, id); err != nil {
		return props, err
	}
	if ev := d.Latest; ev != nil {
		props.Service, props.UserID, props.Breadcrumbs = ev.Service, ev.User.ID, ev.Breadcrumbs
		if ev.Exception != nil {
			props.ExceptionMessage, props.FramesOmitted = ev.Exception.Message, ev.Exception.FramesOmitted
			code, why, raw := "", "", false
			for _, f := range ev.Exception.Stacktrace {
				props.Frames = append(props.Frames, frameRow(f))
				// The note about source maps is for frames that look
				// minified only, never a server's own file with a column
				// (docs/sourcemap.md, "Which frames").
				if !sourcemap.LooksMinified(ev, &f) {
					continue
				}
				if sy := f.Symbolication; sy != nil && sy.Unmapped != "" && code == "" {
					code, why, raw = sy.UnmappedCode, sy.Unmapped, true
				} else if sy == nil {
					raw = true
				}
			}
			if raw {
				if err := s.unmappedNote(c, &props, d.Incident.ProjectID, ev.Release, code, why); err != nil {
					return props, err
				}
			}
		}
		if ev.Request != nil {
			props.RequestMethod, props.RequestURL, props.RequestStatus = ev.Request.Method, ev.Request.URL, ev.Request.StatusCode
		}
		for k, v := range ev.Tags {
			props.Tags = append(props.Tags, views.Option{Value: k, Label: v})
		}
		sort.Slice(props.Tags, func(i, j int) bool { return props.Tags[i].Value < props.Tags[j].Value })
	}
	props.Browsers, props.OperatingSystems = clientRows(d.Browsers), clientRows(d.OperatingSystems)
	for _, e := range d.Events {
		props.Events = append(props.Events, views.EventRow{ID: e.EventID, ReceivedAt: e.ReceivedAt, Release: e.Release, Message: e.Message})
	}
	for _, t := range d.Transitions {
		props.Transitions = append(props.Transitions, views.TransitionRow{From: t.From, To: t.To, ActorKind: t.ActorKind, Actor: t.Actor, Reason: t.Reason, At: t.At})
	}
	props.FixChain = fixChain(d)
	if props.Monitor, err = s.incidentMonitor(c, d.Incident.ProjectID, id); err != nil {
		return views.IncidentProps{}, err
	}
	if r := d.RepairRun; r != nil {
		rr := &views.RepairRow{ID: r.RunID.String(), Status: r.Status}
		chunks, err := s.Logs.Chunks(ctx, r.RunID, 0)
		if err != nil {
			return views.IncidentProps{}, err
		}
		var raw, b strings.Builder
		for _, ch := range chunks {
			raw.WriteString(ch.Body)
			b.WriteString(views.LogHTML(ch.Body, ch.Offset))
			rr.LogSeq = ch.Seq
		}
		rr.Log = b.String()
		if r.FailureReason != nil { // in words, as the run page says it
			if rr.FailureReason, err = s.whyEnded(ctx, p.OrgID, r.RunID, raw.String()); err != nil {
				return views.IncidentProps{}, err
			}
		}
		// A repair whose forge could not open a pull request (none is
		// configured, or it refused) kept its change as a patch: that is
		// a result to apply, not a failure (docs/releases.md, "The cockpit").
		// A repair without a forge passes with its patch ready (the run's
		// outcome); one whose forge refused kept its patch too.
		forgeRefused := r.FailureReason != nil && *r.FailureReason == run.ReasonRepairForge
		if forgeRefused || r.Status == run.StatusPassed {
			patch, err := s.Logs.Patch(ctx, p.OrgID, r.RunID)
			if err != nil {
				return views.IncidentProps{}, err
			}
			if patch != nil && (forgeRefused || patch.Ready) {
				rr.PatchReady = true
				rr.FailureReason = run.PatchReadyWords + " it: the change is kept on the run's page — or set the project's forge so that anvil opens a pull request"
				markPatchReady(props.FixChain)
			}
		}
		props.Repair = rr
	}
	return props, nil
}

// incidentMonitorRuns is how many of its monitor's runs a monitor's
// incident shows.
const incidentMonitorRuns = 10

// incidentMonitor is the monitor whose failures the incident gathers, as
// its page shows it (docs/monitors.md, "Incidents"), or nil.
func (s *Server) incidentMonitor(c echo.Context, projectID, id uuid.UUID) (*views.IncidentMonitor, error) {
	m, err := s.Monitors.OfIncident(c.Request().Context(), principal(c), projectID, id, incidentMonitorRuns)
	if err != nil || m == nil {
		return nil, err
	}
	out := &views.IncidentMonitor{Name: m.Slug, Href: "/projects/" + projectID.String() + "/monitors/" + m.Slug,
		Schedule: scheduleWords(m.Schedule) + " (" + m.Timezone + ")"}
	if m.Schedule.Type == monitor.TypeCrontab {
		if w := cronWords(m.Schedule.Value); w != "" {
			out.Schedule = w + " (" + m.Schedule.Value + ", " + m.Timezone + ")"
		}
	}
	for _, r := range m.Runs {
		row := views.IncidentMonitorRun{Status: r.Status, At: r.StartedAt}
		if r.DurationMS != nil {
			row.Duration = durationWords(*r.DurationMS)
		}
		out.Runs = append(out.Runs, row)
	}
	return out, nil
}

// incidentPage: GET /incidents/:id; ?fragment=live answers the live part,
// ?fragment=chain the fix chain and the history.
func (s *Server) incidentPage(c echo.Context) error {
	id, err := s.incidentParam(c)
	if err != nil {
		return err
	}
	props, err := s.incidentProps(c, id)
	if err != nil {
		return err
	}
	switch c.QueryParam("fragment") {
	case "live":
		return Render(c, http.StatusOK, views.IncidentLive(props))
	case "chain":
		return Render(c, http.StatusOK, views.IncidentChain(props))
	}
	props.Reprocessing = c.QueryParam("reprocess") == "queued"
	if err := s.incidentDiagnosis(c, &props); err != nil {
		return err
	}
	return Render(c, http.StatusOK, views.IncidentPage(props))
}

// unmappedNote says why the latest event's minified frames stayed as they
// came and what to do about it (docs/sourcemap.md, "Re-processing"); once
// the project has source maps, a member may map the latest events again.
func (s *Server) unmappedNote(c echo.Context, props *views.IncidentProps, projectID uuid.UUID, release, code, why string) error {
	p := principal(c)
	bundles, err := s.SourceMaps.Bundles(c.Request().Context(), p.OrgID, projectID)
	if err != nil {
		return err
	}
	upload := "sentry-cli sourcemaps inject dist/ && sentry-cli sourcemaps upload --release " + releaseOr(release) + " dist/"
	switch {
	case len(bundles) == 0 || code == sourcemap.UnmappedNoUploads:
		props.FramesNote = "These frames are minified: no source map has been uploaded to this project yet. Upload the build's maps with " + upload + " (docs/sourcemap.md); events after it are mapped, and this incident's latest events can then be mapped again."
	case code == sourcemap.UnmappedNoRelease:
		props.FramesNote = "These frames are minified: the event names no release and its SDK sent no debug id. Set release in Sentry.init, or run sentry-cli sourcemaps inject before you upload."
	case code == sourcemap.UnmappedNoMap:
		props.FramesNote = "No source map for release " + releaseOr(release) + " matches these frames (" + why + "). Upload with " + upload + "."
	case code == sourcemap.UnmappedRefused:
		props.FramesNote = "The source map was refused: " + why + ". Upload a map of the build as the bundler writes it."
	case code == sourcemap.UnmappedTransient:
		props.FramesNote = "The source maps could not be read when this event arrived (" + why + "). Map the latest events again."
	case code == sourcemap.UnmappedOutside:
		props.FramesNote = "The uploaded map does not cover these positions (" + why + "): it is probably the map of another build of release " + releaseOr(release) + "."
	default:
		props.FramesNote = "Some frames of this event could not be mapped to their source and stay as they came (the reason is beside each)."
	}
	props.CanReprocess = len(bundles) > 0 && p.CanWrite()
	return nil
}

func releaseOr(r string) string {
	if r == "" {
		return "<release>"
	}
	return r
}

// incidentReprocess: POST /incidents/:id/reprocess — map the incident's
// latest events again through the source maps uploaded since.
func (s *Server) incidentReprocess(c echo.Context) error {
	id, err := s.incidentParam(c)
	if err != nil {
		return err
	}
	if err := s.Feed.RequestReprocess(c.Request().Context(), principal(c), id); err != nil {
		return err
	}
	return redirect(c, "/incidents/"+id.String()+"?reprocess=queued")
}

// frameRow is a stored frame as the incident page shows it, with what
// source maps left on it (docs/sourcemap.md).
func frameRow(f event.Frame) views.FrameRow {
	// The column is shown whenever the sender gave one: a minified frame
	// without it points at a whole line of a bundle.
	r := views.FrameRow{File: f.File, Line: f.Line, Column: f.Colno, Function: f.Function, Context: f.ContextCode, InApp: f.InApp}
	sy := f.Symbolication
	if sy == nil {
		return r
	}
	r.Pre, r.Post, r.Mapping, r.Unmapped = sy.PreContext, sy.PostContext, sy.Mapping, sy.Unmapped
	if raw := sy.Raw; raw != nil {
		where := raw.AbsPath
		if where == "" {
			where = raw.File
		}
		r.Raw = fmt.Sprintf("%s at %s:%d:%d", raw.Function, where, raw.Line, raw.Colno)
	}
	return r
}

func clientRows(cs []incident.ClientCount) []views.ClientRow {
	out := make([]views.ClientRow, len(cs))
	for i, c := range cs {
		out[i] = views.ClientRow{Name: c.Name, Version: c.Version, Count: c.Count}
	}
	return out
}

// fixChain is an incident's fix timeline (docs/releases.md, "The
// cockpit"), each step with the evidence its transition recorded.
// markPatchReady says the repair step's result in the chain's words.
func markPatchReady(steps []views.FixStep) {
	for i := range steps {
		if steps[i].Key == "repair" {
			steps[i].Label, steps[i].Bad = "repair run: patch ready", false
		}
	}
}

func fixChain(d *incident.IncidentDetail) []views.FixStep {
	v := d.Incident
	f := v.Fix
	if f == nil && v.RepairRunID == nil {
		return nil
	}
	reason := func(prefix string) string {
		for i := len(d.Transitions) - 1; i >= 0; i-- {
			if strings.HasPrefix(d.Transitions[i].Reason, prefix) {
				return d.Transitions[i].Reason
			}
		}
		return ""
	}
	first := v.FirstSeen
	steps := []views.FixStep{{Key: "error", Label: "error: " + v.Title, At: &first, Done: true}}
	if v.RepairRunID != nil {
		st := views.FixStep{Key: "repair", Label: "repair run", Link: "/runs/" + v.RepairRunID.String(), Done: true}
		if d.RepairRun != nil {
			st.Label = "repair run " + d.RepairRun.Status
		}
		steps = append(steps, st)
	}
	if v.PRURL != "" {
		steps = append(steps, views.FixStep{Key: "pull_request", Label: "pull request opened", Link: v.PRURL, Done: true})
	}
	if f == nil || f.CommitSHA == "" {
		if f != nil && f.ClosedInRelease != "" {
			steps = append(steps, views.FixStep{Key: "closed_in_release", Label: "closed in release " + f.ClosedInRelease, Done: true})
		}
		return steps
	}
	ref := incident.FixRef(f.PRNumber, f.CommitSHA)
	merged := views.FixStep{Key: "merged", Label: "fix merged in " + ref, At: f.MergedAt, Link: f.PRURL, Done: true,
		Evidence: "commit " + f.CommitSHA}
	switch f.Source {
	case "push":
		merged.Label, merged.Evidence = "fix committed in "+ref, reason("fix committed")
	case "manual":
		merged.Label, merged.Evidence = "fix recorded by hand: "+ref, reason("fix recorded by hand")
	}
	steps = append(steps, merged)
	shipped := views.FixStep{Key: "shipped", Label: "waiting for a release that contains " + ref}
	if f.ShippedAt != nil {
		shipped = views.FixStep{Key: "shipped", Label: "shipped in " + f.Release, At: f.ShippedAt, Done: true, Evidence: reason("fix from"),
			Link: "/projects/" + v.ProjectID.String() + "/releases"}
	}
	steps = append(steps, shipped)
	if f.SeenBefore != "" {
		steps = append(steps, views.FixStep{Key: "seen_before", Label: fmt.Sprintf("seen in %s, before the fix (%d events)", f.SeenBefore, f.SeenBeforeEvents),
			Done: true})
	}
	// A recurrence after a verified fix keeps the verified step: the
	// chain is the incident's history, and the proof held until it recurred.
	if f.VerifiedAt != nil {
		steps = append(steps, views.FixStep{Key: "verified", Label: "verified", At: f.VerifiedAt, Done: true, Evidence: reason("fix verified")})
	}
	switch {
	case f.RecurredAt != nil:
		steps = append(steps, views.FixStep{Key: "recurred", Label: "recurred in " + f.RecurredIn, At: f.RecurredAt, Done: true, Bad: true,
			Evidence: reason("recurred in")})
	case f.VerifiedAt != nil:
	case f.ShippedAt != nil:
		st := views.FixStep{Key: "verified", Label: "verifying until " + f.VerifyUntil.UTC().Format("2006-01-02 15:04 UTC")}
		if f.Waiting != "" {
			st.Evidence = f.Waiting
		}
		steps = append(steps, st)
	}
	return steps
}
