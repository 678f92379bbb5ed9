package run

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/forge"
	"anvil/domain/internal/dbutil"
)

// The acceptance's part of evaluating a delivery again
// (docs/contracts/webhooks.md, "Evaluating a delivery again"; the refusals
// and the webhook's material are domain/webhook's, webhook_redeliver.go):
// every ledger row keeps the normalized payload the classifier read, and
// Redeliver hands it to an acceptance group as a forge's own redelivery
// goes — decideDelivery, the ledger's one upsert — so the ledger records
// the new outcome on the same delivery id. An admin's evaluation of a
// delivery that was ignored replaces its stored outcome; an accepted
// delivery never makes a second run.

// Redeliver decides pl, read back from the ledger row whose stored outcome
// was before, in an acceptance group as Deliver does, sealed being the
// webhook's current secrets and by the person who asked (their
// organisation must own projectID; an admin's evaluation decides a stored
// outcome other than queue_full anew). The group records the audit entry
// (domain.AuditDeliveryEvaluated) in its transaction.
func (q *Queue) Redeliver(projectID uuid.UUID, provider forge.Provider, pl forge.Payload, sealed SealedSecrets, by *domain.Principal, before string) (DeliveryResult, error) {
	again := &redelivery{by: by, anew: by.AtLeast(domain.RoleAdmin), before: before}
	j := &acceptJob{projectID: projectID, orgID: by.OrgID, delivery: &deliveryJob{provider: provider, pl: pl, sealed: sealed, again: again}}
	if err := q.submit(j); err != nil {
		return DeliveryResult{}, err
	}
	return j.delivery.res, nil
}

// redelivery is what a delivery evaluated again from the ledger carries
// through its acceptance group.
type redelivery struct {
	by     *domain.Principal
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
func overwriteStmt(l groupLedger, keys []ledgerKey, now time.Time) dbutil.Stmt {
	n := len(keys)
	projects, providers, ids := keyArrays(keys)
	outcomes, runs, reasons := make([]string, n), make([]pgtype.UUID, n), make([]string, n)
	attempts, payloads := make([]int32, n), make([]pgtype.Text, n)
	for i, k := range keys {
		e := l[k]
		d := e.row
		outcomes[i], runs[i], reasons[i] = d.Outcome, dbutil.PgUUIDPtr(d.RunID), d.Reason
		attempts[i], payloads[i] = int32(e.attempts), payloadText(d.Payload)
	}
	return dbutil.Stmt{SQL: overwriteDeliveriesSQL, Args: []any{now, projects, providers, ids, outcomes, runs, reasons, attempts, payloads}}
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
func recordRedeliveries(ctx context.Context, tx bun.Tx, group []*acceptJob, byID map[uuid.UUID]*domain.Project) error {
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
		if err := domain.RecordAudit(ctx, tx, d.again.by, domain.AuditDeliveryEvaluated, p.Slug+"/"+string(d.provider)+"/"+d.pl.DeliveryID, detail); err != nil {
			return err
		}
	}
	return nil
}
