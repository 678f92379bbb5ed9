package main

// feed/commit: what the commit's settings do to the storm of feed/limit
// (docs/feed.md, "The write path and its costs"). The same storm on a
// fresh database each time: as configured, with wal_compression = lz4, and
// with synchronous_commit = off — the last only as a measure of what the
// commit's flush costs: it answers before the WAL is on disk, which breaks
// "persisted before the answer" (seed 004), so anvil never sets it.

import (
	"context"
)

func init() {
	register("feed/commit", feedBenchCommit)
}

func feedBenchCommit(ctx context.Context, env *benchEnv) error {
	variants := []struct {
		name     string
		settings []string
	}{
		{"default", nil},
		{"wal_compression_lz4", []string{"wal_compression = lz4"}},
		{"synchronous_commit_off", []string{"synchronous_commit = off"}},
	}
	for _, v := range variants {
		f, err := env.newFeedFixtureSettings(ctx, "commit@feed.test", 1, v.settings, "ANVIL_FEED_RATE_PER_MIN=1000000")
		if err != nil {
			return err
		}
		st, err := feedLimitStorm(ctx, f)
		f.Stop()
		if err != nil {
			return err
		}
		env.note("feed", "commit_"+v.name+"_events_per_s", float64(int(st.eps)))
		env.note("feed", "commit_"+v.name+"_p99_ms", ms(percentile(st.lat, 99)))
		env.note("feed", "commit_"+v.name+"_postgres_cpu_us", st.postgresUS)
	}
	return nil
}
