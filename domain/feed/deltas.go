package feed

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"anvil/domain"
	"anvil/domain/internal/dbutil"
)

// Incident deltas (docs/feed.md, "The write path and its costs").
//
// A group on the fast path does not update the incidents it counts on: it
// appends one row per incident and release to incident_deltas, and a fold
// adds them to the incident rows (count, last seen, latest event, release)
// and to the release rows shortly after — in the process that wrote them,
// at most FoldGap after its commit, and in the periodic fold job for what a
// crash left behind. In a storm of one fault every batch updated the same
// incident row and held its lock across the commit's flush, so the feed
// admitted one group per flush; appended rows wait for nobody.
//
// A fold deletes the deltas it reads and updates the rows in the same
// transaction, so one cut off half-way (a killed worker, a lost connection)
// leaves every delta in place and counts nothing twice. Folds take turns
// (one advisory lock), and lock the incidents they update in the order the
// general path locks them, so a fold never deadlocks with a batch.

// FoldGap is the least time between two folds of one process: a storm's
// counts follow its events within the gap, in one fold per gap instead of
// one per group.
const FoldGap = 100 * time.Millisecond

// foldChunk bounds the deltas one fold transaction reads.
const foldChunk = 5000

// foldLockKey is the advisory lock folds take turns with ("fold" in ASCII).
const foldLockKey = 0x666f6c64

// deltasStmt appends the deltas of gs — existing incidents the group
// counted on — ordered per incident so that its last delta holds its latest
// event (and its last delta with a release, the release of its latest event
// that named one); countRelease says the fold adds the release counts.
func (p *batchPlan) deltasStmt(gs []*group, countRelease bool) (dbutil.Stmt, bool) {
	var (
		ids                []pgtype.UUID
		envs, latest, rels []string
		counts             []int64
	)
	for _, g := range gs {
		if g.n == 0 {
			continue
		}
		order := make([]string, 0, len(g.rels))
		for r := range g.rels {
			order = append(order, r)
		}
		sort.Slice(order, func(i, j int) bool { return g.rels[order[i]].last < g.rels[order[j]].last })
		for _, r := range order {
			ids = append(ids, dbutil.PgUUID(g.id))
			envs, latest, rels = append(envs, g.env), append(latest, g.latest), append(rels, r)
			counts = append(counts, g.rels[r].n)
		}
	}
	if len(ids) == 0 {
		return dbutil.Stmt{}, false
	}
	return dbutil.Stmt{SQL: `INSERT INTO incident_deltas
		(incident_id, org_id, project_id, environment, n, last_seen, latest_event_id, release, count_release, browser)
		SELECT u.id, $1, $2, u.e, u.n, $3, u.l, u.r, $4, $5
		FROM unnest($6::uuid[], $7::text[], $8::bigint[], $9::text[], $10::text[]) WITH ORDINALITY AS u(id, e, n, l, r, o)
		ORDER BY u.o`,
		Args: []any{dbutil.PgUUID(p.snd.OrgID), dbutil.PgUUID(p.snd.ProjectID), p.now, countRelease, p.snd.Browser, ids, envs, counts, latest, rels}}, true
}

// delta is one row of incident_deltas, as a fold reads it.
type delta struct {
	ID           int64     `bun:"id"`
	IncidentID   uuid.UUID `bun:"incident_id"`
	OrgID        uuid.UUID `bun:"org_id"`
	ProjectID    uuid.UUID `bun:"project_id"`
	Environment  string    `bun:"environment"`
	N            int64     `bun:"n"`
	LastSeen     time.Time `bun:"last_seen"`
	LatestEvent  string    `bun:"latest_event_id"`
	Release      string    `bun:"release"`
	CountRelease bool      `bun:"count_release"`
	Browser      bool      `bun:"browser"`
}

// FoldDeltas folds every delta stored when it starts, and returns how many
// it folded. Safe to run anywhere, any number of times at once.
func (f *Feed) FoldDeltas(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := f.foldOnce(ctx)
		total += n
		if err != nil || n < foldChunk {
			return total, err
		}
	}
}

// foldOnce folds up to foldChunk deltas, oldest first, in one transaction.
func (f *Feed) foldOnce(ctx context.Context) (int, error) {
	var n int
	err := f.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, foldLockKey); err != nil {
			return fmt.Errorf("feed: wait for the fold lock: %w", err)
		}
		var ds []delta
		if err := tx.NewRaw(`DELETE FROM incident_deltas WHERE id IN (SELECT id FROM incident_deltas ORDER BY id LIMIT ?)
			RETURNING id, incident_id, org_id, project_id, environment, n, last_seen, latest_event_id, release, count_release, browser`,
			foldChunk).Scan(ctx, &ds); err != nil {
			return fmt.Errorf("feed: read the deltas: %w", err)
		}
		n = len(ds)
		if n == 0 {
			return nil
		}
		if f.duringFold != nil {
			var pid int
			if err := tx.NewRaw(`SELECT pg_backend_pid()`).Scan(ctx, &pid); err != nil {
				return err
			}
			f.duringFold(pid)
		}
		return f.applyDeltas(ctx, tx, ds)
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// incidentFold is what a fold adds to one incident.
type incidentFold struct {
	n               int64
	lastSeen        time.Time
	latest, release string
	latestID, relID int64
}

// releaseFold is what a fold adds to one release.
// releaseFold is what deltas add to one release: its count, and apart,
// the server's and the browser's counts and first-seen times, since only a
// server's events ship a fix or count as served (docs/releases.md,
// "Sources and trust").
type releaseFold struct {
	n                         int64
	first, last               time.Time
	server, browser           bool
	serverN, browserN         int64
	serverFirst, browserFirst time.Time
}

type releaseKey struct {
	project      uuid.UUID
	env, version string
}

// applyDeltas adds ds (deleted in tx) to their incidents and releases.
func (f *Feed) applyDeltas(ctx context.Context, tx bun.Tx, ds []delta) error {
	incs := map[uuid.UUID]*incidentFold{}
	rels := map[releaseKey]*releaseFold{}
	projects := map[uuid.UUID]uuid.UUID{}
	for _, d := range ds {
		projects[d.ProjectID] = d.OrgID
		in := incs[d.IncidentID]
		if in == nil {
			in = &incidentFold{}
			incs[d.IncidentID] = in
		}
		in.n += d.N
		if d.LastSeen.After(in.lastSeen) {
			in.lastSeen = d.LastSeen
		}
		if d.ID > in.latestID {
			in.latestID, in.latest = d.ID, d.LatestEvent
		}
		if d.Release != "" && d.ID > in.relID {
			in.relID, in.release = d.ID, d.Release
		}
		if d.Release == "" || !d.CountRelease {
			continue
		}
		k := releaseKey{d.ProjectID, d.Environment, d.Release}
		r := rels[k]
		if r == nil {
			r = &releaseFold{first: d.LastSeen, last: d.LastSeen}
			rels[k] = r
		}
		r.n += d.N
		if d.LastSeen.Before(r.first) {
			r.first = d.LastSeen
		}
		if d.LastSeen.After(r.last) {
			r.last = d.LastSeen
		}
		r.server, r.browser = r.server || !d.Browser, r.browser || d.Browser
		if d.Browser {
			r.browserN += d.N
			if r.browserFirst.IsZero() || d.LastSeen.Before(r.browserFirst) {
				r.browserFirst = d.LastSeen
			}
		} else {
			r.serverN += d.N
			if r.serverFirst.IsZero() || d.LastSeen.Before(r.serverFirst) {
				r.serverFirst = d.LastSeen
			}
		}
	}
	if err := foldIncidents(ctx, tx, incs, f.s.Now()); err != nil {
		return err
	}
	if err := foldReleases(ctx, tx, rels); err != nil {
		return err
	}
	for p, org := range projects {
		if err := domain.Notify(ctx, tx, liveNotice(&FeedSender{OrgID: org, ProjectID: p})); err != nil {
			return fmt.Errorf("feed: notify: %w", err)
		}
	}
	return nil
}

// foldIncidents locks the incidents — in the general path's order, so a
// fold never deadlocks with a batch — and adds their deltas.
func foldIncidents(ctx context.Context, tx bun.Tx, incs map[uuid.UUID]*incidentFold, now time.Time) error {
	n := len(incs)
	ids := make([]string, 0, n)
	for id := range incs {
		ids = append(ids, id.String())
	}
	var locked []uuid.UUID
	if err := tx.NewRaw(`SELECT id FROM incidents WHERE id = ANY(?::uuid[])
		ORDER BY project_id, environment, fingerprint FOR NO KEY UPDATE`, pgdialect.Array(ids)).Scan(ctx, &locked); err != nil {
		return fmt.Errorf("feed: lock the folded incidents: %w", err)
	}
	if len(locked) == 0 {
		return nil // deleted meanwhile: their deltas fold into nothing
	}
	uids := make([]string, len(locked))
	counts := make([]int64, len(locked))
	seen := make([]time.Time, len(locked))
	latest, rels := make([]string, len(locked)), make([]string, len(locked))
	for i, id := range locked {
		in := incs[id]
		uids[i], counts[i], seen[i], latest[i], rels[i] = id.String(), in.n, in.lastSeen, in.latest, in.release
	}
	if _, err := tx.ExecContext(ctx, `UPDATE incidents AS i SET
		event_count = i.event_count + u.n, last_seen = GREATEST(i.last_seen, u.s), latest_event_id = u.l,
		release = CASE WHEN u.r <> '' THEN u.r ELSE i.release END, updated_at = ?
		FROM unnest(?::uuid[], ?::bigint[], ?::timestamptz[], ?::text[], ?::text[]) AS u(id, n, s, l, r)
		WHERE i.id = u.id`, now, pgdialect.Array(uids), pgdialect.Array(counts), pgdialect.Array(seen), pgdialect.Array(latest), pgdialect.Array(rels)); err != nil {
		return fmt.Errorf("feed: fold into the incidents: %w", err)
	}
	return nil
}

// foldReleases adds the release counts, in TrackStmt's lock order; a
// release of a project deleted meanwhile is not recreated.
func foldReleases(ctx context.Context, tx bun.Tx, rels map[releaseKey]*releaseFold) error {
	if len(rels) == 0 {
		return nil
	}
	keys := make([]releaseKey, 0, len(rels))
	for k := range rels {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.project != b.project {
			return a.project.String() < b.project.String()
		}
		if a.env != b.env {
			return a.env < b.env
		}
		return a.version < b.version
	})
	n := len(keys)
	projects := make([]string, n)
	envs, vers := make([]string, n), make([]string, n)
	counts := make([]int64, n)
	firsts, lasts := make([]time.Time, n), make([]time.Time, n)
	servers, browsers := make([]bool, n), make([]bool, n)
	serverNs, browserNs := make([]int64, n), make([]int64, n)
	serverFirsts, browserFirsts := make([]*time.Time, n), make([]*time.Time, n)
	for i, k := range keys {
		r := rels[k]
		projects[i], envs[i], vers[i], counts[i] = k.project.String(), k.env, k.version, r.n
		firsts[i], lasts[i], servers[i], browsers[i] = r.first, r.last, r.server, r.browser
		serverNs[i], browserNs[i] = r.serverN, r.browserN
		if !r.serverFirst.IsZero() {
			serverFirsts[i] = &r.serverFirst
		}
		if !r.browserFirst.IsZero() {
			browserFirsts[i] = &r.browserFirst
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO releases AS r (project_id, environment, version, first_seen, last_seen, event_count, seen_server, seen_browser,
			server_first_seen, server_event_count, browser_first_seen, browser_event_count)
		SELECT u.p, u.e, u.v, u.f, u.l, u.n, u.ss, u.sb, u.sf, u.sn, u.bf, u.bn
		FROM unnest(?::uuid[], ?::text[], ?::text[], ?::timestamptz[], ?::timestamptz[], ?::bigint[], ?::boolean[], ?::boolean[],
		            ?::timestamptz[], ?::bigint[], ?::timestamptz[], ?::bigint[])
		     WITH ORDINALITY AS u(p, e, v, f, l, n, ss, sb, sf, sn, bf, bn, o)
		WHERE EXISTS (SELECT 1 FROM `+domain.LiveProjects+` p WHERE p.id = u.p)
		ORDER BY u.o
		ON CONFLICT (project_id, environment, version) DO UPDATE SET
			first_seen = LEAST(COALESCE(r.first_seen, EXCLUDED.first_seen), EXCLUDED.first_seen),
			seen_server = r.seen_server OR EXCLUDED.seen_server,
			seen_browser = r.seen_browser OR EXCLUDED.seen_browser,
			server_first_seen = LEAST(COALESCE(r.server_first_seen, EXCLUDED.server_first_seen), EXCLUDED.server_first_seen),
			server_event_count = r.server_event_count + EXCLUDED.server_event_count,
			browser_first_seen = LEAST(COALESCE(r.browser_first_seen, EXCLUDED.browser_first_seen), EXCLUDED.browser_first_seen),
			browser_event_count = r.browser_event_count + EXCLUDED.browser_event_count,
			last_seen = GREATEST(COALESCE(r.last_seen, EXCLUDED.last_seen), EXCLUDED.last_seen),
			event_count = r.event_count + EXCLUDED.event_count`,
		pgdialect.Array(projects), pgdialect.Array(envs), pgdialect.Array(vers), pgdialect.Array(firsts), pgdialect.Array(lasts),
		pgdialect.Array(counts), pgdialect.Array(servers), pgdialect.Array(browsers),
		pgdialect.Array(serverFirsts), pgdialect.Array(serverNs), pgdialect.Array(browserFirsts), pgdialect.Array(browserNs)); err != nil {
		return fmt.Errorf("feed: fold into the releases: %w", err)
	}
	return nil
}

// foldRound is one round of the process's folds (the coalescing loop's).
func (f *Feed) foldRound(ctx context.Context, _ []struct{}) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := f.FoldDeltas(ctx); err != nil {
		f.s.Log.Warn("feed: fold of incident deltas failed; the next one, or the periodic fold, catches up", "error", err)
	}
}
