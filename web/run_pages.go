package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/forgestatus"
	"anvil/domain/run"
	"anvil/views"
)

func runRow(v run.RunView) views.RunRow {
	r := views.RunRow{ID: v.RunID.String(), Status: v.Status, Trigger: v.Trigger, Branch: v.Branch, QueuedAt: v.QueuedAt, Number: v.Number}
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
	if v.Image != nil {
		r.Image = *v.Image
	}
	if v.ImageDigest != nil {
		r.ImageDigest = *v.ImageDigest
	}
	return r
}

func indexedRow(ir run.IndexedRun) views.RunRow {
	return runRow(run.RunView{RunID: ir.RunID, Status: ir.Status, Trigger: ir.Trigger, Branch: ir.Branch,
		CommitSHA: ir.CommitSHA, ExitCode: ir.ExitCode, FailureReason: ir.FailureReason, QueuedAt: ir.QueuedAt,
		StartedAt: ir.StartedAt, FinishedAt: ir.FinishedAt, Number: ir.Number})
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
	slug := c.Param("projectId") // a slug or an id, as the request named it; the id where none did
	if slug == "" {
		slug = projectID.String()
	}
	q := views.QueueProps{ProjectID: projectID.String(), ProjectSlug: slug, CanWrite: p.CanWrite(), CSRF: s.csrfToken(p)}
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
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	q, err := s.queueProps(c, id)
	if err != nil {
		return err
	}
	return Render(c, http.StatusOK, views.Queue(q))
}

// runNowSubmit accepts a manual run and goes to the run's page, where its
// log follows (the person asked to see it run); a full queue is shown in
// place on the project page.
func (s *Server) runNowSubmit(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	var (
		r    *run.Run
		aerr error
	)
	if c.FormValue("ref") == "latest" {
		r, aerr = s.Queue.AcceptLatest(c.Request().Context(), principal(c), id)
	} else {
		r, aerr = s.Queue.AcceptManual(c.Request().Context(), principal(c), id, "")
	}
	if aerr == nil {
		return redirect(c, "/runs/"+r.ID.String())
	}
	var de *domain.Error
	if !errors.As(aerr, &de) || !errors.Is(de.Kind, domain.ErrQueueFull) {
		return aerr
	}
	if !isHTMX(c) {
		return redirect(c, projectPath(c))
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
	props := views.RunProps{Page: s.page(c, fmt.Sprintf("Run #%d · %s", r.Number, proj.Name), "projects"), Run: runRow(r.View()), ProjectID: proj.ID.String(), ProjectSlug: proj.Slug,
		ProjectName: proj.Name, CanWrite: p.CanWrite(), Unsandboxed: r.Sandboxed != nil && !*r.Sandboxed,
		CanRerun: p.CanWrite() && run.IsTerminal(r.State) && r.Trigger != run.TriggerRepair, CSRF: s.csrfToken(p)}
	rep, err := forgestatus.Last(ctx, s.db.Bun, r.ID)
	if err != nil {
		return views.RunProps{}, err
	}
	props.ForgeReport, props.ForgeReportFailed = forgeReportLine(rep)
	story, err := s.Queue.Story(ctx, r)
	if err != nil {
		return views.RunProps{}, err
	}
	props.Place, props.CanceledBy = story.Place, story.CanceledBy
	switch {
	case story.RerunOfNumber > 0:
		props.TriggeredBy = "Re-run by " + orSomeone(story.TriggeredBy) + " of"
		props.TriggerHref, props.TriggerLink = fmt.Sprintf("/runs/%s", r.RerunOf), fmt.Sprintf("#%d", story.RerunOfNumber)
	case r.Trigger == run.TriggerManual:
		props.TriggeredBy = "Started by " + orSomeone(story.TriggeredBy)
	case r.Trigger == run.TriggerWebhook:
		props.TriggeredBy = "Started by a push"
		if r.Provider != nil && r.DeliveryID != nil {
			props.TriggeredBy = "Started by a " + *r.Provider + " push:"
			props.TriggerHref, props.TriggerLink = "/projects/"+proj.Slug+"/webhooks#delivery-"+*r.DeliveryID, "delivery "+*r.DeliveryID
		}
	case r.Trigger == run.TriggerRepair:
		props.TriggeredBy = "A repair"
		if r.IncidentID != nil {
			props.TriggeredBy = "A repair of"
			props.TriggerHref, props.TriggerLink = "/incidents/"+r.IncidentID.String(), "its incident"
		}
	}
	var text string
	if withLog || r.FailureReason != nil {
		chunks, err := s.Logs.Chunks(ctx, id, 0)
		if err != nil {
			return views.RunProps{}, err
		}
		var raw, b strings.Builder
		for _, ch := range chunks {
			raw.WriteString(ch.Body)
			b.WriteString(views.LogHTMLStep(ch.Body, ch.Offset, ch.Step))
			props.LogSeq = ch.Seq
		}
		text = raw.String()
		if withLog {
			props.Log = b.String()
		}
	}
	props.Why = run.WhyEnded(r, failureDetail(text, r), proj.RunTimeout(), s.Queue.HeartbeatTimeout())
	if props.Steps, err = s.stepsProps(ctx, r, p.CanWrite()); err != nil {
		return views.RunProps{}, err
	}
	if props.Services, err = s.servicesProps(ctx, r); err != nil {
		return views.RunProps{}, err
	}
	if withLog {
		if props.Network, err = s.runNetworkProps(ctx, p.OrgID, r, proj); err != nil {
			return views.RunProps{}, err
		}
	}
	if r.Trigger == run.TriggerRepair && (withLog || r.State == run.StatePassed) {
		pt, err := s.Logs.Patch(ctx, p.OrgID, r.ID)
		if err != nil {
			return views.RunProps{}, err
		}
		if pt != nil {
			if withLog {
				props.Patch, props.PatchTruncated = pt.Text, pt.Truncated
			}
			if pt.Ready && r.State == run.StatePassed {
				props.Why, props.PatchReady = run.PatchReadyWords, true
			}
		}
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
	switch c.QueryParam("fragment") {
	case "header":
		return Render(c, http.StatusOK, views.RunHeader(props))
	case "steps":
		return Render(c, http.StatusOK, views.RunSteps(props.Steps))
	case "services":
		return Render(c, http.StatusOK, views.RunServices(props.Services))
	}
	return Render(c, http.StatusOK, views.RunPage(props))
}

// stepsProps reads the run's pipeline for its page: the steps with their
// durations and, for a failed step, its first error line.
func (s *Server) stepsProps(ctx context.Context, r *run.Run, canDownload bool) (views.RunStepsProps, error) {
	pl, err := s.Logs.PipelineOf(ctx, r.ID)
	if err != nil {
		return views.RunStepsProps{}, err
	}
	props := views.RunStepsProps{RunID: r.ID.String(), CanDownload: canDownload}
	if pl.File != nil {
		props.File = *pl.File
	}
	if pl.Error != nil {
		props.Error = *pl.Error
	}
	var failed []int
	for _, st := range pl.Steps {
		if st.Status == run.StepFailed {
			failed = append(failed, st.Index)
		}
	}
	logs, err := s.Logs.StepLogs(ctx, r.ID, failed)
	if err != nil {
		return views.RunStepsProps{}, err
	}
	for _, st := range pl.Steps {
		row := views.StepRow{Index: st.Index, Key: st.Key, Status: st.Status, Reason: st.Reason, Ignored: st.Ignored}
		if st.ExitCode != nil {
			row.ExitCode = strconv.Itoa(*st.ExitCode)
		}
		if st.StartedAt != nil {
			end := time.Now()
			if st.FinishedAt != nil {
				end = *st.FinishedAt
			}
			row.Duration = views.Duration(end.Sub(*st.StartedAt))
		}
		for _, n := range st.Needs {
			if n >= 0 && n < len(pl.Steps) {
				row.Needs = append(row.Needs, pl.Steps[n].Key)
			}
		}
		if text, ok := logs[st.Index]; ok {
			row.FirstError = firstErrorLine(text)
		}
		props.Steps = append(props.Steps, row)
	}
	if props.CanDownload {
		arts, err := s.Logs.Artifacts(ctx, r.ID)
		if err != nil {
			return views.RunStepsProps{}, err
		}
		for _, a := range arts {
			props.Artifacts = append(props.Artifacts, views.ArtifactRow{Step: a.Step, Path: a.Path, Size: byteSize(a.Size),
				Href: "/runs/" + r.ID.String() + "/artifacts/" + (&url.URL{Path: a.Path}).EscapedPath()})
		}
	}
	return props, nil
}

// firstErrorLine is a step log's first line that reads like an error, else
// its last line; bounded for the page.
func firstErrorLine(text string) string {
	last := ""
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(views.FoldProgress(line))
		if line == "" || strings.HasPrefix(line, "+ ") {
			continue
		}
		if views.LooksLikeError(line) {
			last = line
			break
		}
		last = line
	}
	if r := []rune(last); len(r) > 200 {
		last = string(r[:199]) + "…"
	}
	return last
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// orSomeone is an account's email, or what to say once it is gone.
func orSomeone(email string) string {
	if email == "" {
		return "a former member"
	}
	return email
}

// failureDetail is what the log's own narration said went wrong (the
// checkout's error, the sandbox's), for the reason in words.
// whyEnded says in words why the run ended, from its stored log.
func (s *Server) whyEnded(ctx context.Context, orgID, runID uuid.UUID, log string) (string, error) {
	r, err := s.Queue.RunGet(ctx, orgID, runID)
	if err != nil {
		return "", err
	}
	proj, err := s.Projects.Get(ctx, orgID, r.ProjectID)
	if err != nil {
		return "", err
	}
	return run.WhyEnded(r, failureDetail(log, r), proj.RunTimeout(), s.Queue.HeartbeatTimeout()), nil
}

func failureDetail(log string, r *run.Run) string {
	if r.FailureReason == nil {
		return ""
	}
	prefix := map[string]string{run.ReasonCheckout: "[anvil] checkout failed: ", run.ReasonSandbox: "[anvil] the sandbox failed: ",
		run.ReasonRepairPush: "[anvil] repair: ", run.ReasonRepairForge: "[anvil] repair: ", run.ReasonInfra: "[anvil] "}[*r.FailureReason]
	if prefix == "" {
		return ""
	}
	detail := ""
	for _, line := range strings.Split(log, "\n") {
		if strings.HasPrefix(line, prefix) {
			detail = strings.TrimPrefix(line, prefix)
		}
	}
	if len(detail) > 300 {
		detail = detail[:300] + "…"
	}
	return detail
}

// runPatchText serves a repair run's kept patch (404 when it has none).
func (s *Server) runPatchText(c echo.Context) error {
	id, err := pathUUID(c, "runId", "run")
	if err != nil {
		return err
	}
	pt, err := s.Logs.Patch(c.Request().Context(), principal(c).OrgID, id)
	if err != nil {
		return err
	}
	if pt == nil {
		return domain.NotFound("patch")
	}
	c.Response().Header().Set("Content-Disposition", `attachment; filename="run-`+id.String()+`.patch"`)
	return c.Blob(http.StatusOK, "text/x-diff; charset=utf-8", []byte(pt.Text))
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

// servicesProps reads the run's services for its page (docs/images.md,
// "Services"): each with its time to ready and the end of its log.
func (s *Server) servicesProps(ctx context.Context, r *run.Run) (views.RunServicesProps, error) {
	ss, err := s.Logs.ServicesOf(ctx, r.ID)
	if err != nil {
		return views.RunServicesProps{}, err
	}
	var props views.RunServicesProps
	for _, sv := range ss {
		row := views.ServiceRow{Key: sv.Workflow + "/" + sv.Name, Name: sv.Name, Workflow: sv.Workflow, Image: sv.Image, Digest: sv.ImageDigest,
			Status: sv.Status, Reason: sv.Reason, Log: views.ServiceLogHTML(sv.Log), Empty: sv.Log == ""}
		if sv.StartedAt != nil && sv.ReadyAt != nil {
			row.ToReady = views.Duration(sv.ReadyAt.Sub(*sv.StartedAt))
		}
		// Only the end is kept of a longer log (run.MaxServiceLog).
		if kept := int64(len(sv.Log)); sv.LogBytes > run.MaxServiceLog && kept > 0 {
			row.Kept = "the last " + byteSize(kept) + " of " + byteSize(sv.LogBytes)
		}
		props.Services = append(props.Services, row)
	}
	return props, nil
}
