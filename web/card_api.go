package web

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/card"
)

// apiCardGet: GET /api/private/projects/:projectId/card → {source, incidents}.
func (s *Server) apiCardGet(c echo.Context) error {
	id, err := pathUUID(c, "projectId", "project")
	if err != nil {
		return err
	}
	card, err := s.Cards.Get(c.Request().Context(), principal(c).OrgID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, card)
}

// apiDashboardPut: PUT /api/private/projects/:projectId/dashboard
// {external: bool} → {config_id, external, token?}. The token of an external
// config is in this answer only.
func (s *Server) apiDashboardPut(c echo.Context) error {
	id, err := pathUUID(c, "projectId", "project")
	if err != nil {
		return err
	}
	var in struct {
		External *bool `json:"external"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	if in.External == nil {
		return domain.Invalid("missing_external", `"external" is required: true hands the card to an external producer, false back to the incident store`)
	}
	cfg, err := s.Cards.SetExternal(c.Request().Context(), principal(c), id, *in.External)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, cfg)
}

// maxCardBody bounds the external ingest's body (1,000 incidents fit).
const maxCardBody = 1 << 20

// dashboardIngest: PUT /api/ingest/dashboard/:tenant/:config/incidents with
// the config's Bearer token and {"incidents": [...]} replaces the card.
// Credentials are judged before the body is read: every credential failure
// is the same 401, so the endpoint tells nobody which configs exist.
func (s *Server) dashboardIngest(c echo.Context) error {
	tok := ""
	if h := c.Request().Header.Get(echo.HeaderAuthorization); strings.HasPrefix(h, "Bearer ") {
		tok = strings.TrimSpace(strings.TrimPrefix(h, "Bearer "))
	}
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, maxCardBody+1))
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "could not read the request body")
	}
	var in struct {
		Incidents *[]card.ExternalIncident `json:"incidents"`
	}
	parseErr := func() error {
		if len(body) > maxCardBody {
			return echo.NewHTTPError(http.StatusRequestEntityTooLarge, "the body must be at most 1 MiB")
		}
		if err := json.Unmarshal(body, &in); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return &domain.Error{Kind: errBadRequest, Code: "invalid_json", Message: "field " + te.Field + " must be a " + te.Type.String()}
			}
			return &domain.Error{Kind: errBadRequest, Code: "invalid_json", Message: `the body must be a JSON object {"incidents": [...]}`}
		}
		return nil
	}()
	prod, err := s.Cards.AuthorizeProducer(c.Request().Context(), c.Param("tenant"), c.Param("config"), tok)
	if err != nil {
		return err
	}
	if parseErr != nil {
		return parseErr
	}
	if err := s.Cards.ReplaceExternal(c.Request().Context(), prod, in.Incidents); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
