package release

import (
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"anvil/domain/internal/dbutil"
)

// Tracking releases is on the feed's hot path (docs/releases.md,
// "Learning releases"): the store aggregates a group's new events per
// release as it counts them, and TrackStmt upserts each release once per
// group, in the statement batch that commits the group — no round trip of
// its own. It comes last before the COMMIT so that the release rows, which
// concurrent groups of a project share, are held for as short a time as
// possible, and in (environment, version) order so that two groups never
// wait on each other crosswise.

// Key is one release of an environment.
type Key struct{ Environment, Version string }

// Tally is a stored group's new events per release, and the incidents it
// created with the release of their first event.
type Tally struct {
	Events    map[Key]int64
	created   []pgtype.UUID
	createdIn []string
	newIn     map[Key]int64
}

// Count counts one new event of a release ("" is no release: not counted).
func (t *Tally) Count(env, version string) {
	if version == "" {
		return
	}
	if t.Events == nil {
		t.Events = map[Key]int64{}
	}
	t.Events[Key{env, version}]++
}

// Created records an incident the group created, first seen in version.
func (t *Tally) Created(id uuid.UUID, env, version string) {
	if version == "" {
		return
	}
	if t.newIn == nil {
		t.newIn = map[Key]int64{}
	}
	t.newIn[Key{env, version}]++
	t.created = append(t.created, dbutil.PgUUID(id))
	t.createdIn = append(t.createdIn, version)
}

// Empty reports whether there is nothing to write.
func (t *Tally) Empty() bool { return len(t.Events) == 0 }

// TrackStmt upserts the tally's releases of projectID, seen at now, and
// records the release each created incident was first seen in. browser
// says the events came from a browser connection (an anv_pub_ key): each
// kind of connection has its own count and first-seen time on the row, and
// only the server's ship a fix or count as served (docs/releases.md,
// "Sources and trust").
func TrackStmt(projectID uuid.UUID, t *Tally, now time.Time, browser bool) dbutil.Stmt {
	keys := make([]Key, 0, len(t.Events))
	for k := range t.Events {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Environment != keys[j].Environment {
			return keys[i].Environment < keys[j].Environment
		}
		return keys[i].Version < keys[j].Version
	})
	n := len(keys)
	envs, vers := make([]string, n), make([]string, n)
	counts, news := make([]int64, n), make([]int64, n)
	for i, k := range keys {
		envs[i], vers[i], counts[i], news[i] = k.Environment, k.Version, t.Events[k], t.newIn[k]
	}
	created, createdIn := t.created, t.createdIn
	if created == nil {
		created, createdIn = []pgtype.UUID{}, []string{}
	}
	return dbutil.Stmt{SQL: `WITH r AS (
		INSERT INTO releases AS r (project_id, environment, version, first_seen, last_seen, event_count, new_incidents, seen_server, seen_browser,
			server_first_seen, server_event_count, browser_first_seen, browser_event_count)
		SELECT $1, u.e, u.v, $2, $2, u.n, u.c, NOT $9::boolean, $9::boolean,
			CASE WHEN $9::boolean THEN NULL ELSE $2::timestamptz END, CASE WHEN $9::boolean THEN 0 ELSE u.n END,
			CASE WHEN $9::boolean THEN $2::timestamptz END, CASE WHEN $9::boolean THEN u.n ELSE 0 END
		FROM unnest($3::text[], $4::text[], $5::bigint[], $6::bigint[]) AS u(e, v, n, c)
		ON CONFLICT (project_id, environment, version) DO UPDATE SET
			first_seen = COALESCE(r.first_seen, EXCLUDED.first_seen),
			seen_server = r.seen_server OR EXCLUDED.seen_server,
			seen_browser = r.seen_browser OR EXCLUDED.seen_browser,
			server_first_seen = COALESCE(r.server_first_seen, EXCLUDED.server_first_seen),
			server_event_count = r.server_event_count + EXCLUDED.server_event_count,
			browser_first_seen = COALESCE(r.browser_first_seen, EXCLUDED.browser_first_seen),
			browser_event_count = r.browser_event_count + EXCLUDED.browser_event_count,
			last_seen = GREATEST(COALESCE(r.last_seen, EXCLUDED.last_seen), EXCLUDED.last_seen),
			event_count = r.event_count + EXCLUDED.event_count,
			new_incidents = r.new_incidents + EXCLUDED.new_incidents
		RETURNING 1)
		UPDATE incidents AS i SET first_release = u.v FROM unnest($7::uuid[], $8::text[]) AS u(id, v) WHERE i.id = u.id`,
		Args: []any{dbutil.PgUUID(projectID), now, envs, vers, counts, news, created, createdIn, browser}}
}
