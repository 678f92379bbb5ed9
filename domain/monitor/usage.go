package monitor

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun/dialect/pgdialect"

	"anvil/domain"
)

// The day's check-in count (docs/monitors.md, "From the Sentry SDKs"):
// counted apart from events in feed_daily_usage.checkins. A committed
// check-in is counted in memory and the counts are written about once a
// second, in one statement for every project — as the event budget does
// (domain/retention/budget.go): one hot row per project and day, updated
// in every check-in's transaction, would hold each check-in of a project
// behind the previous one's commit.

type usageKey struct {
	project uuid.UUID
	day     string // YYYY-MM-DD, UTC
}

type usage struct {
	mu      sync.Mutex
	pending map[usageKey]int64
	flushMu sync.Mutex
	stop    chan struct{}
	done    chan struct{}
}

func (u *usage) add(project uuid.UUID, at time.Time) {
	u.mu.Lock()
	if u.pending == nil {
		u.pending = map[usageKey]int64{}
	}
	u.pending[usageKey{project, at.UTC().Format(time.DateOnly)}]++
	u.mu.Unlock()
}

// FlushUsage writes the counted check-ins; a failed write keeps them for
// the next one.
func (ms *Service) FlushUsage(ctx context.Context) error {
	u := &ms.usage
	u.flushMu.Lock()
	defer u.flushMu.Unlock()
	u.mu.Lock()
	pending := u.pending
	u.pending = nil
	u.mu.Unlock()
	if len(pending) == 0 {
		return nil
	}
	projects, days, counts := make([]string, 0, len(pending)), make([]string, 0, len(pending)), make([]int64, 0, len(pending))
	for k, n := range pending {
		projects, days, counts = append(projects, k.project.String()), append(days, k.day), append(counts, n)
	}
	_, err := ms.s.DB.NewRaw(`INSERT INTO feed_daily_usage AS u (project_id, day, checkins)
		SELECT p, d, c FROM unnest(?::uuid[], ?::date[], ?::bigint[]) AS x(p, d, c)
		WHERE EXISTS (SELECT 1 FROM `+domain.LiveProjects+` lp WHERE lp.id = x.p)
		ON CONFLICT (project_id, day) DO UPDATE SET checkins = u.checkins + EXCLUDED.checkins`,
		pgdialect.Array(projects), pgdialect.Array(days), pgdialect.Array(counts)).Exec(ctx)
	if err != nil {
		u.mu.Lock()
		if u.pending == nil {
			u.pending = map[usageKey]int64{}
		}
		for k, n := range pending {
			u.pending[k] += n
		}
		u.mu.Unlock()
		return fmt.Errorf("monitors: write the day's check-ins: %w", err)
	}
	return nil
}

// Start writes the counts every second until Stop.
func (ms *Service) Start(ctx context.Context) {
	u := &ms.usage
	if u.stop != nil {
		return
	}
	u.stop, u.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(u.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-u.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if err := ms.FlushUsage(context.WithoutCancel(ctx)); err != nil {
					slog.Default().Warn("monitors: check-in counts not written; kept for the next write", "error", err)
				}
			}
		}
	}()
}

// Stop ends the writer and writes what is still counted.
func (ms *Service) Stop(ctx context.Context) error {
	u := &ms.usage
	if u.stop != nil {
		close(u.stop)
		<-u.done
		u.stop = nil
	}
	return ms.FlushUsage(ctx)
}
