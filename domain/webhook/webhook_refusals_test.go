package webhook_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/domain/run"
	"anvil/domain/webhook"
)

// Refusals are counted per reason on one row per hour, shown for the last
// 24 hours, kept as long as the ledger, and never for a project that does
// not exist.
func TestWebhookRefusalCounters(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	p := tb.Project(t, "shop")
	hooks := webhook.NewWebhooks(tb.Store, tb.Queue)
	for i := 0; i < 3; i++ {
		if err := hooks.CountRefusal(ctx, p.ID, "github", webhook.RefusedInvalidSignature, "signature mismatch"); err != nil {
			t.Fatal(err)
		}
	}
	if err := hooks.CountRefusal(ctx, uuid.New(), "github", webhook.RefusedInvalidSignature, "x"); err != nil {
		t.Fatalf("an unknown project: %v", err)
	}
	var rows int
	if err := tb.Store.DB.NewRaw(`SELECT count(*) FROM webhook_refusals`).Scan(ctx, &rows); err != nil || rows != 1 {
		t.Fatalf("%d counter rows (%v)", rows, err)
	}
	sums, err := hooks.Refusals(ctx, tb.Owner, p.ID)
	if err != nil || len(sums) != 1 || sums[0].Refusals != 3 || sums[0].Reason != webhook.RefusedInvalidSignature || sums[0].LastDetail != "signature mismatch" {
		t.Fatalf("refusals: %+v %v", sums, err)
	}
	tb.Clock.Advance(webhook.RefusalWindow + 2*time.Hour)
	if sums, _ := hooks.Refusals(ctx, tb.Owner, p.ID); len(sums) != 0 {
		t.Fatalf("older than the window: %+v", sums)
	}
	tb.Clock.Advance(run.DeliveryRetention)
	if _, err := hooks.DeleteExpiredDeliveries(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tb.Store.DB.NewRaw(`SELECT count(*) FROM webhook_refusals`).Scan(ctx, &rows); err != nil || rows != 0 {
		t.Fatalf("%d counter rows after the retention (%v)", rows, err)
	}
}
