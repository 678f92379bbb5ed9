package web

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/forge"
	"anvil/domain/webhook"
)

// maxWebhookBody caps a delivery. GitHub caps payloads at 25 MB but a push
// of an ordinary size is a few KB; 5 MiB leaves room for pushes of many
// commits while keeping one request from holding much memory.
const maxWebhookBody = 5 << 20

// deliveryAnswer is the body of every answer to a verified delivery
// (docs/contracts/webhooks.md, "Answers"); Error and Message only accompany queue_full.
type deliveryAnswer struct {
	Outcome string     `json:"outcome"`
	RunID   *uuid.UUID `json:"run_id"`
	Error   string     `json:"error,omitempty"`
	Message string     `json:"message,omitempty"`
}

// refuse answers a delivery that is not recorded. It writes the JSON itself
// rather than going through the error handler, whose 401 wording is about
// API tokens; a forge's delivery log should say what is wrong with the hook.
func refuse(c echo.Context, status int, code, msg string) error {
	return c.JSON(status, apiError{Error: code, Message: msg})
}

// webhookDeliver is the public route of every forge. Its order is the
// contract: size cap (413) → provider (404) → project (404) → webhook exists
// (401) → signature on the raw bytes, before any parsing (401) → enabled
// (403, told only to a caller who proved the secret) → delivery id (400) →
// normalization → the domain's decision. Nothing is recorded in the ledger
// before the signature verifies, and nothing when it is refused afterwards
// either; a refusal for a project that exists is only counted (per reason
// and hour, for the webhook page).
//
// Answers: 200 {"outcome", "run_id"} for accepted and ignored deliveries
// alike (the forge only needs to know it was handled; the outcome says
// how), 503 with Retry-After: 60 for queue_full. A duplicate is answered
// from the ledger with the header Anvil-Delivery-Replayed: true.
//
// A verified delivery whose body or event header cannot be read, but which
// carries a delivery id, is recorded as ignored_event with kind "malformed"
// and answered 200: it came from the forge, anvil will never run it, and a
// 4xx would make GitLab disable the hook over a delivery nobody can fix.
func (s *Server) webhookDeliver(c echo.Context) error {
	req := c.Request()
	if req.ContentLength > maxWebhookBody {
		return refuse(c, http.StatusRequestEntityTooLarge, "payload_too_large", "a webhook delivery must be at most 5 MiB")
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), req.Body, maxWebhookBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return refuse(c, http.StatusRequestEntityTooLarge, "payload_too_large", "a webhook delivery must be at most 5 MiB")
		}
		return refuse(c, http.StatusBadRequest, "unreadable_body", "the request body could not be read")
	}
	provider, err := forge.ParseProvider(c.Param("provider"))
	if err != nil {
		return refuse(c, http.StatusNotFound, "unknown_provider", "the provider must be github, gitlab or gitea (Forgejo uses gitea)")
	}
	projectID, err := uuid.Parse(c.Param("projectId"))
	if err != nil {
		return refuse(c, http.StatusNotFound, "not_found", "project not found")
	}
	v, done, err := s.verifyDelivery(c, projectID, provider, body, false)
	if done || err != nil {
		return err
	}
	payload, err := forge.Normalize(provider, req.Header, body)
	if err != nil {
		switch {
		case errors.Is(err, forge.ErrMissingDelivery):
			msg := "the delivery has no delivery id header (" + deliveryHeader(provider) + "), so it cannot be deduplicated"
			s.countRefusal(c, projectID, provider, webhook.RefusedMissingDeliveryID, msg)
			return refuse(c, http.StatusBadRequest, "missing_delivery_id", msg)
		case errors.Is(err, forge.ErrMalformed):
			id, idErr := forge.DeliveryID(provider, req.Header)
			if idErr != nil {
				msg := "the delivery id header must be 1–200 printable ASCII characters"
				s.countRefusal(c, projectID, provider, webhook.RefusedInvalidDeliveryID, msg)
				return refuse(c, http.StatusBadRequest, "invalid_delivery_id", msg)
			}
			payload = forge.Payload{Provider: provider, DeliveryID: id, Kind: "malformed", Event: printableOr(eventHeader(provider, req.Header), "")}
		default:
			return err
		}
	}
	res, err := s.Webhooks.Deliver(req.Context(), v, payload)
	if errors.Is(err, domain.ErrStaleMaterial) {
		// The secrets it was verified with were rotated away meanwhile (a
		// cached copy): verify again with what the webhook holds now.
		if v, done, err = s.verifyDelivery(c, projectID, provider, body, true); done || err != nil {
			return err
		}
		res, err = s.Webhooks.Deliver(req.Context(), v, payload)
	}
	if errors.Is(err, domain.ErrWebhookQueueFull) {
		c.Response().Header().Set("Retry-After", "60")
		return c.JSON(http.StatusServiceUnavailable, deliveryAnswer{Outcome: string(forge.OutcomeQueueFull),
			Error: "project_queue_full", Message: "the project's queue is full; the delivery is recorded and will be re-evaluated when it is sent again"})
	}
	if errors.Is(err, domain.ErrWebhookDisabled) {
		// Disabled between the verification and the decision.
		s.countRefusal(c, projectID, provider, webhook.RefusedDisabled, domain.ErrWebhookDisabled.Message)
	}
	if err != nil {
		return s.deliveryRefusal(c, err)
	}
	if res.Replayed {
		c.Response().Header().Set("Anvil-Delivery-Replayed", "true")
	}
	return c.JSON(http.StatusOK, deliveryAnswer{Outcome: string(res.Outcome), RunID: res.RunID})
}

// verifyDelivery verifies a delivery's raw bytes with the webhook's
// material: 404 for an unknown project, 401 for a missing webhook or a
// signature that does not verify, 403 for a disabled webhook (told only to a
// caller who proved the secret). done means the answer has been written.
// The secrets are dropped here; only their Verification goes on. Material
// comes from the domain's short-lived cache unless fresh; a delivery that
// does not verify with cached material is tried once more with fresh
// material (the secret may have been rotated by another process).
func (s *Server) verifyDelivery(c echo.Context, projectID uuid.UUID, provider forge.Provider, body []byte, fresh bool) (webhook.Verification, bool, error) {
	req := c.Request()
	load := s.Webhooks.CachedVerificationMaterial
	if fresh {
		load = s.Webhooks.VerificationMaterial
	}
	m, err := load(req.Context(), projectID, string(provider))
	if err != nil {
		if errors.Is(err, domain.ErrWebhookNotConfigured) {
			s.countRefusal(c, projectID, provider, webhook.RefusedNotConfigured, domain.ErrWebhookNotConfigured.Message)
		}
		return webhook.Verification{}, true, s.deliveryRefusal(c, err)
	}
	if err := forge.Verify(provider, req.Header, body, m.Secrets, time.Now()); err != nil {
		if m.Cached() {
			return s.verifyDelivery(c, projectID, provider, body, true)
		}
		// forge's reasons name headers, never secrets or signatures.
		why := reason(err)
		kind := webhook.RefusedInvalidSignature
		if strings.HasPrefix(why, "missing ") {
			kind = webhook.RefusedMissingSignature
		}
		s.countRefusal(c, projectID, provider, kind, why)
		return webhook.Verification{}, true, refuse(c, http.StatusUnauthorized, "invalid_signature", "the delivery could not be verified: "+why)
	}
	if !m.Enabled {
		s.countRefusal(c, projectID, provider, webhook.RefusedDisabled, domain.ErrWebhookDisabled.Message)
		return webhook.Verification{}, true, s.deliveryRefusal(c, domain.ErrWebhookDisabled)
	}
	return m.Verification(), false, nil
}

// countRefusal counts a refused delivery for the webhook page (the ledger
// keeps verified deliveries only). Only refusals write; a failure to count
// is logged and never changes the answer.
func (s *Server) countRefusal(c echo.Context, projectID uuid.UUID, provider forge.Provider, reason, detail string) {
	if err := s.Webhooks.CountRefusal(c.Request().Context(), projectID, string(provider), reason, detail); err != nil {
		s.log.Warn("webhook: refusal not counted", "request_id", c.Get(requestIDKey), "project_id", projectID, "error", err.Error())
	}
}

// deliveryRefusal answers the domain's refusals of a delivery.
func (s *Server) deliveryRefusal(c echo.Context, err error) error {
	var de *domain.Error
	if errors.As(err, &de) {
		switch de.Kind {
		case domain.ErrNotFound, domain.ErrUnauthorized, domain.ErrForbidden: //nolint:errorlint // Kind is a bare sentinel, never wrapped
			return refuse(c, statusOf(de.Kind), de.Code, de.Message)
		}
	}
	return err
}

// reason is the short explanation forge wraps in its sentinel.
func reason(err error) string {
	msg := err.Error()
	prefix := forge.ErrUnverified.Error() + ": "
	if len(msg) > len(prefix) && msg[:len(prefix)] == prefix {
		return msg[len(prefix):]
	}
	return "signature mismatch"
}

func deliveryHeader(p forge.Provider) string {
	switch p {
	case forge.GitHub:
		return "X-GitHub-Delivery"
	case forge.GitLab:
		return "Idempotency-Key or webhook-id"
	}
	return "X-Gitea-Delivery"
}

func eventHeader(p forge.Provider, h http.Header) string {
	switch p {
	case forge.GitHub:
		return h.Get("X-GitHub-Event")
	case forge.GitLab:
		return h.Get("X-Gitlab-Event")
	}
	if v := h.Get("X-Gitea-Event"); v != "" {
		return v
	}
	return h.Get("X-Forgejo-Event")
}

// printableOr keeps a header value for the ledger only when it is short,
// printable ASCII.
func printableOr(v, fallback string) string {
	if len(v) == 0 || len(v) > 100 {
		return fallback
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return fallback
		}
	}
	return v
}
