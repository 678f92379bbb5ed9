package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/forge"
	"anvil/domain/internal/dbutil"
)

// The delivery ledger's part of an acceptance group (see acceptance.go):
// the webhook rows and ledger rows of the group's deliveries are read in
// one query under the projects' locks, each delivery is decided in memory
// in arrival order, and the ledger is written in one statement.

// Deliver decides a verified, normalized delivery to projectID in an
// acceptance group (decideDelivery), sealed being the secrets it was
// verified with; the webhook capability (domain/webhook) calls it once the
// delivery is verified. The result is the decision recorded in the ledger.
func (q *Queue) Deliver(projectID uuid.UUID, provider forge.Provider, pl forge.Payload, sealed SealedSecrets) (DeliveryResult, error) {
	j := &acceptJob{projectID: projectID, delivery: &deliveryJob{provider: provider, pl: pl, sealed: sealed}}
	if err := q.submit(j); err != nil {
		return DeliveryResult{}, err
	}
	return j.delivery.res, nil
}

// deliveryJob is a verified, normalized delivery waiting in a group.
type deliveryJob struct {
	provider forge.Provider
	pl       forge.Payload
	sealed   SealedSecrets // the secrets it was verified with
	res      DeliveryResult
	again    *redelivery // an evaluation again from the ledger (Redeliver)
}

type ledgerKey struct {
	project  uuid.UUID
	provider string
	id       string
}

// ledgerEntry is one delivery id as the group sees it.
type ledgerEntry struct {
	configured, enabled bool          // the webhook of this project and provider
	sealed              SealedSecrets // its secrets, as stored

	exists     bool // a ledger row holds a decision
	outcome    string
	runID      *uuid.UUID
	receivedAt time.Time

	expired  bool      // the stored row is past retention: deleted, decided anew
	attempts int       // copies of this id seen by the group
	row      *Delivery // a decision this group made, to store
	// overwrite: an admin's evaluation again replaces a stored outcome
	// other than queue_full (see redelivery.decidesAnew).
	overwrite bool
}

// groupLedger is the ledger entries of a group's deliveries.
type groupLedger map[ledgerKey]*ledgerEntry

func deliveryKey(j *acceptJob) ledgerKey {
	return ledgerKey{j.projectID, string(j.delivery.provider), j.delivery.pl.DeliveryID}
}

// ledgerSQL reads, for every delivery of a group (arrays of project,
// provider and delivery id), its webhook's state and its ledger row.
const ledgerSQL = `SELECT u.ord, w.enabled, w.secret_enc, w.signing_token_enc, d.outcome, d.run_id, d.received_at
	FROM unnest($1::uuid[], $2::text[], $3::text[]) WITH ORDINALITY AS u(project_id, provider, delivery_id, ord)
	JOIN project_webhooks w ON w.project_id = u.project_id AND w.provider = u.provider
	LEFT JOIN project_webhook_deliveries d
		ON d.project_id = u.project_id AND d.provider = u.provider AND d.delivery_id = u.delivery_id`

// ledgerLookup is the ledger query of a group and the entries it fills.
type ledgerLookup struct {
	entries groupLedger
	keys    []ledgerKey // in query order
}

func ledgerQuery(group []*acceptJob) *ledgerLookup {
	l := &ledgerLookup{entries: groupLedger{}}
	for _, j := range group {
		if j.delivery == nil {
			continue
		}
		k := deliveryKey(j)
		if l.entries[k] == nil {
			l.entries[k] = &ledgerEntry{}
			l.keys = append(l.keys, k)
		}
	}
	return l
}

func (l *ledgerLookup) args() []any {
	projects, providers, ids := keyArrays(l.keys)
	return []any{projects, providers, ids}
}

// scan records the rows of ledgerSQL in their entries.
func (l *ledgerLookup) scan(rows dbutil.RowSource) error {
	for rows.Next() {
		var (
			ord        int64
			enabled    bool
			sealed     SealedSecrets
			outcome    *string
			runID      *uuid.UUID
			receivedAt *time.Time
		)
		if err := rows.Scan(&ord, &enabled, &sealed.Secret, &sealed.SigningToken, &outcome, &runID, &receivedAt); err != nil {
			return fmt.Errorf("load webhooks and ledger: %w", err)
		}
		i := int(ord) - 1
		if i < 0 || i >= len(l.keys) {
			continue
		}
		e := l.entries[l.keys[i]]
		e.configured, e.enabled, e.sealed = true, enabled, sealed
		if outcome != nil && receivedAt != nil {
			e.exists, e.outcome, e.runID, e.receivedAt = true, *outcome, runID, *receivedAt
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load webhooks and ledger: %w", err)
	}
	return nil
}

// loadLedger reads, for every delivery of the group, its webhook's state
// and its ledger row (re-read under the lock: the webhook may have been
// disabled or deleted since the route verified the delivery).
func loadLedger(ctx context.Context, tx bun.Tx, group []*acceptJob) (groupLedger, error) {
	l := ledgerQuery(group)
	if len(l.keys) == 0 {
		return l.entries, nil
	}
	rows, err := tx.Tx.QueryContext(ctx, ledgerSQL, l.args()...)
	if err != nil {
		return nil, fmt.Errorf("load webhooks and ledger: %w", err)
	}
	defer rows.Close()
	if err := l.scan(rows); err != nil {
		return nil, err
	}
	return l.entries, nil
}

// decideDelivery decides one delivery of the group (docs/contracts/webhooks.md,
// "Classification" and "The ledger"):
//
//   - a delivery id already in the ledger replays its stored outcome
//     without reprocessing — except queue_full, which is re-evaluated and,
//     when accepted, becomes accepted with its run;
//   - a row past the retention window but not yet swept is a new delivery;
//   - otherwise the payload is classified against the project's default
//     branch; an accepted push becomes a run pinned to its commit SHA, or
//     queue_full when the queue is full.
//
// A missing or disabled webhook is refused, and so is a delivery verified
// with secrets the webhook no longer has; nothing is recorded. It returns
// the run to insert, if any.
func (q *Queue) decideDelivery(j *acceptJob, p *domain.Project, st *queueState, l groupLedger, now time.Time, pos *positions) *Run {
	d := j.delivery
	e := l[deliveryKey(j)]
	switch {
	case e == nil || !e.configured:
		j.err = domain.ErrWebhookNotConfigured
		return nil
	case e.sealed != d.sealed:
		j.err = domain.ErrStaleMaterial
		return nil
	case !e.enabled:
		j.err = domain.ErrWebhookDisabled
		return nil
	}
	if e.exists && e.row == nil && now.Sub(e.receivedAt) >= DeliveryRetention {
		e.expired, e.exists = true, false
	}
	if e.exists && e.outcome != string(forge.OutcomeQueueFull) && !d.again.decidesAnew(e) {
		// A duplicate: the stored decision stands (docs/contracts/webhooks.md).
		e.attempts++
		d.res = DeliveryResult{Outcome: forge.Outcome(e.outcome), RunID: e.runID, Replayed: true}
		return nil
	}
	pl := d.pl
	outcome := forge.ClassifyWith(pl, p.RunsBranch)
	var run *Run
	if outcome == forge.OutcomeAccepted {
		if !validSHA(pl.CommitSHA) {
			j.err = domain.Invalid("invalid_commit_sha", "commit SHA must be 40 or 64 lower-case hex characters")
			return nil
		}
		sha, prov, id := pl.CommitSHA, string(d.provider), pl.DeliveryID
		trigger := TriggerWebhook
		if pl.Kind == forge.KindPullRequest {
			trigger = TriggerPullRequest
		}
		// A fork's pull request is never accepted (forge.Classify); were
		// one ever, its run would still get no secrets (docs/runs.md, "Run secrets").
		fork := pl.PullRequest != nil && pl.PullRequest.Fork
		r, err := q.admit(p, st, AcceptSpec{Trigger: trigger, Branch: pl.Branch,
			CommitSHA: &sha, Provider: &prov, DeliveryID: &id, FromFork: fork}, now, pos)
		switch {
		case err == nil:
			run = r
		case errors.Is(err, domain.ErrQueueFull):
			outcome = forge.OutcomeQueueFull
		default:
			j.err = err
			return nil
		}
	}
	d.res = DeliveryResult{Outcome: outcome}
	if run != nil {
		d.res.RunID = &run.ID
	}
	branch := pl.Branch
	if branch == "" && pl.Kind == forge.KindBranchDelete {
		branch = pl.Ref // Gitea's delete event names the branch bare
	}
	if !e.exists {
		e.receivedAt = now
	}
	e.exists, e.outcome, e.runID = true, string(outcome), d.res.RunID
	e.attempts++
	e.row = &Delivery{ProjectID: j.projectID, Provider: string(d.provider), DeliveryID: pl.DeliveryID, Outcome: string(outcome),
		Event: pl.Event, Kind: string(pl.Kind), Ref: pl.Ref, Branch: branch, CommitSHA: pl.CommitSHA,
		RunID: d.res.RunID, ReceivedAt: e.receivedAt, Reason: forge.IgnoredReason(pl, p.DefaultBranch), Payload: storedPayload(pl)}
	return run
}

// sortedKeys orders the touched entries, so concurrent groups write the
// ledger's rows in one order.
func (l groupLedger) sortedKeys(keep func(*ledgerEntry) bool) []ledgerKey {
	var ks []ledgerKey
	for k, e := range l {
		if keep(e) {
			ks = append(ks, k)
		}
	}
	slices.SortFunc(ks, func(a, b ledgerKey) int {
		if c := slices.Compare(a.project[:], b.project[:]); c != 0 {
			return c
		}
		if c := strings.Compare(a.provider, b.provider); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	return ks
}

// record writes the group's decisions in tx (recordStmts).
func (l groupLedger) record(ctx context.Context, tx bun.Tx, now time.Time) error {
	for _, st := range l.recordStmts(now) {
		if _, err := tx.Tx.ExecContext(ctx, st.SQL, st.Args...); err != nil {
			return fmt.Errorf("record deliveries: %w", err)
		}
	}
	return nil
}

// The statements of recordStmts.
const (
	deleteExpiredSQL = `DELETE FROM project_webhook_deliveries d
		USING unnest($1::uuid[], $2::text[], $3::text[]) AS u(p, pr, id)
		WHERE d.project_id = u.p AND d.provider = u.pr AND d.delivery_id = u.id`
	upsertDeliveriesSQL = `INSERT INTO project_webhook_deliveries AS d
			(project_id, provider, delivery_id, outcome, event, kind, ref, branch, commit_sha, run_id, received_at, updated_at, attempts, reason, payload)
		SELECT u.p, u.pr, u.id, u.o, u.ev, u.k, u.ref, u.b, u.sha, u.run, u.recv, $1, u.n, u.why, u.pl::jsonb
		FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[],
			$11::uuid[], $12::timestamptz[], $13::int[], $14::text[], $15::text[]) AS u(p, pr, id, o, ev, k, ref, b, sha, run, recv, n, why, pl)
		ON CONFLICT (project_id, provider, delivery_id) DO UPDATE
		SET outcome = CASE WHEN d.outcome = 'queue_full' THEN EXCLUDED.outcome ELSE d.outcome END,
			reason = CASE WHEN d.outcome = 'queue_full' THEN EXCLUDED.reason ELSE d.reason END,
			run_id = CASE WHEN d.outcome = 'queue_full' THEN EXCLUDED.run_id ELSE d.run_id END,
			payload = COALESCE(d.payload, EXCLUDED.payload),
			updated_at = EXCLUDED.updated_at, attempts = d.attempts + EXCLUDED.attempts`
	countAttemptsSQL = `UPDATE project_webhook_deliveries d SET attempts = d.attempts + u.n, updated_at = $1
		FROM unnest($2::uuid[], $3::text[], $4::text[], $5::int[]) AS u(p, pr, id, n)
		WHERE d.project_id = u.p AND d.provider = u.pr AND d.delivery_id = u.id`
)

// recordStmts is the statements that write the group's decisions: first
// the deletion of stored rows past retention that the group decided anew
// (the periodic sweep had not reached them yet); then the rows it decided
// (new ids, and queue_full rows re-evaluated) in one upsert, with the
// normalized payload each was decided from; then the ignored rows an admin
// had evaluated again (webhook_redeliver.go); then the attempts of the
// duplicates it replayed. Only a queue_full row may be
// overwritten: every other stored outcome is final, whatever happens to
// the lock. Each statement meets its rows in key order, so concurrent
// groups lock the ledger's rows in one order.
func (l groupLedger) recordStmts(now time.Time) []dbutil.Stmt {
	var out []dbutil.Stmt
	if expired := l.sortedKeys(func(e *ledgerEntry) bool { return e.expired }); len(expired) > 0 {
		projects, providers, ids := keyArrays(expired)
		out = append(out, dbutil.Stmt{SQL: deleteExpiredSQL, Args: []any{projects, providers, ids}})
	}
	if decided := l.sortedKeys(func(e *ledgerEntry) bool { return e.row != nil && !e.overwrite }); len(decided) > 0 {
		n := len(decided)
		var (
			projects, runs                      = make([]pgtype.UUID, n), make([]pgtype.UUID, n)
			providers, ids, outcomes            = make([]string, n), make([]string, n), make([]string, n)
			events, kinds, refs, branches, shas = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
			received                            = make([]time.Time, n)
			reasons                             = make([]string, n)
			attempts                            = make([]int32, n)
			payloads                            = make([]pgtype.Text, n)
		)
		for i, k := range decided {
			e := l[k]
			d := e.row
			projects[i], providers[i], ids[i], outcomes[i] = dbutil.PgUUID(d.ProjectID), d.Provider, d.DeliveryID, d.Outcome
			events[i], kinds[i], refs[i], branches[i], shas[i] = d.Event, d.Kind, d.Ref, d.Branch, d.CommitSHA
			runs[i] = dbutil.PgUUIDPtr(d.RunID)
			received[i], attempts[i], reasons[i] = d.ReceivedAt, int32(e.attempts), d.Reason
			payloads[i] = payloadText(d.Payload)
		}
		out = append(out, dbutil.Stmt{SQL: upsertDeliveriesSQL, Args: []any{now, projects, providers, ids, outcomes, events, kinds, refs, branches, shas,
			runs, received, attempts, reasons, payloads}})
	}
	if again := l.sortedKeys(func(e *ledgerEntry) bool { return e.row != nil && e.overwrite }); len(again) > 0 {
		out = append(out, overwriteStmt(l, again, now))
	}
	if replayed := l.sortedKeys(func(e *ledgerEntry) bool { return e.row == nil && e.attempts > 0 }); len(replayed) > 0 {
		projects, providers, ids := keyArrays(replayed)
		attempts := make([]int32, len(replayed))
		for i, k := range replayed {
			attempts[i] = int32(l[k].attempts)
		}
		out = append(out, dbutil.Stmt{SQL: countAttemptsSQL, Args: []any{now, projects, providers, ids, attempts}})
	}
	return out
}

// keyArrays is keys as the three key columns' arrays.
func keyArrays(keys []ledgerKey) ([]pgtype.UUID, []string, []string) {
	projects, providers, ids := make([]pgtype.UUID, len(keys)), make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		projects[i], providers[i], ids[i] = dbutil.PgUUID(k.project), k.provider, k.id
	}
	return projects, providers, ids
}

// deliveryEvent is the live event published for every delivery handled.
type deliveryEvent struct {
	Kind       string    `json:"kind"`
	OrgID      uuid.UUID `json:"org_id"`
	ProjectID  uuid.UUID `json:"project_id"`
	Provider   string    `json:"provider"`
	DeliveryID string    `json:"delivery_id"`
	Outcome    string    `json:"outcome"`
}

// publishDeliveries sends the live events of the group's decided
// deliveries, once the transaction commits.
func publishDeliveries(ctx context.Context, tx bun.Tx, group []*acceptJob, byID map[uuid.UUID]*domain.Project) error {
	for _, j := range group {
		if j.delivery == nil || j.err != nil || j.delivery.res.Outcome == "" {
			continue
		}
		p := byID[j.projectID]
		b, err := json.Marshal(deliveryEvent{Kind: "delivery", OrgID: p.OrgID, ProjectID: p.ID, Provider: string(j.delivery.provider),
			DeliveryID: j.delivery.pl.DeliveryID, Outcome: string(j.delivery.res.Outcome)})
		if err != nil {
			return err
		}
		if err := domain.Notify(ctx, tx, string(b)); err != nil {
			return err
		}
	}
	return nil
}

// DeliveryRetention is how long a delivery stays in the ledger, and so the
// window in which a redelivery of the same id is recognised (docs/contracts/webhooks.md, "The ledger").
const DeliveryRetention = 72 * time.Hour

// SealedSecrets is a webhook's secrets as stored: AES-GCM ciphertexts,
// which change with every rotation (a fresh nonce each time).
type SealedSecrets struct{ Secret, SigningToken string }

// Delivery is one ledger row.
type Delivery struct {
	bun.BaseModel `bun:"table:project_webhook_deliveries"`
	ProjectID     uuid.UUID  `bun:"project_id,pk,type:uuid" json:"project_id"`
	Provider      string     `bun:"provider,pk" json:"provider"`
	DeliveryID    string     `bun:"delivery_id,pk" json:"delivery_id"`
	Outcome       string     `bun:"outcome" json:"outcome"`
	Event         string     `bun:"event" json:"event"`
	Kind          string     `bun:"kind" json:"kind"`
	Ref           string     `bun:"ref" json:"ref"`
	Branch        string     `bun:"branch" json:"branch"`
	CommitSHA     string     `bun:"commit_sha" json:"commit_sha"`
	RunID         *uuid.UUID `bun:"run_id,type:uuid" json:"run_id"`
	ReceivedAt    time.Time  `bun:"received_at" json:"received_at"`
	UpdatedAt     time.Time  `bun:"updated_at" json:"updated_at"`
	Attempts      int        `bun:"attempts" json:"attempts"`
	// Reason says why a delivery was ignored where the outcome alone does
	// not (a pull request from a fork, say).
	Reason string `bun:"reason" json:"reason,omitempty"`
	// Payload is the delivery as the classifier read it, kept so that it
	// can be evaluated again (Redeliver); nil for rows older than it and
	// for bodies that could not be read.
	Payload *forge.Payload `bun:"payload,type:jsonb" json:"payload"`
}

// DeliveryResult is what the public route answers: the stored outcome, the
// run it made (accepted only) and whether it was replayed from the ledger.
type DeliveryResult struct {
	Outcome  forge.Outcome
	RunID    *uuid.UUID
	Replayed bool
}
