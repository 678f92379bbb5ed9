package webhook

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/forge"
	"anvil/domain/internal/dbutil"
	"anvil/domain/project"
	"anvil/domain/run"
)

// Evaluating a delivery again (docs/contracts/webhooks.md, "Evaluating a
// delivery again"): every ledger row keeps the normalized payload the
// classifier read, and a person can hand it to the acceptance again from the
// webhook page or the private API. It goes the way of the forge's own
// redelivery — Deliver's acceptance group, decideDelivery, the ledger's one
// upsert — with the webhook's current material, so the ledger records the
// new outcome on the same delivery id. A queue_full delivery becomes a run
// once the queue has room; that is a member's to do, as a manual run is. An
// admin may also evaluate again a delivery that was ignored (after changing
// the default branch or the branch filters, say): its stored outcome is then
// replaced by the new one. An accepted delivery never makes a second run.

// Refusals of Redeliver a person can act on.
var (
	// ErrNoStoredPayload: the ledger row keeps no payload to evaluate.
	ErrNoStoredPayload = &domain.Error{Kind: domain.ErrConflict, Code: "no_stored_payload",
		Message: "this delivery cannot be evaluated again: anvil keeps no payload for it (it was recorded before anvil kept payloads, or its body could not be read); use the forge's own redeliver button"}
	// ErrDeliveryAccepted: an accepted delivery already made its run.
	ErrDeliveryAccepted = &domain.Error{Kind: domain.ErrConflict, Code: "delivery_accepted",
		Message: "this delivery was accepted and made its run; a delivery makes one run at most (re-run that run instead)"}
)

// Redeliver evaluates a ledger entry again from its stored payload, through
// the acceptance path of a forge's own redelivery, and returns the new
// decision (docs/contracts/webhooks.md, "Evaluating a delivery again"). A
// member may evaluate a queue_full delivery; an admin any delivery that was
// not accepted. The webhook must still be configured and enabled: a
// disabled webhook accepts nothing, whoever sends. A queue that is still
// full is recorded (attempts + 1) and answered as Deliver answers it, with
// an error of kind ErrWebhookQueueFull beside the result.
func (w *Webhooks) Redeliver(ctx context.Context, pr *domain.Principal, projectID uuid.UUID, providerName, deliveryID string) (run.DeliveryResult, error) {
	if err := domain.RequireRole(pr, domain.RoleMember); err != nil {
		return run.DeliveryResult{}, err
	}
	p, err := parseProvider(providerName)
	if err != nil {
		return run.DeliveryResult{}, err
	}
	if _, err := project.NewProjects(w.s).Get(ctx, pr.OrgID, projectID); err != nil {
		return run.DeliveryResult{}, err
	}
	row := new(run.Delivery)
	err = w.s.DB.NewSelect().Model(row).
		Where("project_id = ? AND provider = ? AND delivery_id = ?", projectID, string(p), deliveryID).Scan(ctx)
	if dbutil.IsNoRows(err) {
		return run.DeliveryResult{}, domain.NotFound("delivery")
	}
	if err != nil {
		return run.DeliveryResult{}, fmt.Errorf("load delivery %s: %w", deliveryID, err)
	}
	switch {
	case row.Outcome == string(forge.OutcomeAccepted):
		return run.DeliveryResult{}, ErrDeliveryAccepted
	case row.Outcome != string(forge.OutcomeQueueFull) && !pr.AtLeast(domain.RoleAdmin):
		return run.DeliveryResult{}, domain.Forbidden("you are a %s in this organisation; evaluating again a delivery that was %s needs the %s role or higher (a member may evaluate again a queue_full one)",
			pr.Role, row.Outcome, domain.RoleAdmin)
	case row.Payload == nil:
		return run.DeliveryResult{}, ErrNoStoredPayload
	}
	pl := *row.Payload
	if pl.Provider != p || pl.DeliveryID != deliveryID {
		return run.DeliveryResult{}, ErrNoStoredPayload
	}
	// The material is read again once if it was rotated between the read
	// and the decision (domain.ErrStaleMaterial), as the public route does.
	for try := 0; ; try++ {
		wh, err := w.loadRow(ctx, w.s.DB, projectID, p)
		if err != nil {
			return run.DeliveryResult{}, err
		}
		switch {
		case wh == nil:
			return run.DeliveryResult{}, domain.Conflict("webhook_not_configured", "no %s webhook is configured for this project any more; a delivery is evaluated again only through its webhook", p)
		case !wh.Enabled:
			return run.DeliveryResult{}, domain.Conflict("webhook_disabled", "the %s webhook is disabled; a disabled webhook accepts nothing (enable it first)", p)
		}
		res, err := w.queue.Redeliver(projectID, p, pl, run.SealedSecrets{Secret: wh.SecretEnc, SigningToken: wh.SigningTokenEnc}, pr, row.Outcome)
		if errors.Is(err, domain.ErrStaleMaterial) && try == 0 {
			continue
		}
		if err != nil {
			return run.DeliveryResult{}, err
		}
		if res.Outcome == forge.OutcomeQueueFull {
			return res, &domain.Error{Kind: domain.ErrWebhookQueueFull, Code: "project_queue_full",
				Message: fmt.Sprintf("the project's queue still holds %d runs; the delivery stays queue_full (evaluate it again once a run has finished)", run.MaxQueued)}
		}
		return res, nil
	}
}
