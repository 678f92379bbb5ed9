package web

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

func (s *Server) apiQueue(c echo.Context) error {
	id, err := pathUUID(c, "projectId", "project")
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
	id, err := pathUUID(c, "projectId", "project")
	if err != nil {
		return err
	}
	var in struct {
		Branch string `json:"branch"`
	}
	if c.Request().ContentLength != 0 {
		if err := bindJSON(c, &in); err != nil {
			return err
		}
	}
	r, err := s.Queue.AcceptManual(c.Request().Context(), principal(c), id, in.Branch)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]any{"run_id": r.ID, "status": r.Status()})
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
	return c.JSON(http.StatusOK, r.View())
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
