package webhook

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/project"
)

// Why the public webhook route refused a delivery without recording it.
const (
	RefusedNotConfigured     = "not_configured"      // no webhook for this provider on the project
	RefusedMissingSignature  = "missing_signature"   // the signature header is absent
	RefusedInvalidSignature  = "invalid_signature"   // the signature does not verify
	RefusedDisabled          = "webhook_disabled"    // verified, but the webhook is disabled
	RefusedMissingDeliveryID = "missing_delivery_id" // verified, but no delivery id header
	RefusedInvalidDeliveryID = "invalid_delivery_id" // verified, but the delivery id is unusable
)

// RefusalWindow is how far back the webhook page counts refusals.
const RefusalWindow = 24 * time.Hour

// CountRefusal counts one refused delivery of a project's provider. It is
// one upsert on the row of (project, provider, reason, hour), so a flood of
// forged requests costs one small write each and grows nothing but a
// counter; a project that does not exist counts nowhere. Accepted
// deliveries never come here.
func (w *Webhooks) CountRefusal(ctx context.Context, projectID uuid.UUID, provider, reason, detail string) error {
	if len(detail) > 200 {
		detail = detail[:200]
	}
	now := w.s.Now()
	_, err := w.s.DB.NewRaw(`INSERT INTO webhook_refusals (project_id, provider, reason, hour, refusals, last_at, last_detail)
		SELECT id, ?, ?, date_trunc('hour', ?::timestamptz), 1, ?, ? FROM `+domain.LiveProjects+` p WHERE id = ?
		ON CONFLICT (project_id, provider, reason, hour) DO UPDATE SET refusals = webhook_refusals.refusals + 1,
			last_at = GREATEST(webhook_refusals.last_at, EXCLUDED.last_at), last_detail = EXCLUDED.last_detail`,
		provider, reason, now, now, detail, projectID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("count webhook refusal: %w", err)
	}
	return nil
}

// RefusalSummary is how often one reason refused a provider's deliveries
// within RefusalWindow, and the latest of them.
type RefusalSummary struct {
	Provider   string    `bun:"provider"`
	Reason     string    `bun:"reason"`
	Refusals   int64     `bun:"refusals"`
	LastAt     time.Time `bun:"last_at"`
	LastDetail string    `bun:"last_detail"`
}

// Refusals summarises a project's refused deliveries of the last
// RefusalWindow (whole hours: the oldest hour counted may have begun up to
// an hour earlier), most recent reason first.
func (w *Webhooks) Refusals(ctx context.Context, pr *domain.Principal, projectID uuid.UUID) ([]RefusalSummary, error) {
	if _, err := project.NewProjects(w.s).Get(ctx, pr.OrgID, projectID); err != nil {
		return nil, err
	}
	out := []RefusalSummary{}
	err := w.s.DB.NewRaw(`SELECT provider, reason, sum(refusals) AS refusals, max(last_at) AS last_at,
			(array_agg(last_detail ORDER BY last_at DESC))[1] AS last_detail
		FROM webhook_refusals WHERE project_id = ? AND hour > ?
		GROUP BY provider, reason ORDER BY max(last_at) DESC`, projectID, w.s.Now().Add(-RefusalWindow-time.Hour)).Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("list webhook refusals: %w", err)
	}
	return out, nil
}
