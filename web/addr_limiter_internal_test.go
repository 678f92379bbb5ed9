package web

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
)

// The per-address table is public input: a flood of fresh addresses keeps
// it within two generations of its shards' capacity, and a rotation is a
// swap, never a scan (300,000 addresses take well under a second, and
// under ten even with the race detector).
// A window still open survives a rotation of its generation.
func TestAddrLimiterBounded(t *testing.T) {
	t.Parallel()
	l := newAddrLimiter(3)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l.now = func() time.Time { return now }
	conn := uuid.New()
	start := time.Now()
	for i := range 300_000 {
		if _, ok := l.allow(conn, fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), 1); !ok {
			t.Fatalf("a fresh address refused at %d", i)
		}
		if i%30_000 == 0 {
			now = now.Add(time.Second)
		}
	}
	if n, most := l.size(), 2*addrShards*addrShardCap; n > most {
		t.Fatalf("%d keys held; at most %d", n, most)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("300,000 addresses took %s", d)
	}
	// One address's window across a generation change.
	l = newAddrLimiter(3)
	l.now = func() time.Time { return now }
	for range 3 {
		if _, ok := l.allow(conn, "198.51.100.7", 1); !ok {
			t.Fatal("within the bound refused")
		}
	}
	now = now.Add(59 * time.Second) // the shard rotates at its next request after a window
	if _, ok := l.allow(conn, "198.51.100.7", 1); ok {
		t.Fatal("the fourth in the window admitted")
	}
	now = now.Add(2 * time.Second)
	if _, ok := l.allow(conn, "198.51.100.7", 1); !ok {
		t.Fatal("a new window refused")
	}
}

// IPv6 clients are bounded by their /64: a subscriber's whole prefix is
// one client.
func TestLimiterAddr(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"203.0.113.7":          "203.0.113.7",
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64",
		"2001:db8:1:2::ffff":   "2001:db8:1:2::/64",
		"not-an-address":       "not-an-address",
	} {
		if got := limiterAddr(in); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}
