package imagestore

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"anvil/domain"
)

// Every is how often a worker reports its store and looks for a clear: a
// clear requested anywhere is carried out by every live worker within it.
const Every = 5 * time.Second

// StaleAfter is how long a store may go unreported before it is shown as
// stale (its worker stopped or lost the database); ForgetAfter is when its
// row is deleted.
const (
	StaleAfter  = 10 * time.Minute
	ForgetAfter = 24 * time.Hour
)

// Store is one worker store as the settings page and the API show it.
type Store struct {
	Host      string    `json:"host"`
	Images    int       `json:"images"`
	Bytes     int64     `json:"bytes"`
	CapBytes  int64     `json:"cap_bytes"`
	UpdatedAt time.Time `json:"updated_at"`
	// Stale: not reported for StaleAfter; its figures may be gone.
	Stale bool `json:"stale"`
	// ClearPending: a clear was requested after the last one it carried
	// out.
	ClearPending bool `json:"clear_pending"`
}

// Status is every store, and the last clear requested.
type Status struct {
	// Count and Bytes add up the stores that are not stale.
	Count            int        `json:"count"`
	Bytes            int64      `json:"bytes"`
	Stores           []Store    `json:"stores"`
	ClearRequestedAt *time.Time `json:"clear_requested_at"`
}

// Request is a clear requested: when, and how many live stores will carry
// it out.
type Request struct {
	RequestedAt time.Time `json:"requested_at"`
	Stores      int       `json:"stores"`
}

// Service reads the stores and requests their clear.
type Service struct {
	s *domain.Store
}

// New builds the service.
func New(s *domain.Store) *Service { return &Service{s: s} }

type storeRow struct {
	Host      string    `bun:"host"`
	Images    int       `bun:"images"`
	Bytes     int64     `bun:"bytes"`
	CapBytes  int64     `bun:"cap_bytes"`
	UpdatedAt time.Time `bun:"updated_at"`
	Pending   bool      `bun:"pending"`
}

const statusSQL = `SELECT s.host, s.images, s.bytes, s.cap_bytes, s.updated_at,
	(c.requested_at IS NOT NULL AND (s.cleared_through IS NULL OR c.requested_at > s.cleared_through)) AS pending
	FROM image_stores s LEFT JOIN image_store_clear c ON true
	WHERE s.updated_at >= ? ORDER BY s.host, s.id`

// Status returns every store reported in the last day (admins and up: the
// figures are the host's, not the organisation's, so only those who run
// the organisation see them).
func (sv *Service) Status(ctx context.Context, pr *domain.Principal) (Status, error) {
	if err := domain.RequireRole(pr, domain.RoleAdmin); err != nil {
		return Status{}, err
	}
	now := sv.s.Now()
	out := Status{Stores: []Store{}}
	var rows []storeRow
	if err := sv.s.DB.NewRaw(statusSQL, now.Add(-ForgetAfter)).Scan(ctx, &rows); err != nil {
		return Status{}, fmt.Errorf("imagestore: status: %w", err)
	}
	for _, r := range rows {
		st := Store{Host: r.Host, Images: r.Images, Bytes: r.Bytes, CapBytes: r.CapBytes, UpdatedAt: r.UpdatedAt, ClearPending: r.Pending}
		st.Stale = now.Sub(st.UpdatedAt) > StaleAfter
		if !st.Stale {
			out.Count += st.Images
			out.Bytes += st.Bytes
		}
		out.Stores = append(out.Stores, st)
	}
	var at []time.Time
	if err := sv.s.DB.NewRaw(`SELECT requested_at FROM image_store_clear`).Scan(ctx, &at); err != nil {
		return Status{}, fmt.Errorf("imagestore: status: %w", err)
	}
	if len(at) > 0 {
		out.ClearRequestedAt = &at[0]
	}
	return out, nil
}

// RequestClear asks every worker to clear its store (owners only: the
// store is the host's, and a clear makes every organisation's next runs
// pull their images again). Each worker carries it out within Every,
// passing over the images runs are using; a store not reported for
// StaleAfter does so when its worker comes back. Audited in the owner's
// organisation.
func (sv *Service) RequestClear(ctx context.Context, pr *domain.Principal) (Request, error) {
	if err := domain.RequireRole(pr, domain.RoleOwner); err != nil {
		return Request{}, err
	}
	// Postgres keeps microseconds: the answer is the time stored.
	now := sv.s.Now().UTC().Truncate(time.Microsecond)
	req := Request{RequestedAt: now}
	err := sv.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewRaw(`INSERT INTO image_store_clear (one, requested_at, requested_by) VALUES (true, ?, ?)
			ON CONFLICT (one) DO UPDATE SET requested_at = GREATEST(image_store_clear.requested_at, EXCLUDED.requested_at),
			requested_by = EXCLUDED.requested_by`, now, pr.UserID).Exec(ctx); err != nil {
			return fmt.Errorf("imagestore: request a clear: %w", err)
		}
		var n []int
		if err := tx.NewRaw(`SELECT count(*) FROM image_stores WHERE updated_at >= ?`, now.Add(-StaleAfter)).Scan(ctx, &n); err != nil {
			return fmt.Errorf("imagestore: request a clear: %w", err)
		}
		req.Stores = n[0]
		return domain.RecordAudit(ctx, tx, pr, domain.AuditImagesCleared, "images", map[string]any{"stores": req.Stores})
	})
	if err != nil {
		return Request{}, err
	}
	return req, nil
}
