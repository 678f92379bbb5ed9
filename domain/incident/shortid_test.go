package incident_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/incident"
	"anvil/domain/project"
)

// Every incident gets a per-project number from the trigger, whichever
// path of the store created it, and its short id resolves wherever an id
// does — in its own organisation only.
func TestShortIDs(t *testing.T) {
	t.Parallel()
	ib := setupIncidents(t, domain.PolicyObserve)
	ctx := context.Background()
	a := ib.Send(t, "A")
	b := ib.Send(t, "B")
	ib.Send(t, "A") // counts on A: no new number
	if a.Number != 1 || b.Number != 2 {
		t.Fatalf("numbers %d, %d", a.Number, b.Number)
	}
	if v := b.View(); v.ShortID != "SHOP-2" || v.Number != 2 {
		t.Fatalf("view: %+v", v)
	}
	for _, raw := range []string{"SHOP-2", "shop-2", b.ID.String()} {
		if id, err := ib.Incidents.Resolve(ctx, ib.Owner.OrgID, raw); err != nil || id != b.ID {
			t.Errorf("resolve %q: %v %v", raw, id, err)
		}
	}
	for _, raw := range []string{"SHOP-3", "SHOP-0", "SHOP-", "-2", "SHOP_2", "NOPE-1", "shop-x"} {
		if _, err := ib.Incidents.Resolve(ctx, ib.Owner.OrgID, raw); errCode(err) != "not_found" {
			t.Errorf("resolve %q: %v", raw, err)
		}
	}
	if _, err := ib.Incidents.Resolve(ctx, uuid.New(), "SHOP-2"); errCode(err) != "not_found" {
		t.Errorf("another organisation resolved SHOP-2: %v", err)
	}
	// A second project counts from 1; a slug with dashes parses by its last one.
	p, err := ib.Projects.Create(ctx, ib.Owner, project.ProjectInput{Slug: strp("web-app"), RepoURL: strp("https://git.example/w.git"),
		DefaultBranch: strp("main"), RunCommand: strp("make")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ib.DB.Bun.NewRaw(`INSERT INTO incidents (org_id, project_id, environment, fingerprint, title, status, first_seen, last_seen)
		VALUES (?, ?, 'production', 'f', 'W', 'TRIAGED', now(), now())`, ib.Owner.OrgID, p.ID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	id, err := ib.Incidents.Resolve(ctx, ib.Owner.OrgID, "WEB-APP-1")
	if err != nil {
		t.Fatal(err)
	}
	if got := ib.Incident(t, id); got.Number != 1 || got.View().ShortID != "WEB-APP-1" {
		t.Fatalf("web-app's first incident: %+v", got.View())
	}
	if slug, n, ok := incident.ParseShortID("Web-App-12"); !ok || slug != "web-app" || n != 12 {
		t.Errorf("ParseShortID: %q %d %v", slug, n, ok)
	}
}
