package main

// The fix check's figure (docs/releases.md, "Proven"): one pass of the
// check over 10,000 verifying incidents of 10 projects, each shipped in its
// project's release with the ancestry answered from the cache, windows
// still open — the steady state the periodic job meets every 20 seconds.
// Goal: at most 1 s.

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun/dialect/pgdialect"
)

func init() {
	register("fixes/check", benchFixCheck)
}

func benchFixCheck(ctx context.Context, env *benchEnv) error {
	qb, err := newQueueBench(ctx, env)
	if err != nil {
		return err
	}
	defer qb.db.Close()
	ids, err := qb.projects(ctx, 10)
	if err != nil {
		return err
	}
	var ps []string
	for _, id := range ids {
		ps = append(ps, id.String())
	}
	const n = 10000
	fix, rel := "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	if _, err := qb.db.Bun.ExecContext(ctx, `INSERT INTO incidents (org_id, project_id, environment, fingerprint, title, status,
			event_count, first_seen, last_seen, fix_commit_sha, fix_source, fix_pr_number, fix_merged_at, fix_release,
			fix_shipped_at, fix_verify_until, fix_judged_at)
		SELECT ?, (?::uuid[])[1 + g % 10], 'production', 'fp-' || g, 'Error ' || g, 'PR_OPEN', 1, now() - interval '2 hours',
		       now() - interval '1 hour', ?, 'merge', g, now() - interval '1 hour', 'shop@' || ?, now() - interval '30 minutes',
		       now() + interval '1 hour', now()
		FROM generate_series(1, ?) AS g`, qb.owner.OrgID, pgdialect.Array(ps), fix, rel, n); err != nil {
		return fmt.Errorf("seed incidents: %w", err)
	}
	if _, err := qb.db.Bun.ExecContext(ctx, `INSERT INTO releases (project_id, environment, version, first_seen, last_seen, event_count)
		SELECT p::uuid, 'production', 'shop@' || ?, now() - interval '30 minutes', now(), 5000 FROM unnest(?::text[]) AS p`,
		rel, pgdialect.Array(ps)); err != nil {
		return fmt.Errorf("seed releases: %w", err)
	}
	if _, err := qb.db.Bun.ExecContext(ctx, `INSERT INTO release_ancestry (project_id, fix_sha, release_sha, answer, checked_at)
		SELECT p::uuid, ?, ?, 'yes', now() FROM unnest(?::text[]) AS p`, fix, rel, pgdialect.Array(ps)); err != nil {
		return fmt.Errorf("seed ancestry: %w", err)
	}
	if _, err := qb.db.Bun.ExecContext(ctx, `ANALYZE incidents; ANALYZE releases`); err != nil {
		return err
	}
	var lat []time.Duration
	for i := 0; i < 7; i++ {
		t0 := time.Now()
		res, err := qb.sv.Fixes.Check(ctx)
		if err != nil {
			return err
		}
		if res.Watched != n {
			return fmt.Errorf("the check watched %d incidents, want %d", res.Watched, n)
		}
		if i >= 2 { // two passes warm the caches
			lat = append(lat, time.Since(t0))
		}
	}
	lat = sortDurations(lat)
	env.note("fixes", "check_verifying_incidents", n)
	env.report("fixes", "check_p50_ms", ms(percentile(lat, 50)), 1000)
	return nil
}
