package incident_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/incident"
)

// queryLog keeps the text of the queries bun sends that contain match.
type queryLog struct {
	match string
	mu    sync.Mutex
	qs    []string
}

func (l *queryLog) BeforeQuery(ctx context.Context, e *bun.QueryEvent) context.Context {
	if strings.Contains(e.Query, l.match) {
		l.mu.Lock()
		l.qs = append(l.qs, e.Query)
		l.mu.Unlock()
	}
	return ctx
}

func (l *queryLog) AfterQuery(context.Context, *bun.QueryEvent) {}

// TestInboxSearchCountsUseTheIndex: over 8,000 incidents, a search's
// status counts are served by an index (the trigram index on the
// incidents' search text for the text itself), never by reading every
// incident or a stored event per incident; short ids are found too.
func TestInboxSearchCountsUseTheIndex(t *testing.T) {
	t.Parallel()
	ib := setupIncidents(t, domain.PolicyObserve)
	ctx := context.Background()
	first := ib.Send(t, "Seed")
	if _, err := ib.DB.Bun.NewRaw(`INSERT INTO incidents (org_id, project_id, environment, fingerprint, title, status, first_seen, last_seen)
		SELECT i.org_id, i.project_id, 'production', 'f' || n,
			CASE WHEN n % 1600 = 0 THEN 'Needle in the haystack ' || n ELSE 'Ordinary failure number ' || n END,
			CASE WHEN n % 3200 = 0 THEN 'CLOSED' ELSE 'TRIAGED' END, now(), now()
		FROM incidents i, generate_series(1, 8000) AS n WHERE i.id = ?`, first.ID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ib.DB.Bun.ExecContext(ctx, "ANALYZE incidents"); err != nil {
		t.Fatal(err)
	}
	log := &queryLog{match: "search_text"}
	ib.DB.Bun.AddQueryHook(log) //nolint:staticcheck // the service's own DB is hooked: WithQueryHook makes a clone it never uses
	pg, err := ib.Incidents.List(ctx, ib.Owner.OrgID, incident.IncidentFilter{Query: "needle"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pg.Incidents) != 5 || pg.Counts[domain.IncidentTriaged] != 3 || pg.Counts[domain.IncidentClosed] != 2 || pg.Unresolved != 3 {
		t.Fatalf("needle: %d incidents, counts %v, unresolved %d", len(pg.Incidents), pg.Counts, pg.Unresolved)
	}
	log.mu.Lock()
	qs := append([]string{}, log.qs...)
	log.mu.Unlock()
	counted, trigram := false, false
	for _, q := range qs {
		if !strings.Contains(q, "count(*)") {
			continue
		}
		counted = true
		var plan []string
		err := ib.DB.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			// Priced as on a table of many incidents: one this small is
			// cheaper to read whole, whatever the predicate.
			if _, err := tx.ExecContext(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
				return err
			}
			return tx.NewRaw("EXPLAIN "+q).Scan(ctx, &plan)
		})
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(plan, "\n")
		if strings.Contains(text, "Seq Scan") || strings.Contains(text, "feed_events") {
			t.Fatalf("a search count that reads every incident:\n%s\n%s", q, text)
		}
		trigram = trigram || strings.Contains(text, "incidents_search_trgm_idx")
	}
	if !counted || !trigram {
		t.Fatalf("%d queries, a count among them %v, through the trigram index %v", len(qs), counted, trigram)
	}
	// The seed incident, by its short id, in either case.
	for _, q := range []string{"SHOP-1", "shop-1"} {
		pg, err := ib.Incidents.List(ctx, ib.Owner.OrgID, incident.IncidentFilter{Query: q})
		if err != nil || len(pg.Incidents) != 1 || pg.Incidents[0].ID != first.ID {
			t.Fatalf("short id %q: %v %+v", q, err, pg.Incidents)
		}
	}
}
