package wiring_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"anvil/db"
	"anvil/db/testdb"
	"anvil/domain"
	"anvil/domain/project"
	"anvil/domain/secret"
	"anvil/domain/wiring"
)

// syncBuffer is a log sink the publisher's goroutine and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestGracefulStopSendsEveryLiveEvent holds the stop order to its promise: the services publish
// live events, then stop as serve stops them — Stop, then the pool closes
// at once. A listener on another connection receives every event
// committed before Stop returned, and nothing logs `notify failed`.
func TestGracefulStopSendsEveryLiveEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URLFor(testdb.Name(t))
	listener, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(ctx)
	if _, err := listener.Exec(ctx, "LISTEN "+domain.EventsChannel); err != nil {
		t.Fatal(err)
	}

	d, err := db.Open(ctx, url, 5)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	var logs syncBuffer
	keys, _ := secret.NewKeyring(make([]byte, 32), nil)
	sv := wiring.NewServices(d, keys, slog.New(slog.NewTextHandler(&logs, nil)), wiring.Options{})
	_, err = sv.Start(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sv.Accounts.Bootstrap(ctx, "acme", "owner@acme.test", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	owner, err := sv.Accounts.Authenticate(ctx, res.Token)
	if err != nil {
		t.Fatal(err)
	}
	// Each card refresh commits one event of its own project; together
	// they outrun the publisher's paced rounds, so some are still pending
	// when Stop is called.
	const n = 40
	want := map[uuid.UUID]bool{}
	for i := 0; i < n; i++ {
		slug := "p" + strings.Repeat("x", i%3) + uuid.NewString()[:8]
		p, err := sv.Projects.Create(ctx, owner, project.ProjectInput{Slug: &slug, RepoURL: strp("https://git.example/" + slug + ".git"),
			DefaultBranch: strp("main"), RunCommand: strp("make test")})
		if err != nil {
			t.Fatal(err)
		}
		want[p.ID] = true
	}
	var wg sync.WaitGroup
	for id := range want {
		wg.Add(1)
		go func(id uuid.UUID) {
			defer wg.Done()
			if err := sv.Cards.Refresh(ctx, id); err != nil {
				t.Error(err)
			}
		}(id)
	}
	wg.Wait()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := sv.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	d.Close() // serve closes the pool right after

	got := map[uuid.UUID]bool{}
	for len(got) < n {
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		note, err := listener.WaitForNotification(wctx)
		wcancel()
		if err != nil {
			t.Fatalf("received %d of %d card events: %v\n%s", len(got), n, err, logs.String())
		}
		var ev struct {
			Kind      string    `json:"kind"`
			ProjectID uuid.UUID `json:"project_id"`
		}
		if json.Unmarshal([]byte(note.Payload), &ev) == nil && ev.Kind == "card" && want[ev.ProjectID] {
			got[ev.ProjectID] = true
		}
	}
	if strings.Contains(logs.String(), "notify failed") {
		t.Fatalf("the stop lost live events:\n%s", logs.String())
	}
}
