package release_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"anvil/domain"
	"anvil/domain/forge"
	"anvil/domain/incident"
	"anvil/domain/release"
)

func TestFixesIn(t *testing.T) {
	t.Parallel()
	got := release.FixesIn("Guard the cart\n\nFixes SHOP-12, closes: shop-3 and Resolved WEB-APP-7; see SHOP-9; prefix-fixes SHOP-1x")
	want := []release.FixRef{{"Fixes", "shop", 12}, {"closes", "shop", 3}, {"Resolved", "web-app", 7}}
	if len(got) != len(want) {
		t.Fatalf("%+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// prOpen puts an incident where a repair run's pull request leaves it.
func (b *testBundle) prOpen(t *testing.T, title, url string) *incident.Incident {
	t.Helper()
	inc := b.Send(t, title)
	if _, err := b.DB.Bun.NewRaw(`UPDATE incidents SET status = 'PR_OPEN', pr_url = ? WHERE id = ?`, url, inc.ID).Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	return b.Incident(t, inc.ID)
}

func (b *testBundle) transitions(t *testing.T, id any) int {
	t.Helper()
	var n int
	if err := b.DB.Bun.NewRaw(`SELECT count(*) FROM incident_transitions WHERE incident_id = ?`, id).Scan(context.Background(), &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Merged and closed repair pull requests, and "Fixes SHOP-n" in a push to
// the default branch (and not in one to another branch).
func TestFixFromDeliveries(t *testing.T) {
	t.Parallel()
	b := setup(t, domain.PolicyObserve)
	ctx := context.Background()
	fx := release.NewFixes(b.Store, b.Incidents)
	merged := b.prOpen(t, "A", "https://github.com/acme/shop/pull/62")
	closed := b.prOpen(t, "B", "https://gitlab.example/acme/shop/-/merge_requests/4")
	sha := "473d70eb7c50a54ae62bf9b124efa1c3eb245be8"
	merge := forge.Payload{Provider: forge.GitHub, Kind: forge.KindPullRequest, PullRequest: &forge.PullRequest{Number: 62, Action: "closed",
		Closed: true, Merged: true, MergeCommitSHA: sha, URL: "https://github.com/acme/shop/pull/62"}}
	if err := fx.FromDelivery(ctx, b.Proj.ID, merge); err != nil {
		t.Fatal(err)
	}
	got := b.Incident(t, merged.ID)
	if got.Status != domain.IncidentPROpen || got.Fix.CommitSHA != sha || got.Fix.PRNumber != 62 || got.Fix.MergedAt == nil {
		t.Fatalf("merged: %+v", got)
	}
	if _, to, actor, actorID, reason := b.LastTransition(t, merged.ID); to != domain.IncidentPROpen || actor != domain.ActorSystem ||
		actorID != "forge:github" || reason != "fix merged in !62 (473d70e), waiting for a release" {
		t.Fatalf("merge transition: %s %s %s %q", to, actor, actorID, reason)
	}
	if note := incident.FixNote(got.View().Fix); note != "fix merged in !62, waiting for a release" {
		t.Fatalf("note %q", note)
	}
	n := b.transitions(t, merged.ID)
	if err := fx.FromDelivery(ctx, b.Proj.ID, merge); err != nil || b.transitions(t, merged.ID) != n {
		t.Fatalf("a merge delivered again recorded again: %v", err)
	}
	closeMR := forge.Payload{Provider: forge.GitLab, Kind: forge.KindPullRequest, PullRequest: &forge.PullRequest{Number: 4, Action: "close",
		Closed: true, URL: "https://gitlab.example/acme/shop/-/merge_requests/4"}}
	if err := fx.FromDelivery(ctx, b.Proj.ID, closeMR); err != nil {
		t.Fatal(err)
	}
	if got := b.Incident(t, closed.ID); got.Status != domain.IncidentNeedsHuman || got.NeedsHumanReason != "repair pull request closed without merging" {
		t.Fatalf("closed unmerged: %+v", got)
	}
	if got := b.Incident(t, merged.ID); got.Status != domain.IncidentPROpen {
		t.Fatalf("another pull request's close moved %s", got.Status)
	}

	// A push: only to the default branch, only this project's short ids.
	pushed := b.Send(t, "C")
	commit := "abcdef1234567890abcdef1234567890abcdef12"
	push := forge.Payload{Provider: forge.Gitea, Kind: forge.KindPush, Branch: "feature", Commits: []forge.Commit{{SHA: commit,
		Message: "Guard the cart\n\nFixes SHOP-3, fixes OTHER-3"}}}
	if err := fx.FromDelivery(ctx, b.Proj.ID, push); err != nil {
		t.Fatal(err)
	}
	if got := b.Incident(t, pushed.ID); got.Fix.CommitSHA != "" {
		t.Fatalf("a push to another branch marked the fix")
	}
	push.Branch = "main"
	if err := fx.FromDelivery(ctx, b.Proj.ID, push); err != nil {
		t.Fatal(err)
	}
	got = b.Incident(t, pushed.ID)
	if got.Number != 3 || got.Fix.CommitSHA != commit || got.Fix.Source != "push" || got.Status != domain.IncidentTriaged {
		t.Fatalf("pushed fix: %+v", got)
	}
	if _, _, _, _, reason := b.LastTransition(t, pushed.ID); reason != `fix committed in abcdef1 ("Fixes" SHOP-3), waiting for a release` {
		t.Fatalf("push transition %q", reason)
	}
}

// A fix is never replaced by an older one: not by an older commit pushed
// later, not by a delivery the forge sends again after a newer fix was
// recorded. A revert ("Revert "…"") never becomes the fix, whatever it
// quotes. A merged pull request's address becomes the fix's link only
// through the check the repair's own address passes.
func TestFixOrderRevertsAndLinks(t *testing.T) {
	t.Parallel()
	b := setup(t, domain.PolicyObserve)
	ctx := context.Background()
	fx := release.NewFixes(b.Store, b.Incidents)
	inc := b.Send(t, "Cart")
	ref := fmt.Sprintf("SHOP-%d", inc.Number)
	now := b.Clock.Now()
	push := func(sha, message string, at time.Time) {
		t.Helper()
		if err := fx.FromDelivery(ctx, b.Proj.ID, forge.Payload{Provider: forge.GitHub, Kind: forge.KindPush, Branch: "main",
			Commits: []forge.Commit{{SHA: sha, Message: message, Timestamp: at}}}); err != nil {
			t.Fatal(err)
		}
	}
	fix := func() string { t.Helper(); return b.Incident(t, inc.ID).Fix.CommitSHA }
	a := strings.Repeat("a", 40)
	push(a, "Guard the cart\n\nFixes "+ref, now.Add(-time.Hour))
	if fix() != a {
		t.Fatalf("fix %q, want %q", fix(), a)
	}
	// An older commit pushed later: the newer fix stays.
	push(strings.Repeat("b", 40), "Guard the cart sooner\n\nFixes "+ref, now.Add(-2*time.Hour))
	if fix() != a {
		t.Fatalf("an older commit replaced the fix: %q", fix())
	}
	// A newer commit replaces it; the first delivery, sent again, does not.
	c := strings.Repeat("c", 40)
	push(c, "Guard the cart for real\n\nFixes "+ref, now.Add(-time.Minute))
	if fix() != c {
		t.Fatalf("a newer commit did not replace the fix: %q", fix())
	}
	n := b.transitions(t, inc.ID)
	push(a, "Guard the cart\n\nFixes "+ref, now.Add(-time.Hour))
	if fix() != c || b.transitions(t, inc.ID) != n {
		t.Fatalf("a replayed delivery replaced the fix: %q", fix())
	}
	// Reverts, the newest commits of all: never the fix.
	push(strings.Repeat("d", 40), "Revert \"Guard the cart for real\"\n\nThis reverts commit "+c+".\n\nFixes "+ref, now)
	push(strings.Repeat("e", 40), "Revert \"Fixes "+ref+"\"", now)
	if fix() != c || b.transitions(t, inc.ID) != n {
		t.Fatalf("a revert became the fix: %q", fix())
	}

	// A merged pull request whose address is not a web page's.
	pr := b.prOpen(t, "Checkout", "https://github.com/acme/shop/pull/7")
	if err := fx.FromDelivery(ctx, b.Proj.ID, forge.Payload{Provider: forge.GitHub, Kind: forge.KindPullRequest, PullRequest: &forge.PullRequest{
		Number: 7, Closed: true, Merged: true, MergeCommitSHA: strings.Repeat("f", 40), URL: "javascript:alert(document.cookie)//pull/7"}}); err != nil {
		t.Fatal(err)
	}
	if got := b.Incident(t, pr.ID); got.Fix.CommitSHA != strings.Repeat("f", 40) || got.Fix.PRURL != "https://github.com/acme/shop/pull/7" {
		t.Fatalf("merged fix link: %+v", got.Fix)
	}
}
