package domain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/uptrace/bun"

	"anvil/domain/forge"
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

// AuditDeliveryEvaluated is the audit kind of an evaluation again.
const AuditDeliveryEvaluated = "webhook.delivery_evaluated"

// redelivery is what a delivery evaluated again from the ledger carries
// through its acceptance group.
type redelivery struct {
	by     *Principal
	anew   bool   // an admin's: a stored outcome other than queue_full is decided anew
	before string // the stored outcome it was asked for
}

// decidesAnew reports whether the stored decision of e is replaced rather
// than replayed, and marks e so that recordStmts overwrites its row. Only an
// admin's evaluation of an ignored delivery does; an accepted one keeps its
// run (one delivery, one run).
func (r *redelivery) decidesAnew(e *ledgerEntry) bool {
	if r == nil || !r.anew || e.outcome == string(forge.OutcomeAccepted) {
		return false
	}
	e.overwrite = true
	return true
}

// kindMalformed is the kind the public route gives a verified delivery
// whose body or event header could not be read (web/webhook_public.go).
const kindMalformed forge.Kind = "malformed"

// storedPayload is the payload the ledger keeps for pl: none for a body
// that could not be read (kind "malformed"), which can never become a run.
func storedPayload(pl forge.Payload) *forge.Payload {
	if pl.Kind == kindMalformed {
		return nil
	}
	return &pl
}

// payloadText is p as the ledger's jsonb parameter (NULL for none).
func payloadText(p *forge.Payload) pgtype.Text {
	if p == nil {
		return pgtype.Text{}
	}
	b, err := json.Marshal(p)
	if err != nil {
		return pgtype.Text{} // a Payload always marshals; without one the row is only not re-evaluable
	}
	return pgtype.Text{String: string(b), Valid: true}
}

// overwriteDeliveriesSQL replaces the stored decision of rows an admin had
// evaluated again (never an accepted one).
const overwriteDeliveriesSQL = `UPDATE project_webhook_deliveries d
	SET outcome = u.o, reason = u.why, run_id = u.run, payload = COALESCE(d.payload, u.pl::jsonb),
		updated_at = $1, attempts = d.attempts + u.n
	FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::uuid[], $7::text[], $8::int[], $9::text[])
		AS u(p, pr, id, o, run, why, n, pl)
	WHERE d.project_id = u.p AND d.provider = u.pr AND d.delivery_id = u.id AND d.outcome <> 'accepted'`

// overwriteStmt is overwriteDeliveriesSQL for the entries keys, in key order.
func overwriteStmt(l groupLedger, keys []ledgerKey, now time.Time) stmt {
	n := len(keys)
	projects, providers, ids := keyArrays(keys)
	outcomes, runs, reasons := make([]string, n), make([]pgtype.UUID, n), make([]string, n)
	attempts, payloads := make([]int32, n), make([]pgtype.Text, n)
	for i, k := range keys {
		e := l[k]
		d := e.row
		outcomes[i], runs[i], reasons[i] = d.Outcome, pgUUIDPtr(d.RunID), d.Reason
		attempts[i], payloads[i] = int32(e.attempts), payloadText(d.Payload)
	}
	return stmt{overwriteDeliveriesSQL, []any{now, projects, providers, ids, outcomes, runs, reasons, attempts, payloads}}
}

// redelivers reports whether a group holds an evaluation again: its audit
// entry is written in the group's transaction, which the general path
// (tryGroup's) has and the two-round-trip one does not.
func redelivers(group []*acceptJob) bool {
	for _, j := range group {
		if j.delivery != nil && j.delivery.again != nil {
			return true
		}
	}
	return false
}

// recordRedeliveries writes the audit entries of the group's evaluations
// again, in the group's transaction.
func recordRedeliveries(ctx context.Context, tx bun.Tx, group []*acceptJob, byID map[uuid.UUID]*Project) error {
	for _, j := range group {
		d := j.delivery
		if d == nil || d.again == nil || j.err != nil || d.res.Outcome == "" {
			continue
		}
		p := byID[j.projectID]
		if p == nil {
			continue
		}
		detail := map[string]any{"before": d.again.before, "outcome": string(d.res.Outcome), "replayed": d.res.Replayed}
		if d.res.RunID != nil {
			detail["run_id"] = d.res.RunID.String()
		}
		if err := recordAudit(ctx, tx, d.again.by, AuditDeliveryEvaluated, p.Slug+"/"+string(d.provider)+"/"+d.pl.DeliveryID, detail); err != nil {
			return err
		}
	}
	return nil
}

// Refusals of Redeliver a person can act on.
var (
	// ErrNoStoredPayload: the ledger row keeps no payload to evaluate.
	ErrNoStoredPayload = &Error{Kind: ErrConflict, Code: "no_stored_payload",
		Message: "this delivery cannot be evaluated again: anvil keeps no payload for it (it was recorded before anvil kept payloads, or its body could not be read); use the forge's own redeliver button"}
	// ErrDeliveryAccepted: an accepted delivery already made its run.
	ErrDeliveryAccepted = &Error{Kind: ErrConflict, Code: "delivery_accepted",
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
func (w *Webhooks) Redeliver(ctx context.Context, pr *Principal, projectID uuid.UUID, providerName, deliveryID string) (DeliveryResult, error) {
	if err := requireRole(pr, RoleMember); err != nil {
		return DeliveryResult{}, err
	}
	p, err := parseProvider(providerName)
	if err != nil {
		return DeliveryResult{}, err
	}
	if _, err := (&Projects{s: w.s}).Get(ctx, pr.OrgID, projectID); err != nil {
		return DeliveryResult{}, err
	}
	row := new(Delivery)
	err = w.s.DB.NewSelect().Model(row).
		Where("project_id = ? AND provider = ? AND delivery_id = ?", projectID, string(p), deliveryID).Scan(ctx)
	if isNoRows(err) {
		return DeliveryResult{}, NotFound("delivery")
	}
	if err != nil {
		return DeliveryResult{}, fmt.Errorf("load delivery %s: %w", deliveryID, err)
	}
	switch {
	case row.Outcome == string(forge.OutcomeAccepted):
		return DeliveryResult{}, ErrDeliveryAccepted
	case row.Outcome != string(forge.OutcomeQueueFull) && !pr.AtLeast(RoleAdmin):
		return DeliveryResult{}, Forbidden("you are a %s in this organisation; evaluating again a delivery that was %s needs the %s role or higher (a member may evaluate again a queue_full one)",
			pr.Role, row.Outcome, RoleAdmin)
	case row.Payload == nil:
		return DeliveryResult{}, ErrNoStoredPayload
	}
	pl := *row.Payload
	if pl.Provider != p || pl.DeliveryID != deliveryID {
		return DeliveryResult{}, ErrNoStoredPayload
	}
	again := &redelivery{by: pr, anew: pr.AtLeast(RoleAdmin), before: row.Outcome}
	// The material is read again once if it was rotated between the read
	// and the decision (ErrStaleMaterial), as the public route does.
	for try := 0; ; try++ {
		wh, err := w.loadRow(ctx, w.s.DB, projectID, p)
		if err != nil {
			return DeliveryResult{}, err
		}
		switch {
		case wh == nil:
			return DeliveryResult{}, Conflict("webhook_not_configured", "no %s webhook is configured for this project any more; a delivery is evaluated again only through its webhook", p)
		case !wh.Enabled:
			return DeliveryResult{}, Conflict("webhook_disabled", "the %s webhook is disabled; a disabled webhook accepts nothing (enable it first)", p)
		}
		j := &acceptJob{projectID: projectID, orgID: pr.OrgID, delivery: &deliveryJob{provider: p, pl: pl,
			sealed: sealedMaterial{wh.SecretEnc, wh.SigningTokenEnc}, again: again}}
		err = w.queue.submit(j)
		if errors.Is(err, ErrStaleMaterial) && try == 0 {
			continue
		}
		if err != nil {
			return DeliveryResult{}, err
		}
		res := j.delivery.res
		if res.Outcome == forge.OutcomeQueueFull {
			return res, &Error{Kind: ErrWebhookQueueFull, Code: "project_queue_full",
				Message: fmt.Sprintf("the project's queue still holds %d runs; the delivery stays queue_full (evaluate it again once a run has finished)", MaxQueued)}
		}
		return res, nil
	}
}
