package web

import (
	"context"
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/run"
	"anvil/views"
)

// A run's connections through its egress proxy (docs/network.md): the
// Network section of its page, fetched again on each "connection" event of
// the run's stream, and GET /api/private/runs/:id/connections.

// runNetworkProps reads a run's record and its project's list.
func (s *Server) runNetworkProps(ctx context.Context, orgID uuid.UUID, r *run.Run, proj *domain.Project) (views.RunNetworkProps, error) {
	conns, err := s.Network.Connections(ctx, orgID, r.ID)
	if err != nil {
		return views.RunNetworkProps{}, err
	}
	out := views.RunNetworkProps{RunID: r.ID.String(), Listed: proj.NetworkFor(r.Trigger == run.TriggerRepair)}
	for _, c := range conns {
		out.Connections = append(out.Connections, views.ConnectionRow{Host: c.Host, Port: c.Port, Method: c.Method, Verdict: c.Verdict,
			Reason: c.Reason, BytesUp: c.BytesUp, BytesDown: c.BytesDown, DurationMS: c.DurationMS, Count: c.Count})
	}
	return out, nil
}

// runNetworkFragment serves the Network section alone.
func (s *Server) runNetworkFragment(c echo.Context) error {
	id, err := pathUUID(c, "runId", "run")
	if err != nil {
		return err
	}
	p := principal(c)
	ctx := c.Request().Context()
	r, err := s.Queue.RunGet(ctx, p.OrgID, id)
	if err != nil {
		return err
	}
	proj, err := s.Projects.Get(ctx, p.OrgID, r.ProjectID)
	if err != nil {
		return err
	}
	props, err := s.runNetworkProps(ctx, p.OrgID, r, proj)
	if err != nil {
		return err
	}
	return Render(c, http.StatusOK, views.RunNetwork(props))
}

// apiRunConnections answers {connections: [...]} in order.
func (s *Server) apiRunConnections(c echo.Context) error {
	id, err := pathUUID(c, "runId", "run")
	if err != nil {
		return err
	}
	conns, err := s.Network.Connections(c.Request().Context(), principal(c).OrgID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"connections": conns})
}
