package domain

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// LiveEvent is a change published with NOTIFY on EventsChannel. Every web
// and worker process listens, so a page served by one process sees work
// done by a worker anywhere.
type LiveEvent struct {
	Kind      string    `json:"kind"`
	OrgID     uuid.UUID `json:"org_id"`
	ProjectID uuid.UUID `json:"project_id"`
	RunID     uuid.UUID `json:"run_id"`
	Status    string    `json:"status"`
	Raw       []byte    `json:"-"`
}

// Subscription receives the events its filter accepts. C is buffered; a
// subscriber that falls behind misses events, so every consumer treats an
// event as "something changed, read the truth" rather than as the data.
type Subscription struct {
	C      chan LiveEvent
	filter func(LiveEvent) bool
}

// Hub fans NOTIFY payloads out to in-process subscribers over one dedicated
// LISTEN connection, reconnecting after failures.
type Hub struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	mu   sync.Mutex
	subs map[*Subscription]struct{}
}

// NewHub builds a hub; call Run to start listening.
func NewHub(pool *pgxpool.Pool, log *slog.Logger) *Hub {
	if log == nil {
		log = slog.Default()
	}
	return &Hub{pool: pool, log: log, subs: map[*Subscription]struct{}{}}
}

// Subscribe registers a subscriber; call the returned func to leave.
func (h *Hub) Subscribe(filter func(LiveEvent) bool) (*Subscription, func()) {
	s := &Subscription{C: make(chan LiveEvent, 64), filter: filter}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s, func() {
		h.mu.Lock()
		delete(h.subs, s)
		h.mu.Unlock()
	}
}

func (h *Hub) dispatch(payload string) {
	var ev LiveEvent
	if err := json.Unmarshal([]byte(payload), &ev); err != nil {
		return
	}
	ev.Raw = []byte(payload)
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.filter != nil && !s.filter(ev) {
			continue
		}
		select {
		case s.C <- ev:
		default: // slow subscriber: it re-reads the truth on its next event
		}
	}
}

// Run listens until ctx ends.
func (h *Hub) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := h.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		h.log.Warn("live events: listener lost; reconnecting", "error", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff < 5*time.Second {
			backoff *= 2
		}
		// Subscribers missed whatever happened meanwhile: nudge them all.
		h.dispatchAll()
	}
}

func (h *Hub) dispatchAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		select {
		case s.C <- LiveEvent{Kind: "resync"}:
		default:
		}
	}
}

func (h *Hub) listen(ctx context.Context) error {
	conn, err := h.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+EventsChannel); err != nil {
		return err
	}
	defer conn.Exec(context.WithoutCancel(ctx), "UNLISTEN "+EventsChannel) //nolint:errcheck // the connection goes back to the pool either way
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return err
		}
		h.dispatch(n.Payload)
	}
}
