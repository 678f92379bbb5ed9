package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"anvil/domain/alert"
)

func (s *Server) apiAlertDestinations(c echo.Context) error {
	ds, err := s.alerts.List(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"destinations": ds})
}

func (s *Server) apiAlertDestinationCreate(c echo.Context) error {
	var in alert.Input
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	d, sec, err := s.alerts.Create(c.Request().Context(), principal(c), in)
	if err != nil {
		return err
	}
	out := map[string]any{"destination_id": d.ID, "name": d.Name, "kind": d.Kind, "url": d.URLHint}
	if d.Kind == alert.KindEmail {
		out["recipients"] = d.Recipients
	}
	if sec != "" {
		out["secret"] = sec
	}
	return c.JSON(http.StatusCreated, out)
}

func (s *Server) apiAlertDestinationGet(c echo.Context) error {
	id, err := pathUUID(c, "destinationId", "destination")
	if err != nil {
		return err
	}
	d, err := s.alerts.Get(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

func (s *Server) apiAlertDestinationUpdate(c echo.Context) error {
	id, err := pathUUID(c, "destinationId", "destination")
	if err != nil {
		return err
	}
	var in alert.Input
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	d, err := s.alerts.Update(c.Request().Context(), principal(c), id, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

func (s *Server) apiAlertDestinationDelete(c echo.Context) error {
	id, err := pathUUID(c, "destinationId", "destination")
	if err != nil {
		return err
	}
	if err := s.alerts.Delete(c.Request().Context(), principal(c), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) apiAlertDestinationTest(c echo.Context) error {
	id, err := pathUUID(c, "destinationId", "destination")
	if err != nil {
		return err
	}
	msg, err := s.alerts.Test(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]any{"message_id": msg})
}

func (s *Server) apiAlertDeliveries(c echo.Context) error {
	id, err := pathUUID(c, "destinationId", "destination")
	if err != nil {
		return err
	}
	ds, err := s.alerts.Deliveries(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"deliveries": ds})
}

func (s *Server) apiAlertRules(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	rs, err := s.alerts.Rules(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"rules": rs})
}

func (s *Server) apiAlertRulesPut(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	var in struct {
		Rules []alert.Rule `json:"rules"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	rs, err := s.alerts.PutRules(c.Request().Context(), principal(c), id, in.Rules)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"rules": rs})
}
