package release_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"anvil/db/testdb"
	"anvil/domain"
	"anvil/domain/internal/domaintest"
	"anvil/domain/release"
)

func TestMain(m *testing.M) { testdb.Main(m) }

type testBundle struct {
	*domaintest.IncidentBundle
	Releases *release.Releases
}

func setup(t testing.TB, policy string) *testBundle {
	t.Helper()
	ib := domaintest.SetupIncidents(t, policy)
	return &testBundle{IncidentBundle: ib, Releases: release.New(ib.Store)}
}

// event is a feed event of title from release (none when "").
func event(title, rel string) json.RawMessage {
	var m map[string]any
	_ = json.Unmarshal(domaintest.FeedEvent(uuid.NewString(), title), &m)
	if rel != "" {
		m["release"] = rel
	}
	b, _ := json.Marshal(m)
	return b
}

// send ingests events in one batch.
func (b *testBundle) send(t testing.TB, evs ...json.RawMessage) {
	t.Helper()
	res, err := b.Feed.Ingest(context.Background(), b.Sender, "127.0.0.1", evs)
	if err != nil || len(res.Accepted) != len(evs) {
		t.Fatalf("ingest: %v %+v", err, res)
	}
}

func (b *testBundle) list(t testing.TB) map[string]release.Release {
	t.Helper()
	rs, err := b.Releases.List(context.Background(), b.Owner, b.Proj.ID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]release.Release{}
	for _, r := range rs {
		out[r.Environment+"/"+r.Version] = r
	}
	return out
}

func code(err error) string { return domaintest.ErrCode(err) }

var strp = domaintest.Strp

var _ = domain.IncidentClosed
