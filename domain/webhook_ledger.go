package domain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"anvil/domain/forge"
)

// The delivery ledger's part of an acceptance group (see acceptance.go):
// the webhook rows and ledger rows of the group's deliveries are read in
// one query under the projects' locks, each delivery is decided in memory
// in arrival order, and the ledger is written in one statement.

// deliveryJob is a verified, normalized delivery waiting in a group.
type deliveryJob struct {
	provider forge.Provider
	pl       forge.Payload
	res      DeliveryResult
}

type ledgerKey struct {
	project  uuid.UUID
	provider string
	id       string
}

// ledgerEntry is one delivery id as the group sees it.
type ledgerEntry struct {
	configured, enabled bool // the webhook of this project and provider

	exists     bool // a ledger row holds a decision
	outcome    string
	runID      *uuid.UUID
	receivedAt time.Time

	expired  bool      // the stored row is past retention: deleted, decided anew
	attempts int       // copies of this id seen by the group
	row      *Delivery // a decision this group made, to store
}

// groupLedger is the ledger entries of a group's deliveries.
type groupLedger map[ledgerKey]*ledgerEntry

func deliveryKey(j *acceptJob) ledgerKey {
	return ledgerKey{j.projectID, string(j.delivery.provider), j.delivery.pl.DeliveryID}
}

// ledgerSQL reads, for every delivery of a group (arrays of project,
// provider and delivery id), its webhook's state and its ledger row.
const ledgerSQL = `SELECT u.ord, w.enabled, d.outcome, d.run_id, d.received_at
	FROM unnest(?::uuid[], ?::text[], ?::text[]) WITH ORDINALITY AS u(project_id, provider, delivery_id, ord)
	JOIN project_webhooks w ON w.project_id = u.project_id AND w.provider = u.provider
	LEFT JOIN project_webhook_deliveries d
		ON d.project_id = u.project_id AND d.provider = u.provider AND d.delivery_id = u.delivery_id`

// ledgerLookup is the ledger query of a group and the entries it fills.
type ledgerLookup struct {
	entries                  groupLedger
	n                        int
	projects, providers, ids []string
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
			l.projects, l.providers, l.ids = append(l.projects, k.project.String()), append(l.providers, k.provider), append(l.ids, k.id)
			l.n++
		}
	}
	return l
}

func (l *ledgerLookup) args() []any {
	return []any{pgdialect.Array(l.projects), pgdialect.Array(l.providers), pgdialect.Array(l.ids)}
}

// apply records one row of ledgerSQL in its entry.
func (l *ledgerLookup) apply(r ledgerRow) {
	i := r.Ord - 1
	if i < 0 || i >= l.n {
		return
	}
	e := l.entries[ledgerKey{uuid.MustParse(l.projects[i]), l.providers[i], l.ids[i]}]
	e.configured, e.enabled = true, r.Enabled
	if r.Outcome != nil && r.ReceivedAt != nil {
		e.exists, e.outcome, e.runID, e.receivedAt = true, *r.Outcome, r.RunID, *r.ReceivedAt
	}
}

// loadLedger reads, for every delivery of the group, its webhook's state
// and its ledger row (re-read under the lock: the webhook may have been
// disabled or deleted since the route verified the delivery).
func loadLedger(ctx context.Context, tx bun.Tx, group []*acceptJob) (groupLedger, error) {
	l := ledgerQuery(group)
	if l.n == 0 {
		return l.entries, nil
	}
	var rows []ledgerRow
	if err := tx.NewRaw(ledgerSQL, l.args()...).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("load webhooks and ledger: %w", err)
	}
	for _, r := range rows {
		l.apply(r)
	}
	return l.entries, nil
}

// decideDelivery decides one delivery of the group (seed 000 §7–9 and the
// 2026-03-22 addendum):
//
//   - a delivery id already in the ledger replays its stored outcome
//     without reprocessing — except queue_full, which is re-evaluated and,
//     when accepted, becomes accepted with its run;
//   - a row past the retention window but not yet swept is a new delivery;
//   - otherwise the payload is classified against the project's default
//     branch; an accepted push becomes a run pinned to its commit SHA, or
//     queue_full when the queue is full.
//
// A missing or disabled webhook is refused, and nothing is recorded. It
// returns the run to insert, if any.
func (q *Queue) decideDelivery(j *acceptJob, p *Project, st *queueState, l groupLedger, now time.Time, pos *positions) *Run {
	d := j.delivery
	e := l[deliveryKey(j)]
	switch {
	case e == nil || !e.configured:
		j.err = ErrWebhookNotConfigured
		return nil
	case !e.enabled:
		j.err = ErrWebhookDisabled
		return nil
	}
	if e.exists && e.row == nil && now.Sub(e.receivedAt) >= DeliveryRetention {
		e.expired, e.exists = true, false
	}
	if e.exists && e.outcome != string(forge.OutcomeQueueFull) {
		// A duplicate: the stored decision stands (seed 000 §9).
		e.attempts++
		d.res = DeliveryResult{Outcome: forge.Outcome(e.outcome), RunID: e.runID, Replayed: true}
		return nil
	}
	pl := d.pl
	outcome := forge.Classify(pl, p.DefaultBranch)
	var run *Run
	if outcome == forge.OutcomeAccepted {
		if !validSHA(pl.CommitSHA) {
			j.err = Invalid("invalid_commit_sha", "commit SHA must be 40 or 64 lower-case hex characters")
			return nil
		}
		sha, prov, id := pl.CommitSHA, string(d.provider), pl.DeliveryID
		r, err := q.admit(p, st, AcceptSpec{Trigger: TriggerWebhook, Branch: pl.Branch,
			CommitSHA: &sha, Provider: &prov, DeliveryID: &id}, now, pos)
		switch {
		case err == nil:
			run = r
		case errors.Is(err, ErrQueueFull):
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
		RunID: d.res.RunID, ReceivedAt: e.receivedAt}
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

// record writes the group's decisions in tx (recordSQL).
func (l groupLedger) record(ctx context.Context, tx bun.Tx, db *bun.DB, now time.Time) error {
	for _, q := range l.recordSQL(db, now) {
		if _, err := tx.Tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("record deliveries: %w", err)
		}
	}
	return nil
}

// recordSQL is the statements that write the group's decisions: first the
// deletion of stored rows past retention that the group decided anew (the
// periodic sweep had not reached them yet); then the rows it decided (new
// ids, and queue_full rows re-evaluated) in one upsert; then the attempts
// of the duplicates it replayed. Only a queue_full row may be overwritten:
// every other stored outcome is final, whatever happens to the lock.
func (l groupLedger) recordSQL(db *bun.DB, now time.Time) []string {
	var out []string
	for _, k := range l.sortedKeys(func(e *ledgerEntry) bool { return e.expired }) {
		out = append(out, formatSQL(db, `DELETE FROM project_webhook_deliveries WHERE project_id = ? AND provider = ? AND delivery_id = ?`,
			k.project, k.provider, k.id))
	}
	decided := l.sortedKeys(func(e *ledgerEntry) bool { return e.row != nil })
	if len(decided) > 0 {
		n := len(decided)
		var (
			projects, providers, ids, outcomes = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
			events, kinds, refs, branches      = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
			shas, runs                         = make([]string, n), make([]string, n)
			received                           = make([]time.Time, n)
			attempts                           = make([]int64, n)
		)
		for i, k := range decided {
			e := l[k]
			d := e.row
			projects[i], providers[i], ids[i], outcomes[i] = d.ProjectID.String(), d.Provider, d.DeliveryID, d.Outcome
			events[i], kinds[i], refs[i], branches[i], shas[i] = d.Event, d.Kind, d.Ref, d.Branch, d.CommitSHA
			if d.RunID != nil {
				runs[i] = d.RunID.String()
			}
			received[i], attempts[i] = d.ReceivedAt, int64(e.attempts)
		}
		out = append(out, formatSQL(db, `INSERT INTO project_webhook_deliveries AS d
				(project_id, provider, delivery_id, outcome, event, kind, ref, branch, commit_sha, run_id, received_at, updated_at, attempts)
			SELECT u.p, u.pr, u.id, u.o, u.ev, u.k, u.ref, u.b, u.sha, NULLIF(u.run, '')::uuid, u.recv, ?, u.n
			FROM unnest(?::uuid[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::timestamptz[], ?::int[])
				AS u(p, pr, id, o, ev, k, ref, b, sha, run, recv, n)
			ON CONFLICT (project_id, provider, delivery_id) DO UPDATE
			SET outcome = CASE WHEN d.outcome = 'queue_full' THEN EXCLUDED.outcome ELSE d.outcome END,
				run_id = CASE WHEN d.outcome = 'queue_full' THEN EXCLUDED.run_id ELSE d.run_id END,
				updated_at = EXCLUDED.updated_at, attempts = d.attempts + EXCLUDED.attempts`,
			now, pgdialect.Array(projects), pgdialect.Array(providers), pgdialect.Array(ids), pgdialect.Array(outcomes),
			pgdialect.Array(events), pgdialect.Array(kinds), pgdialect.Array(refs), pgdialect.Array(branches),
			pgdialect.Array(shas), pgdialect.Array(runs), pgdialect.Array(received), pgdialect.Array(attempts)))
	}
	for _, k := range l.sortedKeys(func(e *ledgerEntry) bool { return e.row == nil && e.attempts > 0 }) {
		out = append(out, formatSQL(db, `UPDATE project_webhook_deliveries SET attempts = attempts + ?, updated_at = ?
			WHERE project_id = ? AND provider = ? AND delivery_id = ?`, l[k].attempts, now, k.project, k.provider, k.id))
	}
	return out
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
func publishDeliveries(ctx context.Context, tx bun.Tx, group []*acceptJob, byID map[uuid.UUID]*Project) error {
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
		if err := notify(ctx, tx, string(b)); err != nil {
			return err
		}
	}
	return nil
}
