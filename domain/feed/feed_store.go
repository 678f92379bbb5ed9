package feed

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/card"
	"anvil/domain/incident"
	"anvil/domain/internal/dbutil"
	"anvil/domain/internal/ttlcache"
	"anvil/domain/release"
)

// Storing a group of batches: its events, and the incidents they count on.
//
// Two paths write the same rows. The fast one (storeFast) covers the
// steady state — events not seen before, incidents that exist or are new,
// no repair to request — in three round trips on a pgx connection, the
// events COPYed from the rows their requests encoded. Anything else (a
// resend, an incident created or deleted by another process meanwhile, an
// incident the policy queues for repair) rolls the fast attempt back and is
// stored by the general path (storeBatch), one statement at a time in a
// bun transaction, with the INSERT that skips stored keys.

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
	first    string // the release of its first new event (docs/releases.md)
	// guarded: a closed incident with a fix or a release-aware close; its
	// events are judged against the fix's releases by the fix check, not
	// reopened here (docs/releases.md, "Regressions that know releases").
	guarded bool
	// rels is the new events per release ("" included), with the batch
	// position of each release's last event: the deltas' order (deltas.go).
	rels map[string]*relCount
}

// relCount is a group's new events of one release.
type relCount struct {
	n    int64
	last int
}

type groupKey struct{ env, fp string }

// batchPlan is a group of batches arranged for storage.
type batchPlan struct {
	snd    *FeedSender
	evs    []prepared
	now    time.Time
	groups map[groupKey]*group
	keys   []groupKey // sorted by (environment, fingerprint): the lock order
	// order is one event per key — the first spelling in the batch, the
	// one stored — sorted by key, the order of the dedupe index's locks.
	order []int
	// rel is the new events per release, written with the group's commit
	// (release.TrackStmt).
	rel release.Tally
}

// planBatch groups evs by incident. The lock orders are fixed — incidents
// by (environment, fingerprint), events by key — so concurrent groups of a
// project never deadlock.
func planBatch(snd *FeedSender, evs []prepared, now time.Time) *batchPlan {
	p := &batchPlan{snd: snd, evs: evs, now: now, groups: map[groupKey]*group{}}
	for i := range evs {
		k := groupKey{evs[i].ev.Environment, evs[i].fp}
		if p.groups[k] == nil {
			g := &group{env: k.env, fp: k.fp, policy: evs[i].policy, title: evs[i].ev.Title}
			if evs[i].ev.Exception != nil {
				g.exType = evs[i].ev.Exception.Type
			}
			p.groups[k] = g
			p.keys = append(p.keys, k)
		}
	}
	sortKeys(p.keys)
	seen := make(map[string]bool, len(evs))
	for i := range evs {
		if !seen[evs[i].key] {
			seen[evs[i].key] = true
			p.order = append(p.order, i)
		}
	}
	sort.Slice(p.order, func(a, b int) bool { return evs[p.order[a]].key < evs[p.order[b]].key })
	return p
}

func sortKeys(keys []groupKey) {
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].env != keys[j].env {
			return keys[i].env < keys[j].env
		}
		return keys[i].fp < keys[j].fp
	})
}

func (p *batchPlan) groupOf(e *prepared) *group { return p.groups[groupKey{e.ev.Environment, e.fp}] }

// chooseIDs gives the groups without an incident the id of the one they
// will create.
func (p *batchPlan) chooseIDs() {
	for _, k := range p.keys {
		if g := p.groups[k]; !g.existing {
			g.id = uuid.New()
		}
	}
}

// count counts the new events (fresh holds their keys) per incident, in
// batch order so that the latest event and release are the last ones the
// sender listed. A key spelled twice in the batch counts once.
func (p *batchPlan) count(fresh map[string]bool) {
	for i := range p.evs {
		e := &p.evs[i]
		if !fresh[e.key] {
			continue
		}
		delete(fresh, e.key)
		g := p.groupOf(e)
		g.n++
		g.latest = e.ev.EventID
		if g.rels == nil {
			g.rels = map[string]*relCount{}
		}
		rc := g.rels[e.ev.Release]
		if rc == nil {
			rc = &relCount{}
			g.rels[e.ev.Release] = rc
		}
		rc.n++
		rc.last = i
		if e.ev.Release != "" {
			g.release = e.ev.Release
			if g.first == "" {
				g.first = e.ev.Release
			}
		}
		p.rel.Count(e.ev.Environment, e.ev.Release)
	}
}

// trackStmt is the group's release upsert, when its events named releases;
// created are the incidents the group created.
func (p *batchPlan) trackStmt(created []*group) (dbutil.Stmt, bool) {
	if p.rel.Empty() {
		return dbutil.Stmt{}, false
	}
	for _, g := range created {
		p.rel.Created(g.id, g.env, g.first)
	}
	return release.TrackStmt(p.snd.ProjectID, &p.rel, p.now, p.snd.Browser), true
}

// split is the groups that gained events: existing incidents to update and
// new ones to create, each in key order.
func (p *batchPlan) split() (updated, created []*group) {
	for _, k := range p.keys {
		g := p.groups[k]
		switch {
		case g.n == 0:
		case g.existing:
			updated = append(updated, g)
		default:
			created = append(created, g)
		}
	}
	return updated, created
}

// incidentsStmt finds the incidents of keys; with forUpdate it locks them,
// in key order.
func incidentsStmt(projectID uuid.UUID, keys []groupKey, forUpdate bool) dbutil.Stmt {
	envs, fps := make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		envs[i], fps[i] = k.env, k.fp
	}
	q := `SELECT i.id, i.environment, i.fingerprint, i.status, ` + guardedSQL + ` FROM incidents i
		JOIN unnest($2::text[], $3::text[]) AS u(e, f) ON i.environment = u.e AND i.fingerprint = u.f
		WHERE i.project_id = $1`
	if forUpdate {
		q += ` ORDER BY i.environment, i.fingerprint FOR UPDATE OF i`
	}
	return dbutil.Stmt{SQL: q, Args: []any{dbutil.PgUUID(projectID), envs, fps}}
}

// lockIDsStmt locks the incidents of gs by id, in key order (the order of
// incidentsStmt's locks), reading their status. An incident deleted since
// its id was learnt is missing from the answer — even if another of the
// same fingerprint has taken its place.
func lockIDsStmt(projectID uuid.UUID, gs []*group) dbutil.Stmt {
	return lockIDsModeStmt(projectID, gs, "FOR UPDATE")
}

// lockIDsModeStmt is lockIDsStmt with another lock: the fast path takes
// FOR KEY SHARE, which keeps the incidents from being deleted until the
// group commits and waits for nobody but a deletion — not for another
// group, a fold or a decision (they update without touching a key).
func lockIDsModeStmt(projectID uuid.UUID, gs []*group, mode string) dbutil.Stmt {
	ids := make([]pgtype.UUID, len(gs))
	for i, g := range gs {
		ids[i] = dbutil.PgUUID(g.id)
	}
	return dbutil.Stmt{SQL: `SELECT id, environment, fingerprint, status, ` + guardedSQL + ` FROM incidents i
		WHERE project_id = $1 AND id = ANY($2::uuid[])
		ORDER BY environment, fingerprint ` + mode, Args: []any{dbutil.PgUUID(projectID), ids}}
}

// guardedSQL reads group.guarded.
const guardedSQL = `(i.fix_commit_sha <> '' OR i.closed_release <> '')`

// scanIncidents marks the groups of the incidents found existing, with
// their id and current status, and returns how many it found.
func (p *batchPlan) scanIncidents(rows dbutil.RowSource) (int, error) {
	n := 0
	for rows.Next() {
		var (
			id             uuid.UUID
			env, fp, state string
			guarded        bool
		)
		if err := rows.Scan(&id, &env, &fp, &state, &guarded); err != nil {
			return n, fmt.Errorf("find incidents: %w", err)
		}
		if g := p.groups[groupKey{env, fp}]; g != nil {
			g.id, g.status, g.existing, g.guarded = id, state, true, guarded
			n++
		}
	}
	return n, rows.Err()
}

// createStmt creates the incidents of new groups at the status their
// policy sends them to, returning the ids it created: a group whose id is
// missing was created by another batch in the meantime.
func (p *batchPlan) createStmt(gs []*group) dbutil.Stmt {
	n := len(gs)
	ids := make([]pgtype.UUID, n)
	envs, fps, titles, types, states, latest, rels := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	counts := make([]int64, n)
	for i, g := range gs {
		ids[i], envs[i], fps[i], titles[i], types[i] = dbutil.PgUUID(g.id), g.env, g.fp, g.title, g.exType
		states[i], latest[i], rels[i], counts[i] = domain.PolicyTarget(g.policy), g.latest, g.release, g.n
	}
	return dbutil.Stmt{SQL: `INSERT INTO incidents
		(id, org_id, project_id, environment, fingerprint, title, exception_type, status, event_count,
		 first_seen, last_seen, latest_event_id, release, created_at, updated_at)
		SELECT u.id, $1, $2, u.e, u.f, u.t, u.x, u.s, u.n, $3, $3, u.l, u.r, $3, $3
		FROM unnest($4::uuid[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::bigint[], $11::text[], $12::text[])
		     AS u(id, e, f, t, x, s, n, l, r)
		ON CONFLICT (project_id, environment, fingerprint) DO NOTHING
		RETURNING id`, Args: []any{dbutil.PgUUID(p.snd.OrgID), dbutil.PgUUID(p.snd.ProjectID), p.now, ids, envs, fps, titles, types, states, counts, latest, rels}}
}

// scanCreated returns the groups of gs that createStmt did not create.
func scanCreated(rows dbutil.RowSource, gs []*group) (map[*group]bool, error) {
	made := map[uuid.UUID]bool{}
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("create incidents: %w", err)
		}
		made[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("create incidents: %w", err)
	}
	lost := map[*group]bool{}
	for _, g := range gs {
		if !made[g.id] {
			lost[g] = true
		}
	}
	return lost, nil
}

// updateStmt counts new events on existing incidents (gs, locked, their
// status read under the lock). A CLOSED incident that gets a new event
// regressed: it reopens (TRIAGED, then the policy), and the transitions
// say so. An IGNORED one, and every other status, only counts.
func (p *batchPlan) updateStmt(gs []*group) (dbutil.Stmt, []incident.Transition) {
	var trs []incident.Transition
	n := len(gs)
	ids := make([]pgtype.UUID, n)
	latest, rels, states := make([]string, n), make([]string, n), make([]string, n)
	counts := make([]int64, n)
	for i, g := range gs {
		ids[i], latest[i], rels[i], counts[i], states[i] = dbutil.PgUUID(g.id), g.latest, g.release, g.n, g.status
		if g.status == domain.IncidentClosed && !g.guarded {
			trs = append(trs, incident.Regressed(g.id, g.env, g.policy)...)
			states[i] = domain.PolicyTarget(g.policy)
		}
	}
	return dbutil.Stmt{SQL: `UPDATE incidents AS i SET
		event_count = i.event_count + u.n, last_seen = GREATEST(i.last_seen, $1), latest_event_id = u.l,
		release = CASE WHEN u.r <> '' THEN u.r ELSE i.release END, status = u.s, updated_at = $1
		FROM unnest($2::uuid[], $3::bigint[], $4::text[], $5::text[], $6::text[]) AS u(id, n, l, r, s)
		WHERE i.id = u.id`, Args: []any{p.now, ids, counts, latest, rels, states}}, trs
}

// liveNotice is the live event a stored group publishes.
func liveNotice(snd *FeedSender) string {
	return fmt.Sprintf(`{"kind":"incident","org_id":%q,"project_id":%q}`, snd.OrgID, snd.ProjectID)
}

// errSlowStore asks for a group to be stored by the general path; the fast
// attempt has been rolled back.
var errSlowStore = errors.New("feed: the group needs the general path")

// copyEventsSQL COPYs the rows encodeEventRow makes; beginCopyEventsSQL
// opens the transaction first, in the same round trip.
var (
	copyEventsSQL      = `COPY feed_events (` + strings.Join(feedEventColumns, ", ") + `) FROM STDIN (FORMAT binary)`
	beginCopyEventsSQL = "BEGIN; " + copyEventsSQL
)

// feedEventColumns are the columns of feed_events the ingest writes, in
// the order of an encoded row.
var feedEventColumns = []string{"org_id", "event_id_key", "project_id", "connection_id", "environment", "fingerprint",
	"incident_id", "received_at", "occurred_at", "payload"}

// storeFast stores the plan in three round trips, or returns errSlowStore
// (or errCopyConflict) having stored nothing:
//
//  1. BEGIN and COPY the events, each pointing at its incident — known,
//     or looked up first (one round trip more), or chosen for a new one.
//     Every event is new, or the dedupe key fails the COPY. The COPY waits
//     for one of the process's copy slots, and gives it back as soon as it
//     is done;
//  2. read the existing incidents' status by id FOR KEY SHARE (no other
//     group, fold or decision waits for that lock, and none holds one the
//     group waits for), and create the new ones;
//  3. append the existing incidents' deltas (folded into them shortly
//     after: fold.go); record the new incidents' transitions; COMMIT.
//
// A regression (an existing incident found CLOSED) reopens at once, under
// the incident's row lock, on the general path.
//
// release gives the copy slot back (storeFast calls it once, at the latest
// when it returns).
func (f *Feed) storeFast(ctx context.Context, p *batchPlan, release func()) error {
	defer release()
	conn, err := f.s.Pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire connection: %w", err)
	}
	// Release destroys a connection left inside a transaction: a group that
	// fails half-way is rolled back by the disconnect.
	defer conn.Release()
	g := &fastGroup{f: f, c: conn.Conn(), p: p}
	copySQL, err := g.lookup(ctx)
	if err != nil {
		return err
	}
	err = g.copyEvents(ctx, copySQL)
	release()
	if err != nil {
		return err
	}
	updated, created := p.split()
	if err := g.lockAndCreate(ctx, updated, created); err != nil {
		return err
	}
	if err := g.commit(ctx, updated, created); err != nil {
		return err
	}
	f.incidents.learn(p)
	return nil
}

// fastGroup is one group on the fast path: its connection and its plan.
type fastGroup struct {
	f *Feed
	c *pgx.Conn
	p *batchPlan
}

// abandon rolls the group back and returns why: errSlowStore or
// errCopyConflict send it to the general path (the fallback).
func (g *fastGroup) abandon(ctx context.Context, why error) error {
	if _, err := g.c.Exec(ctx, "ROLLBACK"); err != nil {
		return fmt.Errorf("roll back: %w", err)
	}
	return why
}

// lookup learns the incidents of the plan's keys — from the cache, or
// looked up in the transaction it opens then — and returns the COPY
// statement to send (it opens the transaction itself when the lookup did
// not).
func (g *fastGroup) lookup(ctx context.Context) (copySQL string, err error) {
	p := g.p
	copySQL = beginCopyEventsSQL
	if missing := g.f.incidents.known(p); len(missing) > 0 {
		find := incidentsStmt(p.snd.ProjectID, missing, false)
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue(find.SQL, find.Args...).Query(func(r pgx.Rows) error { _, err := p.scanIncidents(r); return err })
		if err := g.c.SendBatch(ctx, b).Close(); err != nil {
			return "", fmt.Errorf("find incidents: %w", err)
		}
		copySQL = copyEventsSQL
	}
	if g.f.afterLookup != nil {
		g.f.afterLookup(false)
	}
	return copySQL, nil
}

// copyEvents places every event on its incident (chosen now for the new
// ones) and COPYs them; an event already stored is errCopyConflict.
func (g *fastGroup) copyEvents(ctx context.Context, copySQL string) error {
	p := g.p
	p.chooseIDs()
	rows := make([]*copyRow, len(p.order))
	fresh := make(map[string]bool, len(p.order))
	for j, i := range p.order {
		e := &p.evs[i]
		e.row.place(p.groupOf(e).id, p.now)
		rows[j] = &e.row
		fresh[e.key] = true
	}
	if _, err := g.c.PgConn().CopyFrom(ctx, newCopyStream(rows), copySQL); err != nil {
		if dbutil.IsUnique(err, "feed_events_dedupe_key") {
			return g.abandon(ctx, errCopyConflict)
		}
		return fmt.Errorf("copy events: %w", err)
	}
	p.count(fresh)
	return nil
}

// lockAndCreate locks the existing incidents by id, reading their status,
// and creates the new ones, in one round trip; an incident deleted, or one
// created elsewhere, meanwhile is errSlowStore.
func (g *fastGroup) lockAndCreate(ctx context.Context, updated, created []*group) error {
	p := g.p
	b := &pgx.Batch{}
	var (
		locked int
		lost   map[*group]bool
	)
	if len(updated) > 0 {
		lock := lockIDsModeStmt(p.snd.ProjectID, updated, "FOR KEY SHARE")
		b.Queue(lock.SQL, lock.Args...).Query(func(r pgx.Rows) (err error) { locked, err = p.scanIncidents(r); return err })
	}
	if len(created) > 0 {
		create := p.createStmt(created)
		b.Queue(create.SQL, create.Args...).Query(func(r pgx.Rows) (err error) { lost, err = scanCreated(r, created); return err })
	}
	if err := g.c.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("lock and create incidents: %w", err)
	}
	if locked < len(updated) || len(lost) > 0 {
		g.f.incidents.forget(p.snd.ProjectID)
		return g.abandon(ctx, errSlowStore)
	}
	for _, gr := range updated {
		if gr.status == domain.IncidentClosed && !gr.guarded {
			return g.abandon(ctx, errSlowStore) // a regression: reopened under the row lock
		}
	}
	return nil
}

// commit counts the events on the existing incidents, records the
// transitions (and, when there are any, the card's change), and commits,
// in one round trip; the group's live event is published after the
// commit. A group whose policy queues a repair is errSlowStore: the repair
// request goes through River's transactional insert.
func (g *fastGroup) commit(ctx context.Context, updated, created []*group) error {
	p := g.p
	var trs []incident.Transition
	for _, gr := range created {
		trs = append(trs, incident.Created(gr.id, gr.env, gr.policy)...)
	}
	if g.f.OnQueued != nil && len(incident.Queued(trs)) > 0 {
		return g.abandon(ctx, errSlowStore)
	}
	if err := g.f.s.EnqueueAlertsFast(ctx, g.c, feedAlertCauses(p.snd, trs)); err != nil {
		if errors.Is(err, domain.ErrNoFastJobs) {
			err = errSlowStore
		}
		return g.abandon(ctx, err)
	}
	return g.f.s.PublishAfter(ctx, func(ctx context.Context) error {
		b := &pgx.Batch{}
		// With created incidents the group counts its releases itself
		// (TrackStmt records which release each was first seen in).
		var (
			rel     dbutil.Stmt
			counted bool
		)
		if len(created) > 0 {
			rel, counted = p.trackStmt(created)
		}
		if d, ok := p.deltasStmt(updated, !counted); ok {
			b.Queue(d.SQL, d.Args...)
		}
		if len(trs) > 0 {
			st := incident.TransitionsStmt(trs, p.now)
			b.Queue(st.SQL, st.Args...)
			// New incidents and moves change the card; counts do not.
			b.Queue(card.BumpVersionSQL, dbutil.PgUUID(p.snd.ProjectID), p.now)
		}
		if counted {
			b.Queue(rel.SQL, rel.Args...)
		}
		b.Queue("COMMIT")
		if err := g.c.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("count and commit: %w", err)
		}
		if len(updated) > 0 && !g.f.SyncFold {
			g.f.folds.Request(struct{}{})
		}
		return domain.Notify(ctx, nil, liveNotice(p.snd))
	})
}

// incidentCache remembers the ids of the incidents the process has stored
// events on, per project and (environment, fingerprint), so that a group
// of known faults needs no lookup before its COPY. An id is never trusted:
// the incidents are locked by id before the commit, and one deleted
// meanwhile sends the group to the general path and the project's ids out
// of the cache. Bounded: when full, it starts again. No TTL: an id is
// checked by every group that uses it.
type incidentCache struct {
	c *ttlcache.Cache[incidentKey, uuid.UUID]
}

type incidentKey struct {
	project uuid.UUID
	key     groupKey
}

// maxCachedIncidents bounds incidentCache.
const maxCachedIncidents = 10000

func newIncidentCache() incidentCache {
	return incidentCache{ttlcache.New[incidentKey, uuid.UUID](0, maxCachedIncidents)}
}

// known fills in the groups whose incident the cache knows and returns the
// keys of the others.
func (c incidentCache) known(p *batchPlan) []groupKey {
	var missing []groupKey
	for _, k := range p.keys {
		if id, ok := c.c.Get(incidentKey{p.snd.ProjectID, k}, time.Time{}); ok {
			g := p.groups[k]
			g.id, g.existing = id, true
		} else {
			missing = append(missing, k)
		}
	}
	return missing
}

// learn remembers the incidents of a committed plan.
func (c incidentCache) learn(p *batchPlan) {
	for _, k := range p.keys {
		id := p.groups[k].id
		if known, ok := c.c.Get(incidentKey{p.snd.ProjectID, k}, time.Time{}); ok && known == id {
			continue
		}
		// The key's environment may share the request body's memory
		// (see event.decodeWire); the cache outlives the request.
		k = groupKey{strings.Clone(k.env), strings.Clone(k.fp)}
		c.c.Put(incidentKey{p.snd.ProjectID, k}, id, time.Time{})
	}
}

// forget drops a project's ids.
func (c incidentCache) forget(projectID uuid.UUID) {
	c.c.DeleteFunc(func(k incidentKey) bool { return k.project == projectID })
}

// errCopyConflict is a COPY that met an event already stored: the group
// holds a resend. The general path stores it with the INSERT that skips
// stored keys.
var errCopyConflict = errors.New("feed: the group holds an event already stored")

// storeBatch is the general path: the plan stored in tx, statement by
// statement. Its events are INSERTed skipping the keys already stored (the
// database says which were new); an incident created by another batch
// after the lookup gets the events chosen for it; a repair is requested for
// every incident the policy queues.
func (f *Feed) storeBatch(ctx context.Context, tx bun.Tx, p *batchPlan) error {
	q := func(st dbutil.Stmt, scan func(dbutil.RowSource) error) error {
		rows, err := tx.Tx.QueryContext(ctx, st.SQL, st.Args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		if err := scan(rows); err != nil {
			return err
		}
		return rows.Err()
	}
	find := incidentsStmt(p.snd.ProjectID, p.keys, false)
	if err := q(find, func(r dbutil.RowSource) error { _, err := p.scanIncidents(r); return err }); err != nil {
		return fmt.Errorf("find incidents: %w", err)
	}
	if f.afterLookup != nil {
		f.afterLookup(true)
	}
	p.chooseIDs()
	fresh, err := p.insertEvents(ctx, tx)
	if err != nil {
		return err
	}
	if len(fresh) == 0 {
		return nil // every event was a resend: accepted, counted already
	}
	p.count(fresh)
	updated, created := p.split()
	if err := p.lockCounted(q, updated, true); err != nil {
		return err
	}
	var trs []incident.Transition
	var lost map[*group]bool
	if len(created) > 0 {
		if err := q(p.createStmt(created), func(r dbutil.RowSource) (err error) { lost, err = scanCreated(r, created); return err }); err != nil {
			return fmt.Errorf("create incidents: %w", err)
		}
	}
	var made []*group
	for _, g := range created {
		if !lost[g] {
			trs = append(trs, incident.Created(g.id, g.env, g.policy)...)
			made = append(made, g)
		}
	}
	if len(lost) > 0 {
		// Another batch created these incidents after our lookup: count
		// our events on them instead, like any existing incident.
		var regroup []*group
		old := map[*group]uuid.UUID{}
		for _, g := range created {
			if lost[g] {
				regroup = append(regroup, g)
				old[g] = g.id
			}
		}
		if err := p.lockCounted(q, regroup, false); err != nil {
			return err
		}
		for _, g := range regroup {
			if _, err := tx.Tx.ExecContext(ctx, `UPDATE feed_events SET incident_id = $1 WHERE org_id = $2 AND incident_id = $3`,
				dbutil.PgUUID(g.id), dbutil.PgUUID(p.snd.OrgID), dbutil.PgUUID(old[g])); err != nil {
				return fmt.Errorf("regroup events: %w", err)
			}
		}
		updated = append(updated, regroup...)
	}
	if len(updated) > 0 {
		update, reopened := p.updateStmt(updated)
		if _, err := tx.Tx.ExecContext(ctx, update.SQL, update.Args...); err != nil {
			return fmt.Errorf("update incidents: %w", err)
		}
		trs = append(trs, reopened...)
	}
	if len(trs) > 0 {
		st := incident.TransitionsStmt(trs, p.now)
		if _, err := tx.Tx.ExecContext(ctx, st.SQL, st.Args...); err != nil {
			return fmt.Errorf("insert transitions: %w", err)
		}
	}
	if err := f.s.EnqueueAlerts(ctx, tx, feedAlertCauses(p.snd, trs)); err != nil {
		return err
	}
	if ids := incident.Queued(trs); f.OnQueued != nil && len(ids) > 0 {
		if err := f.OnQueued(ctx, tx, p.snd.ProjectID, ids); err != nil {
			return fmt.Errorf("request repair: %w", err)
		}
	}
	if rel, ok := p.trackStmt(made); ok {
		if _, err := tx.Tx.ExecContext(ctx, rel.SQL, rel.Args...); err != nil {
			return fmt.Errorf("track releases: %w", err)
		}
	}
	if len(trs) > 0 {
		// New incidents and moves change the card; counts do not. Last,
		// so the project's change row is held as briefly as possible.
		if _, err := tx.Tx.ExecContext(ctx, card.BumpVersionSQL, dbutil.PgUUID(p.snd.ProjectID), p.now); err != nil {
			return fmt.Errorf("count the card change: %w", err)
		}
	}
	if err := domain.Notify(ctx, tx, liveNotice(p.snd)); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

// lockCounted locks the incidents of gs, in key order, reading their
// current status: byID, the incidents their events were stored with;
// otherwise whichever incidents now hold their fingerprints. One deleted
// since the lookup fails the group: the sender resends it, and the resend
// finds no incident and creates one.
func (p *batchPlan) lockCounted(q func(dbutil.Stmt, func(dbutil.RowSource) error) error, gs []*group, byID bool) error {
	if len(gs) == 0 {
		return nil
	}
	var lock dbutil.Stmt
	if byID {
		lock = lockIDsStmt(p.snd.ProjectID, gs)
	} else {
		keys := make([]groupKey, len(gs))
		for i, g := range gs {
			keys[i] = groupKey{g.env, g.fp}
		}
		sortKeys(keys)
		lock = incidentsStmt(p.snd.ProjectID, keys, true)
	}
	for _, g := range gs {
		g.existing = false
	}
	if err := q(lock, func(r dbutil.RowSource) error { _, err := p.scanIncidents(r); return err }); err != nil {
		return fmt.Errorf("lock incidents: %w", err)
	}
	for _, g := range gs {
		if !g.existing {
			return fmt.Errorf("incident %s/%s was deleted while its events were stored", g.env, g.fp)
		}
	}
	return nil
}

// insertEvents stores the plan's events (one per key), skipping the keys
// already stored, and returns the keys that were new.
func (p *batchPlan) insertEvents(ctx context.Context, tx bun.Tx) (map[string]bool, error) {
	n := len(p.order)
	ks, envs, fps, payloads := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	ids, conns := make([]pgtype.UUID, n), make([]pgtype.UUID, n)
	occurred := make([]time.Time, n)
	for j, i := range p.order {
		e := &p.evs[i]
		ks[j], envs[j], fps[j], payloads[j], occurred[j], conns[j] = e.key, e.ev.Environment, e.fp, e.row.payload(), e.ev.Timestamp, dbutil.PgUUID(e.conn)
		ids[j] = dbutil.PgUUID(p.groupOf(e).id)
	}
	rows, err := tx.Tx.QueryContext(ctx, `INSERT INTO feed_events (`+strings.Join(feedEventColumns, ", ")+`)
		SELECT $1, u.k::uuid, $2, u.c, u.e, u.f, u.i, $3, u.o, u.p::json
		FROM unnest($4::text[], $5::text[], $6::text[], $7::uuid[], $8::timestamptz[], $9::text[], $10::uuid[]) AS u(k, e, f, i, o, p, c)
		ON CONFLICT (org_id, event_id_key) DO NOTHING
		RETURNING event_id_key`,
		dbutil.PgUUID(p.snd.OrgID), dbutil.PgUUID(p.snd.ProjectID), p.now, ks, envs, fps, ids, occurred, payloads, conns)
	if err != nil {
		return nil, fmt.Errorf("insert events: %w", err)
	}
	defer rows.Close()
	fresh := make(map[string]bool, n)
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

// feedAlertCauses are the alerts of a stored group's transitions: a new
// incident, a regression, and an incident the policy sends to approval.
// Both of the feed's paths call it on the same transitions. One
// regression sends one alert: the regression's, which names the status the
// policy then moved it to, never a second one for waiting on approval.
func feedAlertCauses(snd *FeedSender, trs []incident.Transition) []domain.AlertCause {
	return incident.AlertCauses(snd.OrgID, snd.ProjectID, trs)
}
