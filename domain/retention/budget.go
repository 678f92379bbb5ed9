package retention

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/uptrace/bun/dialect/pgdialect"

	"anvil/domain"
)

// The daily event budget (docs/retention.md, "The daily event budget";
// docs/contracts/feed.md, "Order of the checks"). Both doors count a
// request's events right after the parse — on arrival, before any event
// is validated or stored, so that an overloaded store cannot hide them —
// and refuse the whole request when they would take the project's count of
// the UTC day past its budget.
//
// Counting costs a request no database write: each process adds its counts
// in memory and writes them to feed_daily_usage about once a second, in
// one statement for all its projects, reading back the totals every
// process has written. A process re-reads a project's budget and total at
// most every few seconds; so the budget is exact within one process, and
// several processes together may overshoot it by what the others counted
// in those few seconds.

// Refusal is a request over its project's daily budget.
type Refusal struct {
	Budget   int64
	Used     int64
	ResetsAt time.Time // the next UTC midnight
	// RetryAfter is the time until ResetsAt, in whole seconds (at least 1).
	RetryAfter time.Duration
}

// Error is the refusal in words.
func (rf *Refusal) Error() string {
	return fmt.Sprintf("this project's daily event budget of %d events is spent (%d counted today, UTC); it resets at %s",
		rf.Budget, rf.Used, rf.ResetsAt.Format(time.RFC3339))
}

// Budget counts events per project and UTC day and refuses what is over.
type Budget struct {
	r *Service
	// TTL is how long a process trusts its copy of a project's budget and
	// of the day's total from the database.
	TTL time.Duration
	// Every is how often the counts are written.
	Every time.Duration

	mu       sync.Mutex
	pending  map[dayKey]int64 // counted here, not written yet
	inflight map[dayKey]int64 // taken by the write in flight, not in base yet
	base     map[dayKey]int64 // the database's total as last read or written
	limits   map[uuid.UUID]budgetLimit

	flushMu sync.Mutex // one write (or total re-read) at a time
	startMu sync.Mutex
	stop    chan struct{}
	done    chan struct{}
}

type dayKey struct {
	project uuid.UUID
	day     int64 // days since the Unix epoch, UTC
}

type budgetLimit struct {
	n       int64 // 0: none
	checked time.Time
}

func newBudget(r *Service) *Budget {
	return &Budget{r: r, TTL: 5 * time.Second, Every: time.Second, pending: map[dayKey]int64{}, base: map[dayKey]int64{},
		limits: map[uuid.UUID]budgetLimit{}}
}

// Budget is the service's daily event budget counter.
func (r *Service) Budget() *Budget { return r.budget }

func unixDay(t time.Time) int64 { return t.Unix() / 86400 }

func dayOf(d int64) time.Time { return time.Unix(d*86400, 0).UTC() }

// Admit counts the n events of a request of the project, or refuses the
// request (counting nothing) when they would take the day's count past
// the budget. A failure to read the budget admits: the budget never turns
// a database hiccup into refusals of its own.
func (b *Budget) Admit(ctx context.Context, orgID, projectID uuid.UUID, n int) *Refusal {
	now := b.r.now()
	key := dayKey{projectID, unixDay(now)}
	b.mu.Lock()
	lim, known := b.limits[projectID]
	_, haveBase := b.base[key]
	b.mu.Unlock()
	if !known || now.Sub(lim.checked) >= b.TTL || now.Before(lim.checked) || !haveBase {
		if fresh, err := b.refresh(ctx, orgID, key, now); err == nil {
			lim = fresh
		} else {
			b.r.s.Log.Warn("retention: daily budget lookup failed; admitting", "project_id", projectID, "error", err.Error())
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	// What a write in flight took is counted too: between taking the
	// counts and reading the totals back it is in neither pending nor base.
	used := b.base[key] + b.inflight[key] + b.pending[key]
	if lim.n > 0 && used+int64(n) > lim.n {
		reset := dayOf(key.day + 1)
		wait := (reset.Sub(now) + time.Second - 1).Truncate(time.Second)
		wait = min(max(wait, time.Second), Day)
		return &Refusal{Budget: lim.n, Used: used, ResetsAt: reset, RetryAfter: wait}
	}
	b.pending[key] += int64(n)
	return nil
}

// refresh reads the project's budget and the day's total.
func (b *Budget) refresh(ctx context.Context, orgID uuid.UUID, key dayKey, now time.Time) (budgetLimit, error) {
	pol, err := b.r.Effective(ctx, orgID, key.project)
	if err != nil {
		return budgetLimit{}, err
	}
	b.flushMu.Lock() // a write in flight is in neither pending nor base
	defer b.flushMu.Unlock()
	var total []int64
	if err := b.r.s.DB.NewRaw(`SELECT events FROM feed_daily_usage WHERE project_id = ? AND day = ?::date`,
		key.project, dayOf(key.day).Format(time.DateOnly)).Scan(ctx, &total); err != nil {
		return budgetLimit{}, fmt.Errorf("retention: daily usage: %w", err)
	}
	lim := budgetLimit{n: pol.DailyEventBudget, checked: now}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.limits[key.project] = lim
	b.base[key] = 0
	if len(total) > 0 {
		b.base[key] = total[0]
	}
	return lim, nil
}

// forget drops every remembered budget (a policy changed in this process).
func (b *Budget) forget() {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.limits)
}

// Flush writes the counts not written yet, in one statement, and keeps the
// totals it reads back. On failure the counts stay for the next flush.
func (b *Budget) Flush(ctx context.Context) error {
	b.flushMu.Lock()
	defer b.flushMu.Unlock()
	b.mu.Lock()
	taken := b.pending
	b.pending = map[dayKey]int64{}
	b.inflight = taken
	today := unixDay(b.r.now())
	for k := range b.base {
		if k.day < today-1 {
			delete(b.base, k)
		}
	}
	b.mu.Unlock()
	if len(taken) == 0 {
		return nil
	}
	ids, days, ns := make([]pgtype.UUID, 0, len(taken)), make([]string, 0, len(taken)), make([]int64, 0, len(taken))
	for k, n := range taken {
		ids = append(ids, pgtype.UUID{Bytes: k.project, Valid: true})
		days = append(days, dayOf(k.day).Format(time.DateOnly))
		ns = append(ns, n)
	}
	var rows []struct {
		ProjectID uuid.UUID `bun:"project_id"`
		Day       time.Time `bun:"day"`
		Events    int64     `bun:"events"`
	}
	err := b.r.s.DB.NewRaw(`INSERT INTO feed_daily_usage AS u (project_id, day, events)
		SELECT p, d::date, n FROM unnest(?::uuid[], ?::text[], ?::bigint[]) AS t(p, d, n)
		WHERE EXISTS (SELECT 1 FROM `+domain.LiveProjects+` p WHERE id = t.p)
		ON CONFLICT (project_id, day) DO UPDATE SET events = u.events + EXCLUDED.events
		RETURNING project_id, day, events`, pgdialect.Array(ids), pgdialect.Array(days), pgdialect.Array(ns)).Scan(ctx, &rows)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inflight = nil
	if err != nil {
		for k, n := range taken {
			b.pending[k] += n
		}
		return fmt.Errorf("retention: write the daily counts: %w", err)
	}
	for _, row := range rows {
		b.base[dayKey{row.ProjectID, unixDay(row.Day)}] = row.Events
	}
	return nil
}

// Start writes the counts every Every until Stop; a second Start is a no-op.
func (b *Budget) Start() {
	b.startMu.Lock()
	defer b.startMu.Unlock()
	if b.stop != nil {
		return
	}
	b.stop, b.done = make(chan struct{}), make(chan struct{})
	go func(stop, done chan struct{}) {
		defer close(done)
		t := time.NewTicker(b.Every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if err := b.Flush(context.Background()); err != nil {
					b.r.s.Log.Warn("retention: daily counts not written; kept for the next try", "error", err.Error())
				}
			}
		}
	}(b.stop, b.done)
}

// Stop ends the writer and writes what is left.
func (b *Budget) Stop() {
	b.startMu.Lock()
	stop, done := b.stop, b.done
	b.stop, b.done = nil, nil
	b.startMu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Flush(ctx); err != nil {
		b.r.s.Log.Warn("retention: daily counts lost at shutdown", "error", err.Error())
	}
}

// Usage is a project's count of today (UTC) and its budget (0: none).
func (b *Budget) Usage(ctx context.Context, orgID, projectID uuid.UUID) (used, budget int64, err error) {
	pol, err := b.r.Effective(ctx, orgID, projectID)
	if err != nil {
		return 0, 0, err
	}
	key := dayKey{projectID, unixDay(b.r.now())}
	var total []int64
	if err := b.r.s.DB.NewRaw(`SELECT events FROM feed_daily_usage WHERE project_id = ? AND day = ?::date`,
		projectID, dayOf(key.day).Format(time.DateOnly)).Scan(ctx, &total); err != nil {
		return 0, 0, fmt.Errorf("retention: daily usage: %w", err)
	}
	if len(total) > 0 {
		used = total[0]
	}
	b.mu.Lock()
	used += b.pending[key]
	b.mu.Unlock()
	return used, pol.DailyEventBudget, nil
}
