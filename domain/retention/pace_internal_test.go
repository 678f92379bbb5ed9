package retention

import (
	"testing"
	"time"
)

// The clean-up rests so that deleting takes share of its time
// (docs/retention.md, "Pacing").
func TestRestAfterKeepsTheShare(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		took  time.Duration
		share float64
		want  time.Duration
	}{
		{40 * time.Millisecond, 0.2, 160 * time.Millisecond},
		{40 * time.Millisecond, 0.5, 40 * time.Millisecond},
		{40 * time.Millisecond, 1, 0},
		{40 * time.Millisecond, 0, 0},
		{0, 0.15, 0},
	} {
		got := restAfter(c.took, c.share)
		if d := got - c.want; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("restAfter(%v, %v) = %v, want %v", c.took, c.share, got, c.want)
		}
		if c.share > 0 && c.share < 1 && c.took > 0 {
			if s := float64(c.took) / float64(c.took+got); s < c.share-0.001 || s > c.share+0.001 {
				t.Errorf("share %v kept as %v", c.share, s)
			}
		}
	}
}
