package views

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestDurationWords(t *testing.T) {
	t.Parallel()
	cases := map[time.Duration]string{
		-time.Second:                  "0.0 s",
		0:                             "0.0 s",
		449 * time.Millisecond:        "0.4 s",
		9999 * time.Millisecond:       "9.9 s",
		12 * time.Second:              "12 s",
		3*time.Minute + 5*time.Second: "3 min 5 s",
		2*time.Hour + 5*time.Minute + time.Second: "2 h 5 min",
	}
	for d, want := range cases {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestAgoWords(t *testing.T) {
	t.Parallel()
	now := time.Now()
	cases := []struct {
		at   time.Time
		want string
	}{
		{time.Time{}, "—"},
		{now.Add(-10 * time.Second), "just now"},
		{now.Add(-5*time.Minute - time.Second), "5 min ago"},
		{now.Add(-3*time.Hour - time.Second), "3 h ago"},
		{now.Add(10*time.Minute + 30*time.Second), "in 10 min"},
		{now.Add(5*time.Hour + 30*time.Second), "in 5 h"},
		{time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC), "2020-01-02"},
	}
	for _, c := range cases {
		if got := Ago(c.at); got != c.want {
			t.Errorf("Ago(%v) = %q, want %q", c.at, got, c.want)
		}
	}
}

func TestCountWords(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0 events", 1: "1 event", 2: "2 events"} {
		if got := countOf(n, "event"); got != want {
			t.Errorf("countOf(%d) = %q, want %q", n, got, want)
		}
	}
}

// TimeAgo carries the instant for static/app.js and the exact UTC time
// for a browser without script.
func TestTimeAgoMarkup(t *testing.T) {
	t.Parallel()
	at := time.Now().Add(-5 * time.Minute).UTC().Truncate(time.Second)
	var b bytes.Buffer
	if err := TimeAgo(at).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`datetime="` + at.Format(time.RFC3339) + `"`, `title="` + at.Format("2006-01-02 15:04:05") + ` UTC"`, "data-local-time", ">5 min ago</time>"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("TimeAgo = %s, want %s in it", b.String(), want)
		}
	}
}
