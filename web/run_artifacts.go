package web

import (
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/labstack/echo/v4"

	"anvil/domain"
)

// apiRunArtifacts lists the files a run's steps kept (docs/pipelines.md,
// "Artifacts"). Members and above: a build's output may hold what a viewer
// is not meant to take away.
func (s *Server) apiRunArtifacts(c echo.Context) error {
	if err := domain.RequireWrite(principal(c)); err != nil {
		return err
	}
	id, err := pathUUID(c, "runId", "run")
	if err != nil {
		return err
	}
	r, err := s.Queue.RunGet(c.Request().Context(), principal(c).OrgID, id)
	if err != nil {
		return err
	}
	list, err := s.Logs.Artifacts(c.Request().Context(), r.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"artifacts": list})
}

// apiRunArtifact serves one kept file, always as a download: its bytes
// come from the repository's code and must never render as a page of
// anvil's origin.
func (s *Server) apiRunArtifact(c echo.Context) error {
	if err := domain.RequireWrite(principal(c)); err != nil {
		return err
	}
	id, err := pathUUID(c, "runId", "run")
	if err != nil {
		return err
	}
	p, err := url.PathUnescape(c.Param("*"))
	if err != nil || p == "" || len(p) > 1024 || path.Clean(p) != p || strings.HasPrefix(p, "/") {
		return domain.NotFound("artifact")
	}
	a, body, err := s.Logs.ArtifactBody(c.Request().Context(), principal(c).OrgID, id, p)
	if err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set("Content-Disposition", `attachment; filename="`+strings.NewReplacer(`"`, "_", "\\", "_", "\r", "_", "\n", "_").Replace(path.Base(a.Path))+`"`)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox")
	h.Set("X-Checksum-Sha256", a.SHA256)
	return c.Blob(http.StatusOK, "application/octet-stream", body)
}
