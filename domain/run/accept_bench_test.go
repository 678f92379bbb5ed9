package run_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"anvil/domain"
)

// BenchmarkAccept accepts manual runs across 100 projects from 8 goroutines
// (make bench prints the figures; this is for profiling).
func BenchmarkAccept(b *testing.B) {
	tb := setupTB(b)
	ctx := context.Background()
	var ids []uuid.UUID
	for i := 0; i < 100; i++ {
		ids = append(ids, tb.Project(b, fmt.Sprintf("p%d", i)).ID)
	}
	var n atomic.Int64
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			if _, err := tb.Queue.AcceptManual(ctx, tb.Owner, ids[i%100], ""); err != nil && !errors.Is(err, domain.ErrQueueFull) {
				b.Error(err)
				return
			}
		}
	})
}
