package event

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"
)

func TestIPHash(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 9, 16, 10, 11, 12, 0, time.UTC)
	base := IPHash("203.0.113.7", day, "conn-1")

	// The formula, spelled out independently.
	salt := sha256.Sum256([]byte("2026-09-16conn-1"))
	sum := sha256.Sum256([]byte("203.0.113.7" + hex.EncodeToString(salt[:])))
	if want := hex.EncodeToString(sum[:]); base != want {
		t.Fatalf("IPHash = %s, want %s", base, want)
	}

	cases := []struct {
		name string
		addr string
		at   time.Time
		conn string
		same bool
	}{
		{"same day later", "203.0.113.7", day.Add(13 * time.Hour), "conn-1", true},
		{"same UTC day in another zone", "203.0.113.7", day.In(time.FixedZone("UTC+13", 13*3600)), "conn-1", true},
		{"next day", "203.0.113.7", day.Add(24 * time.Hour), "conn-1", false},
		{"just past midnight UTC", "203.0.113.7", time.Date(2026, 9, 17, 0, 0, 0, 0, time.UTC), "conn-1", false},
		{"other connection", "203.0.113.7", day, "conn-2", false},
		{"other address", "203.0.113.8", day, "conn-1", false},
	}
	for _, c := range cases {
		got := IPHash(c.addr, c.at, c.conn)
		if (got == base) != c.same {
			t.Fatalf("%s: same=%v, want %v", c.name, got == base, c.same)
		}
		if len(got) != 64 {
			t.Fatalf("%s: %q is not 64 hex digits", c.name, got)
		}
	}
	if IPHash("203.0.113.7", day, "conn-1") != base {
		t.Fatalf("IPHash is not deterministic")
	}
}
