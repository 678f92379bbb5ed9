package web

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/run"
	"anvil/views"
)

// historyFilter reads the run history's filters from the query string.
func historyFilter(c echo.Context) run.HistoryFilter {
	f := run.HistoryFilter{Status: c.QueryParam("status"), Branch: c.QueryParam("branch"),
		Trigger: c.QueryParam("trigger"), Before: c.QueryParam("before")}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			n = -1 // refused by Validate, naming limit
		}
		f.Limit = n
	}
	return f
}

// apiRunHistory is GET /api/private/projects/:projectId/runs: a page of the
// project's runs, newest first, and next_before (null on the last page).
func (s *Server) apiRunHistory(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	h, err := s.Queue.History(c.Request().Context(), principal(c).OrgID, id, historyFilter(c))
	if err != nil {
		return err
	}
	var next *int64
	if h.NextBefore > 0 {
		next = &h.NextBefore
	}
	return c.JSON(http.StatusOK, map[string]any{"runs": h.Runs, "next_before": next})
}

// runHistoryPage is /projects/:slug/runs; ?fragment=rows answers only the
// rows, which the page fetches again whenever one of the project's runs
// changes (its SSE stream, as the project page's queue does).
func (s *Server) runHistoryPage(c echo.Context) error {
	p, err := s.projectParam(c)
	if err != nil {
		return err
	}
	f := historyFilter(c)
	props := views.RunHistoryProps{Page: s.page(c, "Runs · "+p.Name, "projects"), ProjectID: p.ID.String(),
		ProjectSlug: p.Slug, ProjectName: p.Name, Status: f.Status, Branch: f.Branch, Trigger: f.Trigger, Before: f.Before}
	q := url.Values{}
	for k, v := range map[string]string{"status": f.Status, "branch": f.Branch, "trigger": f.Trigger, "before": f.Before} {
		if v != "" {
			q.Set(k, v)
		}
	}
	props.Query = q.Encode()
	status := http.StatusOK
	h, err := s.Queue.History(c.Request().Context(), principal(c).OrgID, p.ID, f)
	var de *domain.Error
	switch {
	case errors.As(err, &de) && errors.Is(de.Kind, domain.ErrInvalid):
		props.Error, status = de.Message, http.StatusUnprocessableEntity
	case err != nil:
		return err
	}
	for _, r := range h.Runs {
		props.Rows = append(props.Rows, historyRow(r))
	}
	if h.NextBefore > 0 {
		q.Set("before", strconv.FormatInt(h.NextBefore, 10))
		props.NextURL = "/projects/" + url.PathEscape(p.Slug) + "/runs?" + q.Encode()
	}
	if c.QueryParam("fragment") == "rows" {
		return Render(c, status, views.RunHistoryRows(props))
	}
	return Render(c, status, views.RunHistoryPage(props))
}

func historyRow(r run.HistoryRun) views.HistoryRow {
	row := views.HistoryRow{RunRow: runRow(r.RunView), Actor: r.Actor, Reason: r.Reason, PatchReady: r.PatchReady}
	if r.DurationSeconds != nil {
		row.Duration = run.Words(time.Duration(*r.DurationSeconds) * time.Second)
	}
	return row
}
