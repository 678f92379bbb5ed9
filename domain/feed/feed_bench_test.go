package feed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/domain"
)

// BenchmarkIngestBatch ingests batches of 50 from 8 goroutines, for
// profiling (make bench prints the figures end to end).
func BenchmarkIngestBatch(b *testing.B) {
	tb := setupTB(b)
	ctx := context.Background()
	feed := newFeed(b, tb.Store)
	feed.SyncFold = false // the folds after the answers, as in production
	p := tb.Project(b, "shop")
	if _, err := feed.PutBinding(ctx, tb.Owner, p.ID, "production", domain.PolicyObserve); err != nil {
		b.Fatal(err)
	}
	_, tok, _ := feed.CreateConnection(ctx, tb.Owner, p.ID, "bench")
	snd, err := feed.Authenticate(ctx, tok)
	if err != nil {
		b.Fatal(err)
	}
	mk := func(i int64) []json.RawMessage {
		out := make([]json.RawMessage, 50)
		for j := range out {
			raw, _ := json.Marshal(map[string]any{"schema_version": "1.0", "event_id": uuid.NewString(), "timestamp": time.Now().UTC().Format(time.RFC3339),
				"title": "NullPointerException in CheckoutService", "level": "error", "environment": "production", "service": "shop",
				"sdk": map[string]any{"name": "anvil-feed-java", "version": "0.1.0"}, "exception": map[string]any{"type": fpType(i, j),
					"message": "Cannot invoke \"Cart.total()\"", "stacktrace": []any{map[string]any{"file": "CheckoutService.java", "line": 88, "function": "charge", "in_app": true}}},
				"request": map[string]any{"method": "POST", "url": "https://shop.example/api/checkout"}, "breadcrumbs": []any{"cart.add", "checkout.start"}})
			out[j] = raw
		}
		return out
	}
	var n atomic.Int64
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			batch := mk(n.Add(1))
			if _, err := feed.Ingest(ctx, snd, "127.0.0.1", batch); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N*50)/b.Elapsed().Seconds(), "events/s")
}

// fpType spreads events over few fingerprints (a storm of one fault) unless
// ANVIL_BENCH_SPREAD is set, which gives every batch its own.
func fpType(i int64, j int) string {
	if os.Getenv("ANVIL_BENCH_SPREAD") != "" {
		return fmt.Sprintf("E%d-%d", i, j%5)
	}
	return fmt.Sprintf("E%d", j%5)
}
