package web

import (
	"net/http"
	"sort"

	"github.com/labstack/echo/v4"

	"anvil/domain/event"
	"anvil/views"
)

// The event view and the incident's diagnosis: every stored
// event opens whole, and the incident page shows how its events spread.

// apiIncidentEvent: GET /api/private/incidents/:incidentId/events/:eventId
// → the event whole (level, tags, breadcrumbs with their times, request,
// user, release, environment, service, SDK, frames).
func (s *Server) apiIncidentEvent(c echo.Context) error {
	id, err := s.incidentParam(c)
	if err != nil {
		return err
	}
	d, err := s.Incidents.Event(c.Request().Context(), principal(c).OrgID, id, c.Param("eventId"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

// apiIncidentEvents: GET /api/private/incidents/:incidentId/events?before=
// → {events, next_before}: every stored event, a page at a time.
func (s *Server) apiIncidentEvents(c echo.Context) error {
	id, err := s.incidentParam(c)
	if err != nil {
		return err
	}
	pg, err := s.Incidents.Events(c.Request().Context(), principal(c).OrgID, id, c.QueryParam("before"))
	if err != nil {
		return err
	}
	var next *string
	if pg.Next != "" {
		next = &pg.Next
	}
	return c.JSON(http.StatusOK, map[string]any{"events": pg.Events, "next_before": next})
}

// apiIncidentSpread: GET /api/private/incidents/:incidentId/spread → the
// level, top tags, releases and users affected, first and last release.
func (s *Server) apiIncidentSpread(c echo.Context) error {
	id, err := s.incidentParam(c)
	if err != nil {
		return err
	}
	sp, err := s.Incidents.Spread(c.Request().Context(), principal(c).OrgID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, sp)
}

// incidentEventPage: GET /incidents/:incidentId/events/:eventId.
func (s *Server) incidentEventPage(c echo.Context) error {
	id, err := s.incidentParam(c)
	if err != nil {
		return err
	}
	ctx, org := c.Request().Context(), principal(c).OrgID
	inc, err := s.Incidents.Get(ctx, org, id)
	if err != nil {
		return err
	}
	d, err := s.Incidents.Event(ctx, org, id, c.Param("eventId"))
	if err != nil {
		return err
	}
	ev := d.Event
	props := views.EventProps{Page: s.page(c, "Event "+ev.EventID, "inbox"), IncidentID: id.String(), IncidentTitle: inc.Title,
		EventID: ev.EventID, Title: ev.Title, Level: ev.Level, Environment: ev.Environment, Service: ev.Service, Release: ev.Release,
		Language: ev.Language, SDKName: ev.SDK.Name, SDKVersion: ev.SDK.Version, Runtime: ev.SDK.Runtime,
		OccurredAt: d.OccurredAt, ReceivedAt: d.ReceivedAt, UserID: ev.User.ID, UserIPHash: ev.User.IPHash,
		BreadcrumbsOmitted: ev.BreadcrumbsOmitted, TagsOmitted: ev.TagsOmitted, Newer: d.Newer, Older: d.Older}
	if ev.Exception != nil {
		props.ExceptionType, props.ExceptionMessage, props.FramesOmitted = ev.Exception.Type, ev.Exception.Message, ev.Exception.FramesOmitted
		props.Frames = frameRows(ev.Exception.Stacktrace)
	}
	if ev.Request != nil {
		props.RequestMethod, props.RequestURL, props.RequestStatus = ev.Request.Method, ev.Request.URL, ev.Request.StatusCode
	}
	for k, v := range ev.Tags {
		props.Tags = append(props.Tags, views.Option{Value: k, Label: v})
	}
	sort.Slice(props.Tags, func(i, j int) bool { return props.Tags[i].Value < props.Tags[j].Value })
	for _, b := range d.Breadcrumbs {
		row := views.BreadcrumbRow{Text: b.Text}
		if b.At != nil {
			row.At = *b.At
		}
		props.Breadcrumbs = append(props.Breadcrumbs, row)
	}
	return Render(c, http.StatusOK, views.EventPage(props))
}

func frameRows(fs []event.Frame) []views.FrameRow {
	out := make([]views.FrameRow, 0, len(fs))
	for _, f := range fs {
		out = append(out, views.FrameRow{File: f.File, Line: f.Line, Function: f.Function, Context: f.ContextCode, InApp: f.InApp})
	}
	return out
}

// incidentDiagnosis reads the incident page's diagnosis: how its events
// spread, and the page of its events the request asks for (?events_before=).
func (s *Server) incidentDiagnosis(c echo.Context, props *views.IncidentProps) error {
	ctx, org := c.Request().Context(), principal(c).OrgID
	id, err := s.incidentParam(c)
	if err != nil {
		return err
	}
	sp, err := s.Incidents.Spread(ctx, org, id)
	if err != nil {
		return err
	}
	props.Spread = views.SpreadProps{Level: sp.Level, Releases: sp.Releases, Users: sp.Users,
		FirstRelease: sp.FirstSeenRelease, LastRelease: sp.LastSeenRelease, Sampled: sp.Sampled, Events: props.Incident.EventCount}
	for _, t := range sp.Tags {
		tr := views.TagSpread{Key: t.Key, Total: t.Total}
		for _, v := range t.Values {
			tr.Values = append(tr.Values, views.TagValue{Value: v.Value, Count: v.Count, Percent: v.Count * 100 / max(t.Total, 1)})
		}
		props.Spread.Tags = append(props.Spread.Tags, tr)
	}
	before := c.QueryParam("events_before")
	pg, err := s.Incidents.Events(ctx, org, id, before)
	if err != nil {
		return err
	}
	props.EventsPaged, props.EventsNext, props.EventsFirst = true, pg.Next, before == ""
	props.Events = props.Events[:0]
	for _, e := range pg.Events {
		props.Events = append(props.Events, views.EventRow{ID: e.EventID, ReceivedAt: e.ReceivedAt, Release: e.Release, Message: e.Message,
			Level: e.Level, UserID: e.UserID})
	}
	return nil
}
