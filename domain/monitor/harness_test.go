package monitor_test

import (
	"context"
	"testing"

	"anvil/db/testdb"
	"anvil/domain/internal/domaintest"
	"anvil/domain/monitor"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// testBundle is the incident bundle (project "shop", binding production)
// with the monitors service on its store and clock.
type testBundle struct {
	*domaintest.IncidentBundle
	mon *monitor.Service
}

func setup(t testing.TB, policy string) *testBundle {
	t.Helper()
	ib := domaintest.SetupIncidents(t, policy)
	return &testBundle{IncidentBundle: ib, mon: monitor.New(ib.Store, ib.Incidents, "https://anvil.example")}
}

func (b *testBundle) checkIn(t testing.TB, in monitor.CheckInInput) *monitor.CheckInResult {
	t.Helper()
	if in.Source == "" {
		in.Source = "sentry"
	}
	res, err := b.mon.CheckIn(context.Background(), b.Proj.ID, in)
	if err != nil {
		t.Fatalf("check-in %+v: %v", in, err)
	}
	return res
}

// incidentOf reads the monitor's incident: status, title, event count.
func (b *testBundle) incidentOf(t testing.TB, slug string) (status, title string, events int, n int) {
	t.Helper()
	var rows []struct {
		Status string `bun:"status"`
		Title  string `bun:"title"`
		Count  int    `bun:"event_count"`
	}
	if err := b.DB.Bun.NewRaw(`SELECT i.status, i.title, i.event_count FROM incidents i JOIN monitors m ON i.fingerprint = 'monitor:' || m.id::text
		WHERE m.slug = ?`, slug).Scan(context.Background(), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		return "", "", 0, 0
	}
	return rows[0].Status, rows[0].Title, rows[0].Count, len(rows)
}

func intp(n int) *int        { return &n }
func f64(f float64) *float64 { return &f }
func strp(s string) *string  { return &s }

var errCode = domaintest.ErrCode
