package notify

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
)

type sink struct {
	mu   sync.Mutex
	sent []string
	fail bool
}

func (s *sink) send(_ context.Context, p []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return errors.New("sql: database is closed")
	}
	s.sent = append(s.sent, p...)
	return nil
}

// TestStopSendsEveryPayloadOnce: what was published before Stop is sent
// by the time Stop returns, each payload once.
func TestStopSendsEveryPayloadOnce(t *testing.T) {
	t.Parallel()
	s := &sink{}
	p := New(s.send, slog.New(slog.DiscardHandler))
	p.Start(context.Background())
	p.Publish("a", "b")
	p.Publish("b", "c")
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.sent, []string{"a", "b", "c"}) {
		t.Fatalf("sent %v, want [a b c]", s.sent)
	}
}

// TestFailedRoundIsLogged: a round the database refuses is a WARN line,
// not a stuck publisher.
func TestFailedRoundIsLogged(t *testing.T) {
	t.Parallel()
	s := &sink{fail: true}
	var buf bytes.Buffer
	var mu sync.Mutex
	p := New(s.send, slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil)))
	p.Start(context.Background())
	p.Publish("a")
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = p.Stop(context.Background())
	mu.Lock()
	defer mu.Unlock()
	if !bytes.Contains(buf.Bytes(), []byte("live events: notify failed")) {
		t.Fatalf("log: %s", buf.String())
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
