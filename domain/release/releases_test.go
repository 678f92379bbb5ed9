package release_test

import (
	"context"
	"testing"
	"time"

	"anvil/domain"
	"anvil/domain/release"
)

// Releases are learnt from the events of both paths of the store (the
// general path too: generalOnly is the feed's own test switch, so here a
// batch with a resend takes it), counted once per new event, with the
// incidents first seen in them.
func TestReleasesFromEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, domain.PolicyObserve)
	sha := "3f9c1e2d4b5a69788796a5b4c3d2e1f0a9b8c7d6"
	b.send(t, event("A", "shop@2.4.0+"+sha), event("A", "shop@2.4.0+"+sha), event("B", "2.4.1"), event("C", ""))
	first := b.Clock.Now()
	b.Clock.Advance(time.Minute)
	resend := event("B", "2.4.1")
	b.send(t, resend, event("D", "2.4.1"))
	b.send(t, resend) // a resend counts nothing
	got := b.list(t)
	if len(got) != 2 {
		t.Fatalf("releases: %+v", got)
	}
	a := got["production/shop@2.4.0+"+sha]
	if a.EventCount != 2 || a.NewIncidents != 1 || a.CommitSHA != sha || a.CommitFrom != "version" || !a.FirstSeen.Equal(first.Truncate(time.Microsecond)) {
		t.Errorf("release A: %+v", a)
	}
	c := got["production/2.4.1"]
	if c.EventCount != 3 || c.NewIncidents != 2 || c.CommitSHA != "" || !c.LastSeen.After(*c.FirstSeen) {
		t.Errorf("release 2.4.1: %+v", c)
	}
	var firsts []string
	if err := b.DB.Bun.NewRaw(`SELECT first_release FROM incidents ORDER BY title`).Scan(context.Background(), &firsts); err != nil {
		t.Fatal(err)
	}
	if want := []string{"shop@2.4.0+" + sha, "2.4.1", "", "2.4.1"}; len(firsts) != 4 || firsts[0] != want[0] || firsts[1] != want[1] || firsts[2] != want[2] || firsts[3] != want[3] {
		t.Errorf("first releases %q, want %q", firsts, want)
	}
}

func TestDeclareRelease(t *testing.T) {
	t.Parallel()
	b := setup(t, domain.PolicyObserve)
	ctx := context.Background()
	b.send(t, event("A", "2.4.1"))
	// Refusals are specific and change nothing.
	for _, c := range []struct {
		d    release.Declaration
		code string
	}{
		{release.Declaration{}, "invalid_version"},
		{release.Declaration{Version: "two words"}, "invalid_version"},
		{release.Declaration{Version: "2.4.1", CommitSHA: "main"}, "invalid_commit_sha"},
		{release.Declaration{Version: "2.4.1", Environment: "Prod uction"}, "invalid_environment"},
	} {
		if _, err := b.Releases.Declare(ctx, b.Owner, b.Proj.ID, c.d); code(err) != c.code {
			t.Errorf("%+v: %v, want %s", c.d, err, c.code)
		}
	}
	if got := b.list(t)["production/2.4.1"]; got.CommitSHA != "" {
		t.Fatalf("a refusal changed the release: %+v", got)
	}
	// Declared for every environment: the commit reaches the seen row.
	deployed := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	r, err := b.Releases.Declare(ctx, b.Owner, b.Proj.ID, release.Declaration{Version: "2.4.1", CommitSHA: "ABCDEF1234", DeployedAt: &deployed})
	if err != nil || r.CommitSHA != "abcdef1234" || r.Environment != "" {
		t.Fatalf("declare: %+v %v", r, err)
	}
	got := b.list(t)
	if len(got) != 1 || got["production/2.4.1"].CommitSHA != "abcdef1234" || got["production/2.4.1"].CommitFrom != "declared" ||
		!got["production/2.4.1"].DeployedAt.Equal(deployed) || got["production/2.4.1"].EventCount != 1 {
		t.Fatalf("after the declaration: %+v", got)
	}
	// Declared for an environment before its first event.
	if _, err := b.Releases.Declare(ctx, b.Owner, b.Proj.ID, release.Declaration{Version: "2.5.0", CommitSHA: "bcdef12345", Environment: "production"}); err != nil {
		t.Fatal(err)
	}
	if r := b.list(t)["production/2.5.0"]; r.CommitSHA != "bcdef12345" || r.FirstSeen != nil {
		t.Fatalf("declared, not yet seen: %+v", r)
	}
	// Another organisation's project is a 404.
	other := &domain.Principal{OrgID: b.Proj.ID, UserID: b.Owner.UserID, Role: domain.RoleOwner}
	if _, err := b.Releases.Declare(ctx, other, b.Proj.ID, release.Declaration{Version: "x1"}); code(err) != "not_found" {
		t.Errorf("other org: %v", err)
	}
	if _, err := b.Releases.List(ctx, other, b.Proj.ID); code(err) != "not_found" {
		t.Errorf("other org list: %v", err)
	}
}
