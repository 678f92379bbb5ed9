package main

// feed/indexes: what each index of feed_events costs a stored event
// (docs/feed.md, "The write path and its costs"). The feed stores 10,000
// events of ten faults; then, for the table as it is, without each of its
// indexes in turn and without any, the stored rows are inserted ten times
// over into a fresh copy of it (INSERT … SELECT, in one backend), and the
// backend's CPU per row is read from /proc — a figure a busy machine
// slows but does not shift much, where a rate would swing with the load.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

func init() {
	register("feed/indexes", feedBenchIndexes)
}

// feedEventCols are the columns of feed_events.
var feedEventCols = []string{"org_id", "event_id_key", "project_id", "connection_id", "environment", "fingerprint",
	"incident_id", "received_at", "occurred_at", "payload"}

const (
	feedIndexBatches = 200 // of 50 events: 10,000 rows
	feedIndexRounds  = 3   // per variant; the median
)

func feedBenchIndexes(ctx context.Context, env *benchEnv) error {
	f, err := env.newFeedFixture(ctx, "indexes@feed.test", 1, "ANVIL_FEED_RATE_PER_MIN=1000000")
	if err != nil {
		return err
	}
	defer f.Stop()
	for b := range feedIndexBatches {
		evs := make([]any, feedBenchBatch)
		for e := range evs {
			evs[e] = feedBenchEvent(b*feedBenchBatch + e)
		}
		body, _ := json.Marshal(evs)
		if _, err := feedBenchPost(ctx, f, "/api/feed/events/batch", f.Tokens[0], body); err != nil {
			return fmt.Errorf("store the events: %w", err)
		}
	}
	conn, err := pgx.Connect(ctx, f.DBURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	// Each index as feed_events has it, to build again on the copies.
	type index struct{ name, def string }
	var indexes []index
	rows, err := conn.Query(ctx, `SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'feed_events' ORDER BY indexname`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var ix index
		if err := rows.Scan(&ix.name, &ix.def); err != nil {
			return err
		}
		indexes = append(indexes, ix)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var pid int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		return err
	}
	// perRow is the backend's CPU per row inserting into a copy of
	// feed_events without the index drop ("" keeps all), the median.
	perRow := func(drop string) (float64, error) {
		us := make([]float64, feedIndexRounds)
		for i := range us {
			if _, err := conn.Exec(ctx, `DROP TABLE IF EXISTS bench_idx;
				CREATE TABLE bench_idx (LIKE feed_events INCLUDING DEFAULTS INCLUDING STORAGE INCLUDING COMPRESSION)`); err != nil {
				return 0, err
			}
			for _, ix := range indexes {
				if ix.name == drop || drop == "*" {
					continue
				}
				def := strings.Replace(ix.def, " ON public.feed_events ", " ON public.bench_idx ", 1)
				def = strings.Replace(def, "INDEX "+ix.name+" ", "INDEX bench_"+ix.name+" ", 1)
				if _, err := conn.Exec(ctx, def); err != nil {
					return 0, fmt.Errorf("%s: %w", def, err)
				}
			}
			checkpoint(ctx, f.DBURL)
			before, err := procCPU(pid)
			if err != nil {
				return 0, err
			}
			// Ten times each row, under keys of the same length: enough
			// rows for /proc's 10 ms ticks.
			tag, err := conn.Exec(ctx, `INSERT INTO bench_idx (`+strings.Join(feedEventCols, ", ")+`)
				SELECT org_id, overlay(event_id_key::text placing lpad(g::text, 2, '0') from 1 for 2)::uuid, project_id, connection_id,
				       environment, fingerprint, incident_id, received_at, occurred_at, payload
				FROM feed_events, generate_series(1, 10) AS g`)
			if err != nil {
				return 0, err
			}
			after, err := procCPU(pid)
			if err != nil {
				return 0, err
			}
			us[i] = float64((after - before).Microseconds()) / float64(tag.RowsAffected())
		}
		sort.Float64s(us)
		return us[len(us)/2], nil
	}
	all, err := perRow("")
	if err != nil {
		return err
	}
	env.note("feed", "indexes_all_cpu_us_per_row", float64(int(all*10))/10)
	for _, ix := range indexes {
		without, err := perRow(ix.name)
		if err != nil {
			return err
		}
		env.note("feed", "index_"+strings.TrimPrefix(ix.name, "feed_events_")+"_cpu_us_per_row", float64(int((all-without)*10))/10)
	}
	none, err := perRow("*")
	if err != nil {
		return err
	}
	env.note("feed", "indexes_none_cpu_us_per_row", float64(int(none*10))/10)
	return feedBenchCopyVsInsert(ctx, env, f.DBURL, conn, pid)
}

// feedBenchCopyVsInsert stores the same rows — read back, payload as text
// — into a copy of feed_events with its indexes by a binary COPY and by the
// general path's multi-row INSERT … SELECT FROM unnest(…), in batches of
// 500 (a group of ten batches of 50), and prints the backend's CPU per row
// of each (the median of feedIndexRounds).
func feedBenchCopyVsInsert(ctx context.Context, env *benchEnv, dbURL string, conn *pgx.Conn, pid int) error {
	rows, err := conn.Query(ctx, `SELECT org_id, event_id_key, project_id, connection_id, environment, fingerprint,
		incident_id, received_at, occurred_at, payload::text FROM feed_events`)
	if err != nil {
		return err
	}
	src, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]any, error) { return r.Values() })
	if err != nil {
		return err
	}
	const group = 500
	measure := func(store func(part [][]any) error) (float64, error) {
		us := make([]float64, feedIndexRounds)
		for i := range us {
			if _, err := conn.Exec(ctx, `DROP TABLE IF EXISTS bench_ins; CREATE TABLE bench_ins (LIKE feed_events INCLUDING ALL)`); err != nil {
				return 0, err
			}
			checkpoint(ctx, dbURL)
			before, err := procCPU(pid)
			if err != nil {
				return 0, err
			}
			for at := 0; at < len(src); at += group {
				if err := store(src[at:min(at+group, len(src))]); err != nil {
					return 0, err
				}
			}
			after, err := procCPU(pid)
			if err != nil {
				return 0, err
			}
			us[i] = float64((after - before).Microseconds()) / float64(len(src))
		}
		sort.Float64s(us)
		return us[len(us)/2], nil
	}
	copyUS, err := measure(func(part [][]any) error {
		_, err := conn.CopyFrom(ctx, pgx.Identifier{"bench_ins"}, feedEventCols, pgx.CopyFromRows(part))
		return err
	})
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	insertUS, err := measure(func(part [][]any) error {
		cols := make([][]any, len(feedEventCols))
		for _, r := range part {
			for c := range cols {
				cols[c] = append(cols[c], r[c])
			}
		}
		args := make([]any, len(cols))
		for c := range cols {
			args[c] = cols[c]
		}
		_, err := conn.Exec(ctx, `INSERT INTO bench_ins (`+strings.Join(feedEventCols, ", ")+`)
			SELECT u.o, u.k, u.p, u.c, u.e, u.f, u.i, u.r, u.t, u.d::json
			FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::uuid[], $5::text[], $6::text[], $7::uuid[], $8::timestamptz[], $9::timestamptz[], $10::text[])
			     AS u(o, k, p, c, e, f, i, r, t, d)
			ON CONFLICT (org_id, event_id_key) DO NOTHING`, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	env.note("feed", "store_copy_cpu_us_per_row", float64(int(copyUS*10))/10)
	env.note("feed", "store_insert_unnest_cpu_us_per_row", float64(int(insertUS*10))/10)
	return nil
}
