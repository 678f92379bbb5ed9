package imagestore_test

import (
	"context"
	"testing"
	"time"

	"anvil/db/testdb"
	"anvil/domain/imagestore"
	"anvil/domain/internal/domaintest"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// local is a worker's store in figures: Clear empties it but for inUse.
type local struct {
	images, inUse int
	clears        int
}

func (l *local) Figures() (int, int64, int64) { return l.images, int64(l.images) << 20, 1 << 30 }

func (l *local) Clear() (int, int64) {
	l.clears++
	n := l.images - l.inUse
	l.images = l.inUse
	return n, int64(n) << 20
}

// A clear is carried out once by each store that was known when it was
// requested, also by one that was stale and comes back; a store first
// heard of after it takes it as done.
func TestClearReachesEveryKnownStoreOnce(t *testing.T) {
	t.Parallel()
	b := domaintest.Setup(t)
	ctx := context.Background()
	sv := imagestore.New(b.Store)
	a, away := &local{images: 3, inUse: 1}, &local{images: 2}
	ra, raway := sv.NewReporter(a, "a.test", "/w/images", nil), sv.NewReporter(away, "away.test", "/w/images", nil)
	for _, r := range []*imagestore.Reporter{ra, raway} {
		if err := r.Once(ctx); err != nil {
			t.Fatal(err)
		}
	}
	b.Clock.Advance(11 * time.Minute) // away stops reporting
	if err := ra.Once(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := sv.Status(ctx, b.Owner)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Stores) != 2 || st.Stores[0].Stale || !st.Stores[1].Stale || st.Count != 3 || st.ClearRequestedAt != nil {
		t.Fatalf("status: %+v", st)
	}
	req, err := sv.RequestClear(ctx, b.Owner)
	if err != nil {
		t.Fatal(err)
	}
	if req.Stores != 1 {
		t.Fatalf("the clear counts %d live stores", req.Stores)
	}
	b.Clock.Advance(time.Second)
	late := &local{images: 4}
	rlate := sv.NewReporter(late, "late.test", "/w/images", nil)
	for range 2 {
		for _, r := range []*imagestore.Reporter{ra, rlate} {
			if err := r.Once(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if a.clears != 1 || a.images != 1 || late.clears != 0 || late.images != 4 {
		t.Fatalf("a cleared %d times (%d left), late %d times", a.clears, a.images, late.clears)
	}
	st, err = sv.Status(ctx, b.Owner)
	if err != nil {
		t.Fatal(err)
	}
	if st.ClearRequestedAt == nil || !st.ClearRequestedAt.Equal(req.RequestedAt) {
		t.Fatalf("clear requested at %v, want %v", st.ClearRequestedAt, req.RequestedAt)
	}
	for _, s := range st.Stores {
		if s.ClearPending != (s.Host == "away.test") {
			t.Fatalf("%s: pending %v", s.Host, s.ClearPending)
		}
	}
	if err := raway.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if away.clears != 1 || away.images != 0 {
		t.Fatalf("the store back cleared %d times", away.clears)
	}
}

// A store not heard of for a day is forgotten at the next report of any
// store.
func TestStoreForgottenAfterADay(t *testing.T) {
	t.Parallel()
	b := domaintest.Setup(t)
	ctx := context.Background()
	sv := imagestore.New(b.Store)
	gone, kept := sv.NewReporter(&local{images: 1}, "gone.test", "/w/images", nil), sv.NewReporter(&local{images: 1}, "kept.test", "/w/images", nil)
	if err := gone.Once(ctx); err != nil {
		t.Fatal(err)
	}
	b.Clock.Advance(25 * time.Hour)
	if err := kept.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if n := b.CountRows(t, "image_stores", "true"); n != 1 {
		t.Fatalf("%d stores kept", n)
	}
	st, err := sv.Status(ctx, b.Owner)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Stores) != 1 || st.Stores[0].Host != "kept.test" {
		t.Fatalf("status: %+v", st)
	}
}
