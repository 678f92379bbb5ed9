package web

import (
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/webhook"
)

// webhookJSON is a webhook's state in the private API. secret and
// signing_token appear only in the answers of create and rotate-secret.
type webhookJSON struct {
	Provider     string                `json:"provider"`
	Configured   bool                  `json:"configured"`
	Enabled      bool                  `json:"enabled"`
	Config       webhook.WebhookConfig `json:"config"`
	URL          string                `json:"url"`
	CreatedAt    *time.Time            `json:"created_at"`
	UpdatedAt    *time.Time            `json:"updated_at"`
	Secret       string                `json:"secret,omitempty"`
	SigningToken string                `json:"signing_token,omitempty"`
}

func (s *Server) toWebhookJSON(w webhook.Webhook, sec webhook.WebhookSecrets) webhookJSON {
	return webhookJSON{Provider: string(w.Provider), Configured: w.Configured, Enabled: w.Enabled, Config: w.Config,
		URL: s.webhookURL(w.ProjectID.String(), string(w.Provider)), CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt,
		Secret: sec.Secret, SigningToken: sec.SigningToken}
}

// deliveryJSON is one ledger row in the private API.
type deliveryJSON struct {
	DeliveryID string     `json:"delivery_id"`
	Provider   string     `json:"provider"`
	Outcome    string     `json:"outcome"`
	RunID      *uuid.UUID `json:"run_id"`
	Event      string     `json:"event"`
	Kind       string     `json:"kind"`
	Ref        string     `json:"ref"`
	Branch     string     `json:"branch"`
	CommitSHA  string     `json:"commit_sha"`
	Attempts   int        `json:"attempts"`
	ReceivedAt time.Time  `json:"received_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
}

func (s *Server) apiWebhookList(c echo.Context) error {
	id, err := pathUUID(c, "projectId", "project")
	if err != nil {
		return err
	}
	ws, err := s.Webhooks.List(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	out := make([]webhookJSON, 0, len(ws))
	for _, w := range ws {
		out = append(out, s.toWebhookJSON(w, webhook.WebhookSecrets{}))
	}
	return c.JSON(http.StatusOK, map[string]any{"webhooks": out})
}

// apiWebhookPut creates (201, with the secret once) or updates (200).
func (s *Server) apiWebhookPut(c echo.Context) error {
	id, err := pathUUID(c, "projectId", "project")
	if err != nil {
		return err
	}
	var in webhook.WebhookInput
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	res, err := s.Webhooks.Put(c.Request().Context(), principal(c), id, c.Param("provider"), in)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if res.Created {
		status = http.StatusCreated
	}
	return c.JSON(status, s.toWebhookJSON(res.Webhook, res.Secrets))
}

func (s *Server) apiWebhookDelete(c echo.Context) error {
	id, err := pathUUID(c, "projectId", "project")
	if err != nil {
		return err
	}
	if err := s.Webhooks.Delete(c.Request().Context(), principal(c), id, c.Param("provider")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) apiWebhookRotate(c echo.Context) error {
	id, err := pathUUID(c, "projectId", "project")
	if err != nil {
		return err
	}
	res, err := s.Webhooks.RotateSecret(c.Request().Context(), principal(c), id, c.Param("provider"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.toWebhookJSON(res.Webhook, res.Secrets))
}

func (s *Server) apiWebhookDeliveries(c echo.Context) error {
	id, err := pathUUID(c, "projectId", "project")
	if err != nil {
		return err
	}
	limit := 0
	if v := c.QueryParam("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > webhook.MaxListedDeliveries {
			return domain.Invalid("invalid_limit", "limit must be a whole number between 1 and %d", webhook.MaxListedDeliveries)
		}
	}
	ds, err := s.Webhooks.ListDeliveries(c.Request().Context(), principal(c), id, c.Param("provider"), limit)
	if err != nil {
		return err
	}
	out := make([]deliveryJSON, 0, len(ds))
	for _, d := range ds {
		out = append(out, deliveryJSON{DeliveryID: d.DeliveryID, Provider: d.Provider, Outcome: d.Outcome, RunID: d.RunID,
			Event: d.Event, Kind: d.Kind, Ref: d.Ref, Branch: d.Branch, CommitSHA: d.CommitSHA, Attempts: d.Attempts,
			ReceivedAt: d.ReceivedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC()})
	}
	return c.JSON(http.StatusOK, map[string]any{"deliveries": out})
}
