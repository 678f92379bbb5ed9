package web

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/forgestatus"
	"anvil/views"
)

func runRow(v domain.RunView) views.RunRow {
	r := views.RunRow{ID: v.RunID.String(), Status: v.Status, Trigger: v.Trigger, Branch: v.Branch, QueuedAt: v.QueuedAt}
	if v.CommitSHA != nil {
		r.CommitSHA = *v.CommitSHA
	}
	if v.Position != nil {
		r.Position = strconv.FormatInt(*v.Position, 10)
	}
	if v.ExitCode != nil {
		r.ExitCode = strconv.Itoa(*v.ExitCode)
	}
	if v.FailureReason != nil {
		r.FailureReason = *v.FailureReason
	}
	if v.StartedAt != nil {
		r.StartedAt = *v.StartedAt
	}
	if v.FinishedAt != nil {
		r.FinishedAt = *v.FinishedAt
	}
	return r
}

func indexedRow(ir domain.IndexedRun) views.RunRow {
	return runRow(domain.RunView{RunID: ir.RunID, Status: ir.Status, Trigger: ir.Trigger, Branch: ir.Branch,
		CommitSHA: ir.CommitSHA, ExitCode: ir.ExitCode, FailureReason: ir.FailureReason, QueuedAt: ir.QueuedAt,
		StartedAt: ir.StartedAt, FinishedAt: ir.FinishedAt})
}

// queueProps reads the queue from the service and the finished runs from
// the read model; a run is listed once, where the queue puts it.
func (s *Server) queueProps(c echo.Context, projectID uuid.UUID) (views.QueueProps, error) {
	p := principal(c)
	ctx := c.Request().Context()
	v, err := s.Queue.View(ctx, p.OrgID, projectID)
	if err != nil {
		return views.QueueProps{}, err
	}
	recent, err := s.Queue.FinishedRuns(ctx, p.OrgID, projectID, 15)
	if err != nil {
		return views.QueueProps{}, err
	}
	shown := map[uuid.UUID]bool{}
	if v.Active != nil {
		shown[v.Active.RunID] = true
	}
	for _, r := range v.Queued {
		shown[r.RunID] = true
	}
	q := views.QueueProps{ProjectID: projectID.String(), CanWrite: p.CanWrite(), CSRF: s.csrfToken(p)}
	if v.Active != nil {
		r := runRow(*v.Active)
		q.Active = &r
	}
	for _, r := range v.Queued {
		q.Queued = append(q.Queued, runRow(r))
	}
	for _, r := range recent {
		if !shown[r.RunID] { // never twice on one page
			q.Recent = append(q.Recent, indexedRow(r))
		}
	}
	return q, nil
}

func (s *Server) projectQueueFragment(c echo.Context) error {
	id, err := pathUUID(c, "projectId", "project")
	if err != nil {
		return err
	}
	q, err := s.queueProps(c, id)
	if err != nil {
		return err
	}
	return Render(c, http.StatusOK, views.Queue(q))
}

// runNowSubmit accepts a manual run and answers with the fresh queue; a full
// queue is shown in place.
func (s *Server) runNowSubmit(c echo.Context) error {
	id, err := pathUUID(c, "projectId", "project")
	if err != nil {
		return err
	}
	var aerr error
	if c.FormValue("ref") == "latest" {
		_, aerr = s.Queue.AcceptLatest(c.Request().Context(), principal(c), id)
	} else {
		_, aerr = s.Queue.AcceptManual(c.Request().Context(), principal(c), id, "")
	}
	var de *domain.Error
	if aerr != nil && !errors.As(aerr, &de) {
		return aerr
	}
	if de != nil && !errors.Is(de.Kind, domain.ErrQueueFull) {
		return aerr
	}
	if !isHTMX(c) {
		return redirect(c, "/projects/"+id.String())
	}
	q, err := s.queueProps(c, id)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if de != nil {
		q.Error, status = de.Message, http.StatusConflict
	}
	return Render(c, status, views.Queue(q))
}

func (s *Server) runCancelSubmit(c echo.Context) error {
	id, err := pathUUID(c, "runId", "run")
	if err != nil {
		return err
	}
	r, err := s.Queue.RequestCancel(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	if !isHTMX(c) {
		return redirect(c, "/runs/"+id.String())
	}
	if c.QueryParam("from") == "project" {
		q, err := s.queueProps(c, r.ProjectID)
		if err != nil {
			return err
		}
		return Render(c, http.StatusOK, views.Queue(q))
	}
	props, err := s.runProps(c, id, false)
	if err != nil {
		return err
	}
	return Render(c, http.StatusOK, views.RunHeader(props))
}

func (s *Server) runProps(c echo.Context, id uuid.UUID, withLog bool) (views.RunProps, error) {
	p := principal(c)
	ctx := c.Request().Context()
	r, err := s.Queue.RunGet(ctx, p.OrgID, id)
	if err != nil {
		return views.RunProps{}, err
	}
	proj, err := s.Projects.Get(ctx, p.OrgID, r.ProjectID)
	if err != nil {
		return views.RunProps{}, err
	}
	props := views.RunProps{Page: s.page(c, "Run · "+proj.Name, "projects"), Run: runRow(r.View()), ProjectID: proj.ID.String(),
		ProjectName: proj.Name, CanWrite: p.CanWrite(), Unsandboxed: r.Sandboxed != nil && !*r.Sandboxed}
	rep, err := forgestatus.Last(ctx, s.db.Bun, r.ID)
	if err != nil {
		return views.RunProps{}, err
	}
	props.ForgeReport, props.ForgeReportFailed = forgeReportLine(rep)
	if withLog {
		chunks, err := s.Logs.Chunks(ctx, id, 0)
		if err != nil {
			return views.RunProps{}, err
		}
		var b strings.Builder
		for _, ch := range chunks {
			b.WriteString(ch.Body)
			props.LogSeq = ch.Seq
		}
		props.Log = b.String()
	}
	return props, nil
}

func (s *Server) runPage(c echo.Context) error {
	id, err := pathUUID(c, "runId", "run")
	if err != nil {
		return err
	}
	props, err := s.runProps(c, id, c.QueryParam("fragment") == "")
	if err != nil {
		return err
	}
	if c.QueryParam("fragment") == "header" {
		return Render(c, http.StatusOK, views.RunHeader(props))
	}
	return Render(c, http.StatusOK, views.RunPage(props))
}

// runLogText serves the whole log as text for people (the API has its own).
func (s *Server) runLogText(c echo.Context) error {
	return s.apiRunLogs(c)
}

// forgeReportLine says what the forge was last told about the run, or why
// it could not be told and when anvil tries again.
func forgeReportLine(rep *forgestatus.Report) (string, bool) {
	if rep == nil {
		return "", false
	}
	name := forgestatus.ProviderName(rep.Provider)
	if rep.Error != "" {
		line := "could not report to " + name + ": " + rep.Error
		if rep.NextAttemptAt != nil {
			line += " — next retry at " + rep.NextAttemptAt.UTC().Format("15:04:05") + " UTC"
		} else {
			line += " — not retried"
		}
		return line, true
	}
	return "reported to " + name + ": " + rep.State + " (" + rep.Description + ")", false
}
