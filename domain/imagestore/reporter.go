package imagestore

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Local is a worker's own store as its Reporter needs it (domain/image's
// Store): its figures, and its clear, which passes over the images runs
// are using.
type Local interface {
	Figures() (images int, bytes, capBytes int64)
	Clear() (removed int, bytes int64)
}

const reportSQL = `WITH gone AS (DELETE FROM image_stores WHERE updated_at < ? AND id <> ?),
	up AS (INSERT INTO image_stores (id, host, images, bytes, cap_bytes, updated_at, cleared_through)
		VALUES (?, ?, ?, ?, ?, ?, (SELECT requested_at FROM image_store_clear))
		ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, images = EXCLUDED.images, bytes = EXCLUDED.bytes,
		cap_bytes = EXCLUDED.cap_bytes, updated_at = EXCLUDED.updated_at
		RETURNING cleared_through)
	SELECT c.requested_at FROM up, image_store_clear c WHERE up.cleared_through IS NULL OR c.requested_at > up.cleared_through`

// Report records a store's figures and returns the clear it has to carry
// out, if any (nil: none). One statement: it also deletes the rows of
// stores not heard from for ForgetAfter. A store first heard of takes the
// last clear requested as carried out: its images were pulled since, or
// were there before anvil knew of it.
func (sv *Service) Report(ctx context.Context, id, host string, images int, bytes, capBytes int64) (*time.Time, error) {
	now := sv.s.Now().UTC()
	var pending []time.Time
	if err := sv.s.DB.NewRaw(reportSQL, now.Add(-ForgetAfter), id, id, host, images, bytes, capBytes, now).Scan(ctx, &pending); err != nil {
		return nil, fmt.Errorf("imagestore: report %s: %w", id, err)
	}
	if len(pending) == 0 {
		return nil, nil
	}
	return &pending[0], nil
}

// Cleared records that the store carried out the clear requested at
// through, with its figures after it.
func (sv *Service) Cleared(ctx context.Context, id string, through time.Time, images int, bytes int64) error {
	_, err := sv.s.DB.NewRaw(`UPDATE image_stores SET cleared_through = GREATEST(cleared_through, ?), images = ?, bytes = ?, updated_at = ?
		WHERE id = ?`, through, images, bytes, sv.s.Now().UTC(), id).Exec(ctx)
	if err != nil {
		return fmt.Errorf("imagestore: record the clear of %s: %w", id, err)
	}
	return nil
}

// Reporter is a worker process's loop over its own store: every Every it
// reports the store's figures (one UPSERT) and carries out a clear
// requested since its last. Every worker process runs one (serve --role
// worker or all); two processes sharing a store report one row and may
// both clear it, which is harmless (a clear removes what is there and not
// in use).
type Reporter struct {
	sv    *Service
	local Local
	id    string
	host  string
	log   *slog.Logger
	// Every is the loop's interval (default Every).
	Every time.Duration

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewReporter builds the loop of the store at dir on host; its id is both,
// stable across the worker's restarts.
func (sv *Service) NewReporter(local Local, host, dir string, log *slog.Logger) *Reporter {
	if log == nil {
		log = slog.Default()
	}
	return &Reporter{sv: sv, local: local, id: host + ":" + dir, host: host, log: log, Every: Every}
}

// Start reports at once and then every Every, until Stop or ctx's end.
// Starting a running reporter does nothing.
func (r *Reporter) Start(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		return
	}
	ctx, r.cancel = context.WithCancel(ctx)
	r.done = make(chan struct{})
	go r.loop(ctx, r.done, r.Every)
}

// Stop ends the loop and waits for a pass under way.
func (r *Reporter) Stop() {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.cancel, r.done = nil, nil
	r.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (r *Reporter) loop(ctx context.Context, done chan struct{}, every time.Duration) {
	defer close(done)
	if every <= 0 {
		every = Every
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := r.Once(pctx); err != nil && ctx.Err() == nil {
			r.log.Warn("image store report", "error", err)
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Once is one pass: report, and clear when a clear is pending.
func (r *Reporter) Once(ctx context.Context) error {
	n, b, limit := r.local.Figures()
	at, err := r.sv.Report(ctx, r.id, r.host, n, b, limit)
	if err != nil || at == nil {
		return err
	}
	removed, freed := r.local.Clear()
	r.log.Info("image store cleared", "removed", removed, "bytes", freed, "requested_at", at)
	n, b, _ = r.local.Figures()
	return r.sv.Cleared(ctx, r.id, *at, n, b)
}
