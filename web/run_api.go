package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/forgestatus"
	"anvil/domain/run"
)

func (s *Server) apiQueue(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	v, err := s.Queue.View(c.Request().Context(), principal(c).OrgID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

func (s *Server) apiRunCreate(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	var in struct {
		Branch string `json:"branch"`
		// Ref "latest": the default branch's head now, pinned.
		Ref string `json:"ref"`
	}
	if c.Request().ContentLength != 0 {
		if err := bindJSONStrict(c, &in); err != nil {
			return err
		}
	}
	var r *run.Run
	switch {
	case in.Ref == "latest" && in.Branch == "":
		r, err = s.Queue.AcceptLatest(c.Request().Context(), principal(c), id)
	case in.Ref != "":
		return domain.Invalid("invalid_ref", `ref must be "latest" (and comes without branch)`)
	default:
		r, err = s.Queue.AcceptManual(c.Request().Context(), principal(c), id, in.Branch)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]any{"run_id": r.ID, "number": r.Number, "status": r.Status()})
}

func (s *Server) apiRunGet(c echo.Context) error {
	id, err := pathUUID(c, "runId", "run")
	if err != nil {
		return err
	}
	r, err := s.Queue.RunGet(c.Request().Context(), principal(c).OrgID, id)
	if err != nil {
		return err
	}
	rep, err := forgestatus.Last(c.Request().Context(), s.db.Bun, r.ID)
	if err != nil {
		return err
	}
	pl, err := s.Logs.PipelineOf(c.Request().Context(), r.ID)
	if err != nil {
		return err
	}
	// forge_report is the last commit status posted to the forge (null
	// when the run has not been reported); pipeline the file the run read
	// and its steps (docs/pipelines.md).
	return c.JSON(http.StatusOK, struct {
		run.RunView
		ForgeReport *forgestatus.Report `json:"forge_report"`
		Pipeline    run.Pipeline        `json:"pipeline"`
	}{r.View(), rep, pl})
}

func (s *Server) apiRunCancel(c echo.Context) error {
	id, err := pathUUID(c, "runId", "run")
	if err != nil {
		return err
	}
	r, err := s.Queue.RequestCancel(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, r.View())
}
