package release_test

import (
	"context"
	"strings"
	"testing"

	"anvil/domain"
	"anvil/domain/release"
)

// A fix recorded by hand: refusals are specific and change nothing; a
// viewer may not; the fix is the person's transition and audited, and it
// ships like a merged repair's.
func TestFixRecordedByHand(t *testing.T) {
	t.Parallel()
	b := setup(t, domain.PolicyObserve)
	ctx := context.Background()
	fx := release.NewFixes(b.Store, b.Incidents)
	inc := b.Send(t, "Cart")
	viewer := *b.Owner
	viewer.Role = domain.RoleViewer
	sha := "3f9c1e2d4b5a69788796a5b4c3d2e1f0a9b8c7d6"
	for _, c := range []struct {
		pr   *domain.Principal
		in   release.ManualFix
		code string
	}{
		{&viewer, release.ManualFix{Commit: sha}, "forbidden"},
		{b.Owner, release.ManualFix{}, "commit_required"},
		{b.Owner, release.ManualFix{PRURL: "https://github.com/acme/shop/pull/62"}, "commit_required"},
		{b.Owner, release.ManualFix{Commit: "12345"}, "invalid_commit_sha"},
		{b.Owner, release.ManualFix{Commit: "javascript:alert(1)//commit/3f9c1e2"}, "invalid_commit_sha"},
		{b.Owner, release.ManualFix{Commit: sha, PRURL: "javascript:alert(1)//pull/62"}, "invalid_pr_url"},
		{b.Owner, release.ManualFix{Commit: sha, PRURL: "https://github.com/acme/shop/issues"}, "invalid_pr_url"},
		{b.Owner, release.ManualFix{Commit: strings.Repeat("a", 3000)}, "invalid_fix"},
	} {
		if _, err := fx.RecordByHand(ctx, c.pr, inc.ID, c.in); code(err) != c.code {
			t.Errorf("%+v: %v, want %s", c.in, err, c.code)
		}
	}
	if got := b.Incident(t, inc.ID); got.Fix.CommitSHA != "" {
		t.Fatalf("a refusal changed the fix: %+v", got.Fix)
	}
	got, err := fx.RecordByHand(ctx, b.Owner, inc.ID, release.ManualFix{Commit: "https://github.com/acme/shop/commit/" + sha,
		PRURL: "https://github.com/acme/shop/pull/62"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Fix.CommitSHA != sha || got.Fix.Source != "manual" || got.Fix.PRNumber != 62 || got.Fix.PRURL != "https://github.com/acme/shop/pull/62" {
		t.Fatalf("recorded: %+v", got.Fix)
	}
	if _, _, actor, actorID, reason := b.LastTransition(t, inc.ID); actor != domain.ActorPerson || actorID != b.Owner.UserID.String() ||
		reason != "fix recorded by hand: !62 (3f9c1e2), waiting for a release" {
		t.Fatalf("transition: %s %s %q", actor, actorID, reason)
	}
	var audited int
	if err := b.DB.Bun.NewRaw(`SELECT count(*) FROM audit_log WHERE kind = 'incident.fix_recorded' AND detail->>'commit_sha' = ?`, sha).Scan(ctx, &audited); err != nil || audited != 1 {
		t.Fatalf("audit: %d %v", audited, err)
	}
	n := b.transitions(t, inc.ID)
	if _, err := fx.RecordByHand(ctx, b.Owner, inc.ID, release.ManualFix{Commit: strings.ToUpper(sha)}); err != nil || b.transitions(t, inc.ID) != n {
		t.Fatalf("the same commit again recorded again: %v", err)
	}
}
