package domain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/uptrace/bun"

	"anvil/domain/event"
)

// ErrFeedStore marks a failure of the store while ingesting: the database
// refused, broke the connection or did not answer within StoreTimeout. The
// ingest answers it with 503 and Retry-After, and the sender repeats the
// whole batch — safe, because the dedupe key counts every event once.
var ErrFeedStore = errors.New("feed store unavailable")

// IngestResult is the answer to one request: every event of the body has
// exactly one verdict, its id echoed as the sender spelled it.
type IngestResult struct {
	Accepted []string          `json:"accepted"`
	Rejected []event.Rejection `json:"rejected"`
}

// prepared is an event that passed every per-event check and is ready to be
// stored.
type prepared struct {
	ev      event.Event
	key     string // CanonicalID: the event half of the dedupe key
	policy  string
	fp      string
	payload string
	conn    uuid.UUID // the connection that sent it
}

// Ingest judges, scrubs and stores one request's events for a resolved
// sender, and groups the new ones into incidents — all before it returns, so
// the 202 that follows is a promise already kept.
//
// Per event, in this order: Validate; the binding of the token's project for
// the event's environment (exact, else '*'; none → no_binding, policy off →
// binding_disabled); user.ip_hash from clientAddr (the sender's value was
// never read); Scrub (redaction_failed); Fingerprint. A panic in any of it is
// that event's internal_error, not the batch's.
//
// Storage is one transaction for the whole batch, so either every accepted
// event is stored or none is. On a store failure the error wraps
// ErrFeedStore and the result holds no accepted events (nothing got
// through) and the rejections already decided.
func (f *Feed) Ingest(ctx context.Context, snd *FeedSender, clientAddr string, raws []json.RawMessage) (IngestResult, error) {
	now := f.s.Now()
	res := IngestResult{Accepted: make([]string, 0, len(raws)), Rejected: []event.Rejection{}}
	evs := make([]prepared, 0, len(raws))
	// One sender, one address, one moment: one pseudonym for the request.
	ipHash := event.IPHash(clientAddr, now, snd.ConnectionID.String())
	for _, raw := range raws {
		p, rej := f.prepare(raw, snd, ipHash)
		if rej != nil {
			res.Rejected = append(res.Rejected, *rej)
			continue
		}
		evs = append(evs, p)
	}
	if len(evs) == 0 {
		return res, nil
	}
	if err := f.combine(ctx, snd, evs, now); err != nil {
		return res, fmt.Errorf("%w: %w", ErrFeedStore, err)
	}
	f.refreshCard(ctx, snd.ProjectID)
	for _, p := range evs {
		res.Accepted = append(res.Accepted, p.ev.EventID)
	}
	return res, nil
}

// prepare runs the per-event pipeline on one element.
func (f *Feed) prepare(raw json.RawMessage, snd *FeedSender, ipHash string) (p prepared, rej *event.Rejection) {
	var id *string
	defer func() {
		if r := recover(); r != nil {
			f.s.Log.Error("feed: event pipeline panicked", "project_id", snd.ProjectID, "panic", fmt.Sprint(r))
			rej = &event.Rejection{EventID: id, ReasonCode: event.InternalError, Message: "the event could not be processed because of a fault on our side"}
		}
	}()
	ev, rej := event.Validate(raw)
	if rej != nil {
		return p, rej
	}
	id = &ev.EventID
	policy, ok := snd.policyFor(ev.Environment)
	if !ok {
		return p, &event.Rejection{EventID: id, ReasonCode: event.NoBinding, Message: fmt.Sprintf("no binding for environment '%s'", ev.Environment)}
	}
	if policy == PolicyOff {
		return p, &event.Rejection{EventID: id, ReasonCode: event.BindingDisabled, Message: fmt.Sprintf("the binding for environment '%s' has repair policy off; the event was not kept", ev.Environment)}
	}
	ev.User.IPHash = ipHash
	if err := f.scrub(&ev); err != nil {
		return p, &event.Rejection{EventID: id, ReasonCode: event.RedactionFailed, Message: err.Error()}
	}
	payload, err := event.Marshal(&ev)
	if err != nil {
		return p, &event.Rejection{EventID: id, ReasonCode: event.InternalError, Message: "the event could not be encoded for storage"}
	}
	return prepared{ev: ev, key: ev.CanonicalID(), policy: policy, fp: event.Fingerprint(&ev), payload: string(payload), conn: snd.ConnectionID}, nil
}

// group is the new events of one incident within a batch.
type group struct {
	env, fp  string
	policy   string
	title    string
	exType   string
	id       uuid.UUID
	status   string // current status of an existing incident
	existing bool
	n        int64
	latest   string // event_id of the newest new event, as spelled
	release  string
}

type groupKey struct{ env, fp string }

type transition struct {
	incident   uuid.UUID
	from       *string
	to         string
	actor      string
	actorID    string
	reason     string
	intoQueued bool
}

// storeBatch writes a batch in tx. Lock order is fixed — incidents sorted
// by (environment, fingerprint), events by key — so concurrent batches of a
// project never deadlock. It takes no project lock: the ingest changes no
// queue state, and each incident row is serialized by its own row lock, so
// senders of one project do not wait for each other.
func (f *Feed) storeBatch(ctx context.Context, tx bun.Tx, raw rawConn, snd *FeedSender, evs []prepared, now time.Time) error {
	groups := map[groupKey]*group{}
	var keys []groupKey
	for i := range evs {
		k := groupKey{evs[i].ev.Environment, evs[i].fp}
		if groups[k] == nil {
			g := &group{env: k.env, fp: k.fp, policy: evs[i].policy, title: evs[i].ev.Title}
			if evs[i].ev.Exception != nil {
				g.exType = evs[i].ev.Exception.Type
			}
			groups[k] = g
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].env != keys[j].env {
			return keys[i].env < keys[j].env
		}
		return keys[i].fp < keys[j].fp
	})
	// Find the incidents without locking them: their ids never change, and
	// the row locks are taken only after the events are in, so concurrent
	// batches of one fault wait for each other as briefly as possible.
	if err := lockIncidents(ctx, tx, snd.ProjectID, keys, groups, false); err != nil {
		return err
	}
	for _, k := range keys {
		if g := groups[k]; !g.existing {
			g.id = uuid.New()
		}
	}

	// The dedupe insert: the first spelling of a key in the batch is the one
	// stored; the database says which keys are new.
	order := make([]int, 0, len(evs))
	seen := make(map[string]bool, len(evs))
	for i := range evs {
		if !seen[evs[i].key] {
			seen[evs[i].key] = true
			order = append(order, i)
		}
	}
	sort.Slice(order, func(a, b int) bool { return evs[order[a]].key < evs[order[b]].key })
	fresh, err := insertEvents(ctx, tx, raw, snd, evs, order, groups, now)
	if err != nil {
		return err
	}
	if len(fresh) == 0 {
		return nil // every event was a resend: accepted, counted already
	}
	// Count the new events per incident, in batch order so that the latest
	// event and release are the last ones the sender listed.
	for i := range evs {
		p := &evs[i]
		if !fresh[p.key] {
			continue
		}
		delete(fresh, p.key) // a key spelled twice in the batch counts once
		g := groups[groupKey{p.ev.Environment, p.fp}]
		g.n++
		g.latest = p.ev.EventID
		if p.ev.Release != "" {
			g.release = p.ev.Release
		}
	}

	var counted []groupKey
	for _, k := range keys {
		if g := groups[k]; g.existing && g.n > 0 {
			counted = append(counted, k)
		}
	}
	if len(counted) > 0 { // lock them and read their current status
		if err := lockIncidents(ctx, tx, snd.ProjectID, counted, groups, true); err != nil {
			return err
		}
	}
	var trs []transition
	var created, updated []*group
	for _, k := range keys {
		g := groups[k]
		switch {
		case g.n == 0:
		case g.existing:
			updated = append(updated, g)
		default:
			created = append(created, g)
		}
	}
	lost, err := insertIncidents(ctx, tx, snd, created, now)
	if err != nil {
		return err
	}
	for _, g := range created {
		if lost[g] {
			continue
		}
		trs = append(trs, newIncidentTransitions(g)...)
	}
	if len(lost) > 0 {
		// Another batch created these incidents after our lock: count our
		// events on them instead, like any existing incident.
		var lk []groupKey
		for g := range lost {
			lk = append(lk, groupKey{g.env, g.fp})
		}
		sort.Slice(lk, func(i, j int) bool { return lk[i].env < lk[j].env || (lk[i].env == lk[j].env && lk[i].fp < lk[j].fp) })
		old := map[*group]uuid.UUID{}
		for g := range lost {
			old[g] = g.id
		}
		if err := lockIncidents(ctx, tx, snd.ProjectID, lk, groups, true); err != nil {
			return err
		}
		for g, was := range old {
			if !g.existing {
				return fmt.Errorf("incident %s/%s vanished while grouping", g.env, g.fp)
			}
			if _, err := tx.Tx.ExecContext(ctx, `UPDATE feed_events SET incident_id = $1 WHERE org_id = $2 AND incident_id = $3`, g.id, snd.OrgID, was); err != nil {
				return fmt.Errorf("regroup events: %w", err)
			}
			updated = append(updated, g)
		}
	}
	moreTrs, err := updateIncidents(ctx, tx, updated, now)
	if err != nil {
		return err
	}
	trs = append(trs, moreTrs...)
	if err := insertTransitions(ctx, tx, trs, now); err != nil {
		return err
	}
	if f.OnQueued != nil {
		var queued []uuid.UUID
		for _, t := range trs {
			if t.intoQueued {
				queued = append(queued, t.incident)
			}
		}
		if len(queued) > 0 {
			if err := f.OnQueued(ctx, tx, snd.ProjectID, queued); err != nil {
				return fmt.Errorf("request repair: %w", err)
			}
		}
	}
	return f.afterBatch(ctx, tx, snd)
}

// errCopyConflict is a COPY that met an event already stored: the group
// holds a resend. storeGroup stores it again with the INSERT that skips
// stored keys.
var errCopyConflict = errors.New("feed: the group holds an event already stored")

// feedEventColumns are the columns both ways of inserting events write.
var feedEventColumns = []string{"org_id", "event_id_key", "project_id", "connection_id", "environment", "fingerprint",
	"incident_id", "received_at", "occurred_at", "payload"}

// insertEvents stores the events evs[order] (one per key) and returns the
// keys that were new. With raw it COPYs them, the cheapest way into the
// table by far, and every key is new or the COPY fails with
// errCopyConflict; without, it INSERTs them skipping the keys already
// stored, and the database says which were new.
func insertEvents(ctx context.Context, tx bun.Tx, raw rawConn, snd *FeedSender, evs []prepared, order []int,
	groups map[groupKey]*group, now time.Time) (map[string]bool, error) {
	fresh := make(map[string]bool, len(order))
	if raw != nil {
		rows := make([][]any, len(order))
		org, project := pgUUID(snd.OrgID), pgUUID(snd.ProjectID)
		for j, i := range order {
			p := &evs[i]
			// uuid.UUID would go through driver.Valuer and a string parse;
			// pgtype.UUID is encoded as its 16 bytes.
			rows[j] = []any{org, p.key, project, pgUUID(p.conn), p.ev.Environment, p.fp,
				pgUUID(groups[groupKey{p.ev.Environment, p.fp}].id), now, p.ev.Timestamp, p.payload}
			fresh[p.key] = true
		}
		err := raw(func(pc *pgx.Conn) error {
			_, err := pc.CopyFrom(ctx, pgx.Identifier{"feed_events"}, feedEventColumns, pgx.CopyFromRows(rows))
			return err
		})
		if isUnique(err, "feed_events_dedupe_key") {
			return nil, errCopyConflict
		}
		if err != nil {
			return nil, fmt.Errorf("copy events: %w", err)
		}
		return fresh, nil
	}
	var (
		ks, envs, fps, ids, payloads = make([]string, len(order)), make([]string, len(order)), make([]string, len(order)), make([]string, len(order)), make([]string, len(order))
		occurred                     = make([]time.Time, len(order))
		conns                        = make([]string, len(order))
	)
	for j, i := range order {
		p := &evs[i]
		ks[j], envs[j], fps[j], payloads[j], occurred[j], conns[j] = p.key, p.ev.Environment, p.fp, p.payload, p.ev.Timestamp, p.conn.String()
		ids[j] = groups[groupKey{p.ev.Environment, p.fp}].id.String()
	}
	rows, err := tx.Tx.QueryContext(ctx, `INSERT INTO feed_events (`+strings.Join(feedEventColumns, ", ")+`)
		SELECT $1, u.k, $2, u.c, u.e, u.f, u.i, $3, u.o, u.p::jsonb
		FROM unnest($4::text[], $5::text[], $6::text[], $7::uuid[], $8::timestamptz[], $9::text[], $10::uuid[]) AS u(k, e, f, i, o, p, c)
		ON CONFLICT (org_id, event_id_key) DO NOTHING
		RETURNING event_id_key`,
		snd.OrgID, snd.ProjectID, now, ks, envs, fps, ids, occurred, payloads, conns)
	if err != nil {
		return nil, fmt.Errorf("insert events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("insert events: %w", err)
		}
		fresh[k] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("insert events: %w", err)
	}
	return fresh, nil
}

// afterBatch publishes the batch to live views. The production card's
// refresh is enqueued by Ingest after the commit (see refreshCard).
func (f *Feed) afterBatch(ctx context.Context, tx bun.Tx, snd *FeedSender) error {
	payload := fmt.Sprintf(`{"kind":"incident","org_id":%q,"project_id":%q}`, snd.OrgID, snd.ProjectID)
	if err := notify(ctx, tx, payload); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

// refreshCard asks for the project's card refresh once the batch has
// committed. Inside the batch the enqueue would hold the project's one
// unique job row across the batch's incident locks, serializing (and
// deadlocking) concurrent senders; and a card failure must never fail an
// ingest. The requests of concurrent batches coalesce in cardRefresher; a
// refresh lost to a crash is caught by the periodic card sweep.
func (f *Feed) refreshCard(_ context.Context, projectID uuid.UUID) {
	f.cards.request(f.s, projectID)
}

// cardRefreshGap is the least time between two enqueue rounds of a
// cardRefresher. A steady stream of batches would otherwise enqueue (and a
// worker run) one refresh per committed group, hundreds a second, each
// replacing the card with nearly the same snapshot; with the gap a busy
// project's card is replaced at most ten times a second and still follows
// its last batch within the gap.
const cardRefreshGap = 100 * time.Millisecond

// cardRefresher coalesces card-refresh requests: the projects marked while
// one enqueue round runs (or while the gap after it lasts) are enqueued
// together by the next round, each after the commits that marked it, so the
// job (unique per project) always reads them.
type cardRefresher struct {
	mu      sync.Mutex
	dirty   map[uuid.UUID]struct{}
	running bool
}

func (c *cardRefresher) request(s *Store, projectID uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirty == nil {
		c.dirty = map[uuid.UUID]struct{}{}
	}
	c.dirty[projectID] = struct{}{}
	if !c.running {
		c.running = true
		go c.run(s)
	}
}

func (c *cardRefresher) run(s *Store) {
	for {
		c.mu.Lock()
		batch := c.dirty
		c.dirty = nil
		if len(batch) == 0 {
			c.running = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		began := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for id := range batch {
			if err := enqueueCardRefreshApart(ctx, s, id); err != nil {
				s.Log.Warn("feed: card refresh not enqueued; the sweep will catch up", "project_id", id, "error", err)
			}
		}
		cancel()
		time.Sleep(cardRefreshGap - time.Since(began))
	}
}

// lockIncidents finds (and with forUpdate locks, in key order) the existing
// incidents of keys, marking their groups existing with their id and status.
func lockIncidents(ctx context.Context, tx bun.Tx, projectID uuid.UUID, keys []groupKey, groups map[groupKey]*group, forUpdate bool) error {
	envs, fps := make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		envs[i], fps[i] = k.env, k.fp
	}
	q := `SELECT i.id, i.environment, i.fingerprint, i.status FROM incidents i
		JOIN unnest($2::text[], $3::text[]) AS u(e, f) ON i.environment = u.e AND i.fingerprint = u.f
		WHERE i.project_id = $1`
	if forUpdate {
		q += ` ORDER BY i.environment, i.fingerprint FOR UPDATE OF i`
	}
	rows, err := tx.Tx.QueryContext(ctx, q, projectID, envs, fps)
	if err != nil {
		return fmt.Errorf("lock incidents: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id             uuid.UUID
			env, fp, state string
		)
		if err := rows.Scan(&id, &env, &fp, &state); err != nil {
			return fmt.Errorf("lock incidents: %w", err)
		}
		if g := groups[groupKey{env, fp}]; g != nil {
			g.id, g.status, g.existing = id, state, true
		}
	}
	return rows.Err()
}

// insertIncidents creates the incidents of new groups at the status their
// policy sends them to. It returns the groups that another batch created in
// the meantime (the insert found them and did nothing).
func insertIncidents(ctx context.Context, tx bun.Tx, snd *FeedSender, gs []*group, now time.Time) (map[*group]bool, error) {
	if len(gs) == 0 {
		return nil, nil
	}
	n := len(gs)
	ids, envs, fps, titles, types, states, latest, rels := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	counts := make([]int64, n)
	byID := make(map[string]*group, n)
	for i, g := range gs {
		ids[i], envs[i], fps[i], titles[i], types[i] = g.id.String(), g.env, g.fp, g.title, g.exType
		states[i], latest[i], rels[i], counts[i] = PolicyTarget(g.policy), g.latest, g.release, g.n
		byID[ids[i]] = g
	}
	rows, err := tx.Tx.QueryContext(ctx, `INSERT INTO incidents
		(id, org_id, project_id, environment, fingerprint, title, exception_type, status, event_count,
		 first_seen, last_seen, latest_event_id, release, created_at, updated_at)
		SELECT u.id, $1, $2, u.e, u.f, u.t, u.x, u.s, u.n, $3, $3, u.l, u.r, $3, $3
		FROM unnest($4::uuid[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::bigint[], $11::text[], $12::text[])
		     AS u(id, e, f, t, x, s, n, l, r)
		ON CONFLICT (project_id, environment, fingerprint) DO NOTHING
		RETURNING id`, snd.OrgID, snd.ProjectID, now, ids, envs, fps, titles, types, states, counts, latest, rels)
	if err != nil {
		return nil, fmt.Errorf("insert incidents: %w", err)
	}
	defer rows.Close()
	made := map[string]bool{}
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("insert incidents: %w", err)
		}
		made[id.String()] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("insert incidents: %w", err)
	}
	lost := map[*group]bool{}
	for id, g := range byID {
		if !made[id] {
			lost[g] = true
		}
	}
	return lost, nil
}

func strPtr(s string) *string { return &s }

// newIncidentTransitions records how a new incident reached its status:
// observed, triaged once grouped, then the binding's policy.
func newIncidentTransitions(g *group) []transition {
	trs := []transition{
		{incident: g.id, to: IncidentObserved, actor: ActorSystem, reason: "first event"},
		{incident: g.id, from: strPtr(IncidentObserved), to: IncidentTriaged, actor: ActorSystem, reason: "grouped by fingerprint"},
	}
	return append(trs, policyTransition(g)...)
}

// policyTransition moves a triaged incident on by its binding's policy.
func policyTransition(g *group) []transition {
	target := PolicyTarget(g.policy)
	if target == IncidentTriaged {
		return nil
	}
	return []transition{{incident: g.id, from: strPtr(IncidentTriaged), to: target, actor: ActorPolicy, actorID: "binding:" + g.env,
		reason: "repair policy " + g.policy, intoQueued: target == IncidentQueued}}
}

// updateIncidents counts new events on existing incidents. A CLOSED incident
// that gets a new event regressed: it reopens (TRIAGED, then the policy). An
// IGNORED one, and every other status, only counts.
func updateIncidents(ctx context.Context, tx bun.Tx, gs []*group, now time.Time) ([]transition, error) {
	if len(gs) == 0 {
		return nil, nil
	}
	var trs []transition
	n := len(gs)
	ids, latest, rels, states := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	counts := make([]int64, n)
	for i, g := range gs {
		ids[i], latest[i], rels[i], counts[i], states[i] = g.id.String(), g.latest, g.release, g.n, g.status
		if g.status == IncidentClosed {
			trs = append(trs, transition{incident: g.id, from: strPtr(IncidentClosed), to: IncidentTriaged, actor: ActorSystem,
				reason: "regression: a new event arrived on a closed incident"})
			trs = append(trs, policyTransition(g)...)
			states[i] = PolicyTarget(g.policy)
		}
	}
	_, err := tx.Tx.ExecContext(ctx, `UPDATE incidents AS i SET
		event_count = i.event_count + u.n, last_seen = GREATEST(i.last_seen, $1), latest_event_id = u.l,
		release = CASE WHEN u.r <> '' THEN u.r ELSE i.release END, status = u.s, updated_at = $1
		FROM unnest($2::uuid[], $3::bigint[], $4::text[], $5::text[], $6::text[]) AS u(id, n, l, r, s)
		WHERE i.id = u.id`, now, ids, counts, latest, rels, states)
	if err != nil {
		return nil, fmt.Errorf("update incidents: %w", err)
	}
	return trs, nil
}

func insertTransitions(ctx context.Context, tx bun.Tx, trs []transition, now time.Time) error {
	if len(trs) == 0 {
		return nil
	}
	n := len(trs)
	ids, tos, actors, actorIDs, reasons := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	froms := make([]*string, n)
	for i, t := range trs {
		ids[i], froms[i], tos[i], actors[i], actorIDs[i], reasons[i] = t.incident.String(), t.from, t.to, t.actor, t.actorID, t.reason
	}
	// ORDER BY ord keeps the bigserial ids in lifecycle order.
	_, err := tx.Tx.ExecContext(ctx, `INSERT INTO incident_transitions (incident_id, from_status, to_status, actor_kind, actor_id, reason, at)
		SELECT u.i, u.f, u.t, u.a, u.ai, u.r, $1
		FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[]) WITH ORDINALITY AS u(i, f, t, a, ai, r, ord)
		ORDER BY u.ord`, now, ids, froms, tos, actors, actorIDs, reasons)
	if err != nil {
		return fmt.Errorf("insert transitions: %w", err)
	}
	return nil
}

// A combiner stores the batches of one project that arrive while another
// of its batches is being stored together, in one transaction: a storm of
// one fault makes every batch update the same incident rows, and each
// transaction holds those row locks across its commit's flush, so storing
// them one by one would admit one batch per disk flush. Each sender still
// gets its answer only after the transaction that holds its events has
// committed (flat combining: the first waiting request does the work).
type combiner struct {
	mu    sync.Mutex
	queue map[uuid.UUID]*projectQueue
}

type projectQueue struct {
	pending []*combineJob
	leaders int
}

type combineJob struct {
	snd  *FeedSender
	evs  []prepared
	done chan error
}

// maxLeaders is how many groups of one project are stored at once. Two
// groups COPY their events side by side (the bulk of the work, and no lock
// between them) and queue only for the incident rows they both update, just
// before their commits; a third would mostly wait.
const maxLeaders = 2

// maxCombined bounds the events stored in one transaction.
const maxCombined = 1000

// errLead hands the lead of a project's queue to a waiting batch.
var errLead = errors.New("feed: lead the project's store queue")

// combine stores evs — alone or together with the project's other waiting
// batches — and returns once they are committed (or failed). Up to
// maxLeaders batches of a project lead at a time: a leader stores one group
// (its own batch first, then those waiting) and passes the lead on to the
// first batch still waiting, so no request works for others for long.
// Waiting is bounded by the store timeout of the groups ahead.
func (f *Feed) combine(ctx context.Context, snd *FeedSender, evs []prepared, now time.Time) error {
	job := &combineJob{snd: snd, evs: evs, done: make(chan error, 1)}
	c := &f.comb
	c.mu.Lock()
	if c.queue == nil {
		c.queue = map[uuid.UUID]*projectQueue{}
	}
	q := c.queue[snd.ProjectID]
	if q == nil {
		q = &projectQueue{}
		c.queue[snd.ProjectID] = q
	}
	lead := q.leaders < maxLeaders
	if lead {
		q.leaders++
	} else {
		q.pending = append(q.pending, job)
	}
	c.mu.Unlock()
	if !lead {
		if err := <-job.done; err != errLead {
			return err
		}
	}
	f.storeGroup(context.WithoutCancel(ctx), snd.ProjectID, q, job, now)
	return <-job.done
}

// storeGroup stores own and the batches waiting at the front of the
// project's queue in one transaction, answers them, and passes the lead to
// the next waiting batch, if any.
func (f *Feed) storeGroup(ctx context.Context, projectID uuid.UUID, q *projectQueue, own *combineJob, now time.Time) {
	c := &f.comb
	c.mu.Lock()
	group := []*combineJob{own}
	n := len(own.evs)
	for len(q.pending) > 0 && n+len(q.pending[0].evs) <= maxCombined {
		group = append(group, q.pending[0])
		n += len(q.pending[0].evs)
		q.pending = q.pending[1:]
	}
	c.mu.Unlock()
	all := make([]prepared, 0, n)
	for _, j := range group {
		all = append(all, j.evs...)
	}
	sctx, cancel := context.WithTimeout(ctx, f.StoreTimeout)
	err := f.s.inConnTx(sctx, func(ctx context.Context, tx bun.Tx, raw rawConn) error {
		return f.storeBatch(ctx, tx, raw, group[0].snd, all, now)
	})
	if errors.Is(err, errCopyConflict) {
		err = f.s.inTx(sctx, func(ctx context.Context, tx bun.Tx) error { return f.storeBatch(ctx, tx, nil, group[0].snd, all, now) })
	}
	cancel()
	for _, j := range group {
		j.done <- err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(q.pending) == 0 {
		q.leaders--
		if q.leaders == 0 {
			delete(c.queue, projectID)
		}
		return
	}
	next := q.pending[0]
	q.pending = q.pending[1:]
	next.done <- errLead
}
