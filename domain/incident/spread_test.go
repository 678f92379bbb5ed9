package incident_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"anvil/domain"
	"anvil/domain/incident"
)

// TestSpreadSamplesTheNewestEvents: on an incident of 5,000 events the
// spread is read from the newest SpreadSample alone — its tags, releases
// and users are theirs — the top keys and values are cut in SQL, and the
// plan reads no more than the sample's rows of feed_events.
func TestSpreadSamplesTheNewestEvents(t *testing.T) {
	t.Parallel()
	ib := setupIncidents(t, domain.PolicyObserve)
	ctx := context.Background()
	inc := ib.Send(t, "Big")
	const total = 5000
	// The older events carry tier=old, release 1.0 and user old-*; the
	// newest SpreadSample carry tier=new, two releases, and ten tag keys.
	if _, err := ib.DB.Bun.NewRaw(`INSERT INTO feed_events (org_id, event_id_key, project_id, connection_id, environment, fingerprint,
			incident_id, received_at, occurred_at, payload)
		SELECT i.org_id, md5('e' || n)::uuid, i.project_id, gen_random_uuid(), i.environment, i.fingerprint, i.id,
			now() + make_interval(secs => n), now() + make_interval(secs => n),
			CASE WHEN n > ?0 - ?1 THEN jsonb_build_object('level', 'warning', 'release', '2.' || (n % 2),
					'user', jsonb_build_object('id', 'new-' || (n % 5)),
					'tags', (SELECT jsonb_object_agg('k' || k, 'v' || ((n + k) % (k + 1))) FROM generate_series(0, 9) AS k)
						|| jsonb_build_object('tier', 'new', 'color', CASE WHEN n % 10 < 7 THEN 'red' ELSE 'blue' END))
				ELSE jsonb_build_object('level', 'error', 'release', '1.0', 'user', jsonb_build_object('id', 'old-' || n),
					'tags', jsonb_build_object('tier', 'old', 'color', 'green')) END
		FROM incidents i, generate_series(1, ?0) AS n WHERE i.id = ?2`, total, incident.SpreadSample, inc.ID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	sp, err := ib.Incidents.Spread(ctx, ib.Owner.OrgID, inc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sp.Sampled != incident.SpreadSample || sp.Level != "warning" || sp.Releases != 2 || sp.Users != 5 {
		t.Fatalf("spread: sampled %d, level %q, releases %d, users %d", sp.Sampled, sp.Level, sp.Releases, sp.Users)
	}
	if len(sp.Tags) != 6 {
		t.Fatalf("%d tag keys, want 6: %+v", len(sp.Tags), sp.Tags)
	}
	for _, tc := range sp.Tags {
		if tc.Total != incident.SpreadSample || len(tc.Values) == 0 || len(tc.Values) > 4 {
			t.Fatalf("tag %s: total %d, %d values", tc.Key, tc.Total, len(tc.Values))
		}
		switch tc.Key {
		case "tier":
			if len(tc.Values) != 1 || tc.Values[0] != (incident.ValueCount{Value: "new", Count: incident.SpreadSample}) {
				t.Fatalf("tier: %+v", tc.Values)
			}
		case "color":
			if fmt.Sprint(tc.Values) != "[{red 700} {blue 300}]" {
				t.Fatalf("color: %+v", tc.Values)
			}
		}
		for i := 1; i < len(tc.Values); i++ {
			if tc.Values[i].Count > tc.Values[i-1].Count {
				t.Fatalf("tag %s out of order: %+v", tc.Key, tc.Values)
			}
		}
	}
	// The plan, with the statistics autovacuum keeps: the sample comes off
	// the incident's index, and no node reads more of feed_events than the
	// sample.
	if _, err := ib.DB.Bun.ExecContext(ctx, "ANALYZE feed_events"); err != nil {
		t.Fatal(err)
	}
	var plan []byte
	if err := ib.DB.Bun.NewRaw("EXPLAIN (ANALYZE, FORMAT JSON) "+incident.SpreadTagsSQL, inc.ID, incident.SpreadSample, 6, 4).
		Scan(ctx, &plan); err != nil {
		t.Fatal(err)
	}
	var nodes []map[string]any
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		nodes = append(nodes, n)
		cs, _ := n["Plans"].([]any)
		for _, c := range cs {
			walk(c.(map[string]any))
		}
	}
	var root []struct {
		Plan map[string]any `json:"Plan"`
	}
	if err := json.Unmarshal(plan, &root); err != nil {
		t.Fatal(err)
	}
	walk(root[0].Plan)
	read := false
	for _, n := range nodes {
		if n["Relation Name"] != "feed_events" {
			continue
		}
		read = true
		if n["Index Name"] != "feed_events_incident_idx" || n["Actual Rows"].(float64) > incident.SpreadSample {
			t.Fatalf("feed_events read by %v, %v rows", n["Node Type"], n["Actual Rows"])
		}
	}
	if !read {
		t.Fatalf("no read of feed_events in the plan: %s", plan)
	}
}
