// Package feedstats counts the outcomes of the feed's doors per connection:
// events accepted, events refused by reason code, and
// the last refusal's message, so that an operator sees on the Feed page why
// an SDK's events do not arrive without reading the SDK's debug log.
//
// The ingest must not pay a database write per request for a statistic, so
// a Recorder counts in this process's memory and a flusher adds the counts
// to hourly buckets (table feed_outcomes) about once a second, in one
// statement. A process that dies loses at most its last second of counts —
// the events themselves were stored before their answer, as always.
package feedstats

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"anvil/domain/event"
)

// Accepted is the reason_code under which accepted events are counted.
const Accepted = ""

// Retention is how long buckets are kept; the page shows the last 24 hours.
const Retention = 48 * time.Hour

type key struct {
	conn   uuid.UUID
	hour   time.Time
	reason string
}

type tally struct {
	n   int64
	msg string
	at  time.Time
}

// Recorder counts outcomes in memory and flushes them periodically.
type Recorder struct {
	db       bun.IDB
	log      *slog.Logger
	now      func() time.Time
	interval time.Duration

	mu         sync.Mutex
	pending    map[key]*tally
	lastPruned time.Time

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// New builds a recorder that flushes every interval (a second when zero).
func New(db bun.IDB, log *slog.Logger, interval time.Duration) *Recorder {
	if interval <= 0 {
		interval = time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	return &Recorder{db: db, log: log, now: time.Now, interval: interval, pending: map[key]*tally{},
		stop: make(chan struct{}), done: make(chan struct{})}
}

// Record counts one answer of a door: how many events of the connection
// were accepted and which were refused. It only touches memory.
func (r *Recorder) Record(conn uuid.UUID, accepted int, rejected []event.Rejection) {
	if accepted == 0 && len(rejected) == 0 {
		return
	}
	now := r.now()
	hour := now.UTC().Truncate(time.Hour)
	r.mu.Lock()
	defer r.mu.Unlock()
	if accepted > 0 {
		r.add(key{conn, hour, Accepted}, int64(accepted), "", now)
	}
	for i := range rejected {
		r.add(key{conn, hour, rejected[i].ReasonCode}, 1, rejected[i].Message, now)
	}
}

func (r *Recorder) add(k key, n int64, msg string, at time.Time) {
	t := r.pending[k]
	if t == nil {
		t = &tally{}
		r.pending[k] = t
	}
	t.n += n
	if !at.Before(t.at) {
		t.msg, t.at = msg, at
	}
}

// Start runs the flusher until Stop.
func (r *Recorder) Start() {
	go func() {
		defer close(r.done)
		tick := time.NewTicker(r.interval)
		defer tick.Stop()
		for {
			select {
			case <-r.stop:
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				r.flushLogged(ctx)
				cancel()
				return
			case <-tick.C:
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				r.flushLogged(ctx)
				cancel()
			}
		}
	}()
}

// Stop flushes what is pending one last time and ends the flusher. It may
// be called more than once.
func (r *Recorder) Stop() {
	r.stopOnce.Do(func() { close(r.stop) })
	<-r.done
}

func (r *Recorder) flushLogged(ctx context.Context) {
	if err := r.Flush(ctx); err != nil {
		r.log.Warn("feedstats: flush failed; the counts are kept for the next one", "error", err.Error())
	}
}

// upsert adds a flush's tallies to their buckets. Connections deleted since
// (with their project) are skipped by the join rather than failing the
// whole statement on the foreign key.
const upsert = `INSERT INTO feed_outcomes (connection_id, hour, reason_code, count, last_message, last_at)
SELECT u.conn, u.hour, u.reason, u.n, u.msg, u.at
FROM unnest(?::uuid[], ?::timestamptz[], ?::text[], ?::bigint[], ?::text[], ?::timestamptz[]) AS u(conn, hour, reason, n, msg, at)
JOIN feed_connections c ON c.id = u.conn
ON CONFLICT (connection_id, hour, reason_code) DO UPDATE SET
  count = feed_outcomes.count + EXCLUDED.count,
  last_message = CASE WHEN EXCLUDED.last_at >= feed_outcomes.last_at THEN EXCLUDED.last_message ELSE feed_outcomes.last_message END,
  last_at = GREATEST(feed_outcomes.last_at, EXCLUDED.last_at)`

// Flush writes what is pending in one statement. On failure the counts are
// merged back, so the next flush carries them.
func (r *Recorder) Flush(ctx context.Context) error {
	r.mu.Lock()
	batch := r.pending
	r.pending = map[key]*tally{}
	prune := r.now().Sub(r.lastPruned) >= time.Hour
	if prune {
		r.lastPruned = r.now()
	}
	r.mu.Unlock()
	if prune {
		if _, err := r.db.NewRaw(`DELETE FROM feed_outcomes WHERE hour < ?`, r.now().Add(-Retention)).Exec(ctx); err != nil {
			r.log.Warn("feedstats: prune failed", "error", err.Error())
		}
	}
	if len(batch) == 0 {
		return nil
	}
	n := len(batch)
	conns, hours, reasons := make([]string, 0, n), make([]time.Time, 0, n), make([]string, 0, n)
	counts, msgs, ats := make([]int64, 0, n), make([]string, 0, n), make([]time.Time, 0, n)
	for k, t := range batch {
		conns, hours, reasons = append(conns, k.conn.String()), append(hours, k.hour), append(reasons, k.reason)
		counts, msgs, ats = append(counts, t.n), append(msgs, t.msg), append(ats, t.at)
	}
	_, err := r.db.NewRaw(upsert, pgdialect.Array(conns), pgdialect.Array(hours), pgdialect.Array(reasons),
		pgdialect.Array(counts), pgdialect.Array(msgs), pgdialect.Array(ats)).Exec(ctx)
	if err != nil {
		r.mu.Lock()
		for k, t := range batch {
			r.add(k, t.n, t.msg, t.at)
		}
		r.mu.Unlock()
		return fmt.Errorf("feedstats: flush %d buckets: %w", n, err)
	}
	return nil
}

// Summary is one connection's outcomes over a period.
type Summary struct {
	Accepted int64
	// Refused counts refused events by reason code.
	Refused map[string]int64
	// LastRefusal is the message of the most recent refusal, with its
	// reason code and time; empty when there was none.
	LastReason  string
	LastRefusal string
	LastAt      time.Time
}

// RefusedTotal is the sum of Refused.
func (s Summary) RefusedTotal() int64 {
	var n int64
	for _, v := range s.Refused {
		n += v
	}
	return n
}

// Window is the period the Feed page shows.
const Window = 24 * time.Hour

// Summaries returns the outcomes of the given connections in the hourly
// buckets that began within Window before now: the current hour and the 23
// before it. Connections with no outcome in that time are absent.
func Summaries(ctx context.Context, db bun.IDB, conns []uuid.UUID, now time.Time) (map[uuid.UUID]*Summary, error) {
	out := map[uuid.UUID]*Summary{}
	if len(conns) == 0 {
		return out, nil
	}
	ids := make([]string, len(conns))
	for i, c := range conns {
		ids[i] = c.String()
	}
	var rows []struct {
		ConnectionID uuid.UUID `bun:"connection_id"`
		ReasonCode   string    `bun:"reason_code"`
		Count        int64     `bun:"count"`
		LastMessage  string    `bun:"last_message"`
		LastAt       time.Time `bun:"last_at"`
	}
	err := db.NewRaw(`SELECT connection_id, reason_code, sum(count)::bigint AS count,
		(array_agg(last_message ORDER BY last_at DESC))[1] AS last_message, max(last_at) AS last_at
		FROM feed_outcomes WHERE connection_id = ANY(?::uuid[]) AND hour > ?
		GROUP BY connection_id, reason_code`, pgdialect.Array(ids), now.UTC().Add(-Window)).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("feedstats: summaries: %w", err)
	}
	for _, r := range rows {
		s := out[r.ConnectionID]
		if s == nil {
			s = &Summary{Refused: map[string]int64{}}
			out[r.ConnectionID] = s
		}
		if r.ReasonCode == Accepted {
			s.Accepted += r.Count
			continue
		}
		s.Refused[r.ReasonCode] += r.Count
		if r.LastAt.After(s.LastAt) {
			s.LastAt, s.LastReason, s.LastRefusal = r.LastAt, r.ReasonCode, r.LastMessage
		}
	}
	return out, nil
}
