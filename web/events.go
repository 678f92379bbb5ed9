package web

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/views"
)

// events streams live changes of the caller's organisation as Server-Sent
// Events, named by kind (run, log, delivery, incident, card …), narrowed to
// one project (?project=) or one run (?run=). For a run it also streams the
// log: everything after ?after= first, then each new chunk as it is stored,
// so a viewer who joins mid-run sees everything so far and then the rest.
// Changes reach every web process through Postgres LISTEN/NOTIFY.
func (s *Server) events(c echo.Context) error {
	p := principal(c)
	ctx := c.Request().Context()
	var projectID, runID uuid.UUID
	if v := c.QueryParam("project"); v != "" {
		id, err := uuid.Parse(v)
		if err != nil {
			return domain.NotFound("project")
		}
		if _, err := s.Projects.Get(ctx, p.OrgID, id); err != nil {
			return err
		}
		projectID = id
	}
	if v := c.QueryParam("run"); v != "" {
		id, err := uuid.Parse(v)
		if err != nil {
			return domain.NotFound("run")
		}
		if _, err := s.Queue.RunGet(ctx, p.OrgID, id); err != nil {
			return err
		}
		runID = id
	}
	after, _ := strconv.Atoi(c.QueryParam("after"))
	if s.Hub == nil {
		return echo.NewHTTPError(http.StatusServiceUnavailable, "live events are not available")
	}
	sub, leave := s.Hub.Subscribe(func(ev domain.LiveEvent) bool {
		if ev.Kind == "resync" {
			return true
		}
		if ev.OrgID != p.OrgID {
			return false
		}
		if projectID != uuid.Nil && ev.ProjectID != projectID {
			return false
		}
		return runID == uuid.Nil || ev.RunID == runID
	})
	defer leave()

	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set(echo.HeaderCacheControl, "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": connected\n\n")
	w.Flush()

	sendLog := func() error {
		if runID == uuid.Nil {
			return nil
		}
		chunks, err := s.Logs.Chunks(ctx, runID, after)
		if err != nil {
			return err
		}
		for _, ch := range chunks {
			writeEvent(w, "log", views.LogHTMLStep(ch.Body, ch.Offset, ch.Step))
			after = ch.Seq
		}
		if len(chunks) > 0 {
			w.Flush()
		}
		return nil
	}
	if err := sendLog(); err != nil {
		return nil
	}
	if runID != uuid.Nil {
		// The page was rendered before this subscription: a change of the
		// run in between (it started, it passed) would never be streamed.
		// One "run" now makes the page fetch the run's state again, as a
		// resync does; the log needs none, it resumes from ?after=
		// (docs/architecture.md, "One writer per project").
		writeEvent(w, "run", "")
		w.Flush()
	}
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.done:
			return nil
		case <-ping.C:
			fmt.Fprint(w, ": ping\n\n")
			w.Flush()
		case ev := <-sub.C:
			if ev.Kind == "log" || ev.Kind == "run" || ev.Kind == "resync" {
				if err := sendLog(); err != nil {
					return nil
				}
			}
			if ev.Kind != "log" {
				kind := ev.Kind
				if kind == "resync" {
					kind = "run"
				}
				writeEvent(w, kind, string(ev.Raw))
				w.Flush()
			}
		}
	}
}

// writeEvent writes one SSE message; every line of data gets its own
// "data:" field (the client joins them with newlines). An SSE parser ends a
// line at CR LF, at a lone LF and at a lone CR alike, so all three split
// here: a CR left inside a field would let run output start fields of its
// own ("x\revent: incident\rdata: forged").
func writeEvent(w http.ResponseWriter, name, data string) {
	var b strings.Builder
	b.WriteString("event: ")
	b.WriteString(name)
	b.WriteByte('\n')
	for {
		i := strings.IndexAny(data, "\r\n")
		line := data
		if i >= 0 {
			line = data[:i]
		}
		b.WriteString("data: ")
		b.WriteString(line)
		b.WriteByte('\n')
		if i < 0 {
			break
		}
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	b.WriteByte('\n')
	_, _ = w.Write([]byte(b.String()))
}

func (s *Server) apiRunLogs(c echo.Context) error {
	id, err := pathUUID(c, "runId", "run")
	if err != nil {
		return err
	}
	var text string
	service := c.QueryParam("service")
	if service != "" && c.QueryParam("step") != "" {
		return domain.Invalid("invalid_query", "ask for one step's log or one service's, not both")
	}
	if service != "" {
		// One service's log (docs/images.md, "Services"): the end of it
		// anvil kept; workflow picks one of two services of that name.
		if len(service) > 200 || len(c.QueryParam("workflow")) > 200 {
			return domain.NewError(domain.ErrNotFound, "service_not_found", "this run has no service named %s", domain.ClipString(service, 64))
		}
		_, byWorkflow := c.QueryParams()["workflow"]
		text, err = s.Logs.ServiceText(c.Request().Context(), principal(c).OrgID, id, service, c.QueryParam("workflow"), byWorkflow)
	} else if step := c.QueryParam("step"); step != "" {
		// One step's log alone (docs/pipelines.md): its key, or its name
		// for every combination of its matrix.
		if len(step) > 200 {
			return domain.NotFound("step")
		}
		text, err = s.Logs.StepText(c.Request().Context(), principal(c).OrgID, id, step)
	} else {
		text, err = s.Logs.Text(c.Request().Context(), principal(c).OrgID, id)
	}
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, "text/plain; charset=utf-8", []byte(text))
}
