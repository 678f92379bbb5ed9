package web

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/forge"
	"anvil/views"
)

// Evaluating a ledger entry again from its stored payload
// (docs/contracts/webhooks.md, "Evaluating a delivery again"): the private
// API's route and the webhook page's "Evaluate again" button.

// redeliverTarget reads the route's project, provider and delivery id. The
// id is any printable ASCII, so links escape it; echo hands the parameter
// over still escaped when the path needed escaping beyond the default.
func redeliverTarget(c echo.Context) (uuid.UUID, string, string, error) {
	id, err := pathUUID(c, "projectId", "project")
	if err != nil {
		return uuid.Nil, "", "", err
	}
	deliveryID := c.Param("deliveryId")
	if c.Request().URL.RawPath != "" {
		if deliveryID, err = url.PathUnescape(deliveryID); err != nil {
			return uuid.Nil, "", "", domain.NotFound("delivery")
		}
	}
	return id, c.Param("provider"), deliveryID, nil
}

// apiWebhookRedeliver answers as the public route answers the forge: 200
// with the outcome (and the run), 503 with Retry-After while the queue is
// still full.
func (s *Server) apiWebhookRedeliver(c echo.Context) error {
	id, provider, deliveryID, err := redeliverTarget(c)
	if err != nil {
		return err
	}
	res, err := s.Webhooks.Redeliver(c.Request().Context(), principal(c), id, provider, deliveryID)
	if errors.Is(err, domain.ErrWebhookQueueFull) {
		c.Response().Header().Set("Retry-After", "60")
		_, code, msg := classify(err)
		return c.JSON(http.StatusServiceUnavailable, deliveryAnswer{Outcome: string(forge.OutcomeQueueFull), Error: code, Message: msg})
	}
	if err != nil {
		return err
	}
	if res.Replayed {
		c.Response().Header().Set("Anvil-Delivery-Replayed", "true")
	}
	return c.JSON(http.StatusOK, deliveryAnswer{Outcome: string(res.Outcome), RunID: res.RunID})
}

// webhookRedeliverSubmit is the page's button: under htmx, what the
// evaluation decided or why it could not be done (answered 200, so that
// htmx shows it in place, as the webhook cards' refusals are), with the
// deliveries table again; without htmx, back to the page.
func (s *Server) webhookRedeliverSubmit(c echo.Context) error {
	id, provider, deliveryID, err := redeliverTarget(c)
	if err != nil {
		return err
	}
	res, rerr := s.Webhooks.Redeliver(c.Request().Context(), principal(c), id, provider, deliveryID)
	var de *domain.Error
	if rerr != nil && !errors.As(rerr, &de) {
		return rerr
	}
	if de != nil && errors.Is(de.Kind, domain.ErrNotFound) {
		return rerr
	}
	if !isHTMX(c) {
		if rerr != nil && !errors.Is(rerr, domain.ErrWebhookQueueFull) {
			return rerr
		}
		return redirect(c, "/projects/"+id.String()+"/webhooks")
	}
	d, err := s.deliveriesProps(c, id)
	if err != nil {
		return err
	}
	switch {
	case de != nil:
		d.Error = de.Message
	case res.Outcome == forge.OutcomeAccepted:
		d.Notice = "Evaluated again: accepted — the delivery is a run now."
	default:
		d.Notice = "Evaluated again: " + string(res.Outcome) + "."
	}
	return Render(c, http.StatusOK, views.RedeliverAnswer(d))
}
