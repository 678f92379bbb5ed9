package release_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"anvil/domain"
	"anvil/domain/alert"
	"anvil/domain/feed"
	"anvil/domain/forge"
	"anvil/domain/release"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t",
		"GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func commitFile(t *testing.T, dir, name string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(name), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-q", "-m", name)
	return git(t, dir, "rev-parse", "HEAD")
}

// A fix's whole chain against a real git repository: the repair's pull
// request merged (the delivery as the forges send it) → events from a
// release named by a commit that contains the merge → shipped → the
// one-minute window on the injected clock → CLOSED by anvil with the
// evidence. Then an event from a release without the fix reopens nothing
// (it is counted), and one from a release with it reopens and alerts
// fix_failed. The ancestry questions are answered by git in a mirror, as
// the check_ancestry job does.
func TestFixProvenInProduction(t *testing.T) {
	t.Parallel()
	b := setup(t, domain.PolicyObserve)
	ctx := context.Background()
	alerts := alert.New(b.Store, b.Queue, "")
	alerts.SetAllowPrivate(true)
	if _, _, err := alerts.Create(ctx, b.Owner, alert.Input{Name: strp("ops"), Kind: strp("webhook"), URL: strp("http://127.0.0.1:9/anvil")}); err != nil {
		t.Fatal(err)
	}
	fx := release.NewFixes(b.Store, b.Incidents)

	repo := t.TempDir()
	git(t, repo, "init", "-q", "-b", "main")
	old := commitFile(t, repo, "a")
	git(t, repo, "checkout", "-q", "-b", "anvil/repair/x")
	commitFile(t, repo, "fix")
	git(t, repo, "checkout", "-q", "main")
	git(t, repo, "merge", "-q", "--no-ff", "-m", "Merge pull request #62", "anvil/repair/x")
	merge := git(t, repo, "rev-parse", "HEAD")
	later := commitFile(t, repo, "later")
	// The questions are answered by git in the repository itself (the
	// domain may not import jobs/; the confined mirror that the
	// check_ancestry job uses has its own test, jobs/sandbox TestAncestry).
	answer := func() {
		t.Helper()
		if _, err := fx.AnswerQuestions(ctx, b.Proj.ID, func(ctx context.Context, p *domain.Project, token, fix, rel string) (string, error) {
			cmd := exec.CommandContext(ctx, "git", "merge-base", "--is-ancestor", fix, rel)
			cmd.Dir = repo
			err := cmd.Run()
			var ee *exec.ExitError
			switch {
			case err == nil:
				return "yes", nil
			case errors.As(err, &ee) && ee.ExitCode() == 1:
				return "no", nil
			}
			return "unknown", nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	check := func() release.CheckResult {
		t.Helper()
		res, err := fx.Check(ctx)
		if err != nil {
			t.Fatal(err)
		}
		answer()
		res2, err := fx.Check(ctx)
		if err != nil {
			t.Fatal(err)
		}
		res.Shipped += res2.Shipped
		res.Verified += res2.Verified
		res.Recurred += res2.Recurred
		return res
	}
	if _, err := b.DB.Bun.NewRaw(`UPDATE projects SET fix_verification_window = 60 WHERE id = ?`, b.Proj.ID).Exec(ctx); err != nil {
		t.Fatal(err)
	}

	// The incident, its repair's pull request, merged.
	inc := b.prOpen(t, "Checkout", "https://github.com/acme/shop/pull/62")
	b.send(t, event("Checkout", "shop@2.4.0+"+old[:9]))
	if err := fx.FromDelivery(ctx, b.Proj.ID, forge.Payload{Provider: forge.GitHub, Kind: forge.KindPullRequest,
		PullRequest: &forge.PullRequest{Number: 62, Closed: true, Merged: true, MergeCommitSHA: merge, URL: "https://github.com/acme/shop/pull/62"}}); err != nil {
		t.Fatal(err)
	}
	b.Clock.Advance(time.Second)
	// Traffic from the release with the fix (another fault's events).
	b.send(t, event("Other", "shop@2.5.0+"+later[:12]))
	if res := check(); res.Shipped != 1 {
		t.Fatalf("not shipped: %+v", res)
	}
	got := b.Incident(t, inc.ID)
	if got.Fix.Release != "shop@2.5.0+"+later[:12] || got.Fix.ShippedAt == nil || got.Fix.VerifyUntil.Sub(*got.Fix.ShippedAt) != time.Minute {
		t.Fatalf("shipped: %+v", got.Fix)
	}
	// An old pod: the incident's event from the release without the fix.
	b.Clock.Advance(10 * time.Second)
	b.send(t, event("Checkout", "shop@2.4.0+"+old[:9]))
	check()
	got = b.Incident(t, inc.ID)
	if got.Status != domain.IncidentPROpen || got.Fix.OldEvents != 1 || got.Fix.OldRelease != "shop@2.4.0+"+old[:9] {
		t.Fatalf("old pod: %s %+v", got.Status, got.Fix)
	}
	// The window has not ended: nothing closes.
	b.send(t, event("Other", "shop@2.5.0+"+later[:12]))
	if res := check(); res.Verified != 0 {
		t.Fatalf("closed before the window ended: %+v", res)
	}
	b.Clock.Advance(time.Minute)
	if res := check(); res.Verified != 1 {
		t.Fatalf("not verified: %+v", res)
	}
	got = b.Incident(t, inc.ID)
	if got.Status != domain.IncidentClosed || got.Fix.VerifiedAt == nil {
		t.Fatalf("proven: %s %+v", got.Status, got.Fix)
	}
	_, to, actor, actorID, reason := b.LastTransition(t, inc.ID)
	if to != domain.IncidentClosed || actor != domain.ActorSystem || actorID != "anvil" || !strings.Contains(reason, "fix verified") ||
		!strings.Contains(reason, "!62") || !strings.Contains(reason, "1m window") || !strings.Contains(reason, "served 1 events") {
		t.Fatalf("evidence: %s %s %s %q", to, actor, actorID, reason)
	}

	// Closed: an old pod's event reopens nothing.
	b.Clock.Advance(time.Second)
	b.send(t, event("Checkout", "shop@2.4.0+"+old[:9]))
	check()
	if got := b.Incident(t, inc.ID); got.Status != domain.IncidentClosed || got.Fix.OldEvents != 2 {
		t.Fatalf("an old release reopened it: %s %+v", got.Status, got.Fix)
	}
	// A release with the fix: the fix failed — reopened and alerted.
	alertsBefore := b.Jobs(t, "deliver_alert")
	b.Clock.Advance(time.Second)
	b.send(t, event("Checkout", later))
	if res := check(); res.Recurred != 1 {
		t.Fatalf("no recurrence: %+v", res)
	}
	got = b.Incident(t, inc.ID)
	if got.Status != domain.IncidentTriaged || got.Fix.RecurredIn != later {
		t.Fatalf("recurred: %s %+v", got.Status, got.Fix)
	}
	if _, _, _, _, reason := b.LastTransition(t, inc.ID); reason != "recurred in "+later+", which contains the fix from !62" {
		t.Fatalf("recurrence reason %q", reason)
	}
	var kinds []string
	if err := b.DB.Bun.NewRaw(`SELECT args->>'kind' FROM river_job WHERE kind = 'deliver_alert'`).Scan(ctx, &kinds); err != nil {
		t.Fatal(err)
	}
	if b.Jobs(t, "deliver_alert") <= alertsBefore || !strings.Contains(strings.Join(kinds, ","), domain.AlertFixFailed) {
		t.Fatalf("no fix_failed alert: %v", kinds)
	}
}

// Closed "in the current release": events from older releases (releases
// without commits, ordered by first seen) do not reopen it; one from a
// newer release does.
func TestClosedInCurrentRelease(t *testing.T) {
	t.Parallel()
	b := setup(t, domain.PolicyObserve)
	ctx := context.Background()
	fx := release.NewFixes(b.Store, b.Incidents)
	b.send(t, event("Cart", "2.4.0"))
	b.Clock.Advance(time.Minute)
	b.send(t, event("Cart", "2.5.0"))
	inc := b.Send(t, "Cart")
	if _, err := b.Incidents.DecideIn(ctx, b.Owner, inc.ID, "ignore", true); code(err) != "invalid_option" {
		t.Fatalf("option with ignore: %v", err)
	}
	if _, err := b.Incidents.DecideIn(ctx, b.Owner, inc.ID, "close", true); err != nil {
		t.Fatal(err)
	}
	if got := b.Incident(t, inc.ID); got.Status != domain.IncidentClosed || got.Fix.ClosedRelease != "2.5.0" {
		t.Fatalf("closed: %s %+v", got.Status, got.Fix)
	}
	b.Clock.Advance(time.Minute)
	b.send(t, event("Cart", "2.4.0"))
	if _, err := fx.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if got := b.Incident(t, inc.ID); got.Status != domain.IncidentClosed || got.Fix.OldEvents != 1 {
		t.Fatalf("an older release reopened it: %s %+v", got.Status, got.Fix)
	}
	b.Clock.Advance(time.Minute)
	b.send(t, event("Cart", "2.6.0"))
	if _, err := fx.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if got := b.Incident(t, inc.ID); got.Status != domain.IncidentTriaged {
		t.Fatalf("a newer release did not reopen it: %s %+v", got.Status, got.Fix)
	}
}

// gitRepo is a repository whose main branch merged a repair: the commit
// before it, the merge, and a commit on top of the merge.
func gitRepo(t *testing.T) (repo, old, merge, later string) {
	t.Helper()
	repo = t.TempDir()
	git(t, repo, "init", "-q", "-b", "main")
	old = commitFile(t, repo, "a")
	git(t, repo, "checkout", "-q", "-b", "anvil/repair/x")
	commitFile(t, repo, "fix")
	git(t, repo, "checkout", "-q", "main")
	git(t, repo, "merge", "-q", "--no-ff", "-m", "Merge pull request #62", "anvil/repair/x")
	merge = git(t, repo, "rev-parse", "HEAD")
	later = commitFile(t, repo, "later")
	return repo, old, merge, later
}

// answerer answers a project's ancestry questions with git in repo, as the
// check_ancestry job does in its mirror. git failing (not answering yes or
// no) is tried again: the test's repository has every commit, so a failure
// is the machine's (a fork refused under load), and an "unknown" would
// hold the answer back for unknownTTL, failing the test for nothing.
func answerer(t *testing.T, fx *release.Fixes, b *testBundle, repo string) func() int {
	return func() int {
		t.Helper()
		n, err := fx.AnswerQuestions(context.Background(), b.Proj.ID, func(ctx context.Context, p *domain.Project, token, fix, rel string) (string, error) {
			for try := 1; ; try++ {
				cmd := exec.CommandContext(ctx, "git", "merge-base", "--is-ancestor", fix, rel)
				cmd.Dir = repo
				out, err := cmd.CombinedOutput()
				var ee *exec.ExitError
				switch {
				case err == nil:
					return "yes", nil
				case errors.As(err, &ee) && ee.ExitCode() == 1:
					return "no", nil
				case try == 3:
					t.Logf("git merge-base --is-ancestor %s %s: %v\n%s", fix, rel, err, out)
					return "unknown", nil
				}
				t.Logf("git merge-base --is-ancestor %s %s (try %d): %v\n%s", fix, rel, try, err, out)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// A browser key is public: events it sends from a release that names a
// commit containing the merged fix ship nothing — no ancestry question is
// even asked — and the release is listed as seen from browsers only. The
// same release seen from a server connection ships the fix, and the
// evidence names where the release came from.
func TestBrowserReleaseShipsNoFix(t *testing.T) {
	t.Parallel()
	b := setup(t, domain.PolicyObserve)
	ctx := context.Background()
	fx := release.NewFixes(b.Store, b.Incidents)
	repo, _, merge, later := gitRepo(t)
	answer := answerer(t, fx, b, repo)
	_, tok, err := b.Feed.CreateConnectionOf(ctx, b.Owner, b.Proj.ID, feed.ConnectionSpec{Name: "web", Kind: feed.KindBrowser,
		AllowedOrigins: []string{"https://shop.example"}})
	if err != nil {
		t.Fatal(err)
	}
	browser, err := b.Feed.Authenticate(ctx, tok)
	if err != nil || !browser.Browser {
		t.Fatalf("browser sender: %v %+v", err, browser)
	}

	inc := b.prOpen(t, "Checkout", "https://github.com/acme/shop/pull/62")
	if err := fx.FromDelivery(ctx, b.Proj.ID, forge.Payload{Provider: forge.GitHub, Kind: forge.KindPullRequest,
		PullRequest: &forge.PullRequest{Number: 62, Closed: true, Merged: true, MergeCommitSHA: merge, URL: "https://github.com/acme/shop/pull/62"}}); err != nil {
		t.Fatal(err)
	}
	b.Clock.Advance(time.Second)
	fixed := "shop@2.5.0+" + later[:12]
	if res, err := b.Feed.Ingest(ctx, browser, "127.0.0.1", []json.RawMessage{event("Other", fixed)}); err != nil || len(res.Accepted) != 1 {
		t.Fatalf("browser ingest: %v %+v", err, res)
	}
	res, err := fx.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Shipped != 0 || res.Questions != 0 || answer() != 0 {
		t.Fatalf("a browser-only release was a candidate: %+v", res)
	}
	if res, err := fx.Check(ctx); err != nil || res.Shipped != 0 {
		t.Fatalf("shipped from a browser-only release: %v %+v", err, res)
	}
	if got := b.Incident(t, inc.ID); got.Fix.ShippedAt != nil {
		t.Fatalf("shipped: %+v", got.Fix)
	}
	if r := b.list(t)["production/"+fixed]; r.Source != release.SourceBrowser || r.Trusted {
		t.Fatalf("browser release listed as %+v", r)
	}

	// The same release from the server: trusted, it ships the fix.
	b.send(t, event("Other", fixed))
	if r := b.list(t)["production/"+fixed]; r.Source != release.SourceServer || !r.Trusted {
		t.Fatalf("server release listed as %+v", r)
	}
	if _, err := fx.Check(ctx); err != nil {
		t.Fatal(err)
	}
	answer()
	if res, err := fx.Check(ctx); err != nil || res.Shipped != 1 {
		var answers []string
		_ = b.DB.Bun.NewRaw(`SELECT fix_sha || ' ' || release_sha || ' ' || answer FROM release_ancestry`).Scan(ctx, &answers)
		t.Fatalf("not shipped from the server's release: %v %+v; ancestry answers %q; releases %+v", err, res, answers, b.list(t))
	}
	if _, _, _, _, reason := b.LastTransition(t, inc.ID); !strings.Contains(reason, "shipped in "+fixed+" (seen from a server connection)") {
		t.Fatalf("evidence does not name the source: %q", reason)
	}
}

// A release declared for every environment (releases new, or the API
// without environment) vouches for its commit, not for its traffic:
// browser-key events naming it ship nothing and, once it shipped, count
// as no served events. A server connection's event ships it, at that
// event's time, and only server events prove the fix.
func TestBrowserEventsOfADeclaredReleaseShipNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, domain.PolicyObserve)
	ctx := context.Background()
	fx := release.NewFixes(b.Store, b.Incidents)
	repo, _, merge, later := gitRepo(t)
	answer := answerer(t, fx, b, repo)
	check := func() release.CheckResult {
		t.Helper()
		res, err := fx.Check(ctx)
		if err != nil {
			t.Fatal(err)
		}
		answer()
		res2, err := fx.Check(ctx)
		if err != nil {
			t.Fatal(err)
		}
		res.Shipped += res2.Shipped
		res.Verified += res2.Verified
		res.Waiting += res2.Waiting
		return res
	}
	if _, err := b.DB.Bun.NewRaw(`UPDATE projects SET fix_verification_window = 60 WHERE id = ?`, b.Proj.ID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	_, tok, err := b.Feed.CreateConnectionOf(ctx, b.Owner, b.Proj.ID, feed.ConnectionSpec{Name: "web", Kind: feed.KindBrowser,
		AllowedOrigins: []string{"https://shop.example"}})
	if err != nil {
		t.Fatal(err)
	}
	browser, err := b.Feed.Authenticate(ctx, tok)
	if err != nil || !browser.Browser {
		t.Fatalf("browser sender: %v %+v", err, browser)
	}
	fromBrowser := func(rel string) {
		t.Helper()
		if res, err := b.Feed.Ingest(ctx, browser, "127.0.0.1", []json.RawMessage{event("Other", rel)}); err != nil || len(res.Accepted) != 1 {
			t.Fatalf("browser ingest: %v %+v", err, res)
		}
	}

	inc := b.prOpen(t, "Checkout", "https://github.com/acme/shop/pull/62")
	if err := fx.FromDelivery(ctx, b.Proj.ID, forge.Payload{Provider: forge.GitHub, Kind: forge.KindPullRequest,
		PullRequest: &forge.PullRequest{Number: 62, Closed: true, Merged: true, MergeCommitSHA: merge, URL: "https://github.com/acme/shop/pull/62"}}); err != nil {
		t.Fatal(err)
	}
	fixed := "shop@2.5.0"
	if _, err := b.Releases.Declare(ctx, b.Owner, b.Proj.ID, release.Declaration{Version: fixed, CommitSHA: later}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		b.Clock.Advance(time.Second)
		fromBrowser(fixed)
	}
	if res := check(); res.Shipped != 0 {
		t.Fatalf("browser events of a declared release shipped the fix: %+v", res)
	}
	if got := b.Incident(t, inc.ID); got.Fix.ShippedAt != nil {
		t.Fatalf("shipped: %+v", got.Fix)
	}
	var counts [4]any
	if err := b.DB.Bun.NewRaw(`SELECT server_event_count, browser_event_count, server_first_seen IS NULL, browser_first_seen IS NOT NULL FROM releases
		WHERE project_id = ? AND environment = 'production' AND version = ?`, b.Proj.ID, fixed).Scan(ctx, &counts[0], &counts[1], &counts[2], &counts[3]); err != nil {
		t.Fatal(err)
	}
	if counts[0] != int64(0) || counts[1] != int64(3) || counts[2] != true || counts[3] != true {
		t.Fatalf("per-source counts %v", counts)
	}
	if r := b.list(t)["production/"+fixed]; r.BrowserEvents != 3 || r.ServerEvents != 0 || r.BrowserFirstSeen == nil || r.ServerFirstSeen != nil || !r.Trusted {
		t.Fatalf("listed as %+v", r)
	}

	// A server connection's event ships it, at that event's time.
	b.Clock.Advance(time.Second)
	serverAt := b.Clock.Now().Truncate(time.Microsecond)
	b.send(t, event("Other", fixed))
	if res := check(); res.Shipped != 1 {
		t.Fatalf("not shipped on the server's event: %+v", res)
	}
	got := b.Incident(t, inc.ID)
	if got.Fix.ShippedAt == nil || !got.Fix.ShippedAt.Equal(serverAt) || got.Fix.Release != fixed {
		t.Fatalf("shipped %+v, want at %v", got.Fix, serverAt)
	}
	// Past the window with only browser traffic: nothing proven.
	for range 3 {
		b.Clock.Advance(time.Second)
		fromBrowser(fixed)
	}
	b.Clock.Advance(time.Minute)
	if res := check(); res.Verified != 0 || res.Waiting == 0 {
		t.Fatalf("browser events proved the fix: %+v", res)
	}
	// One server event served: proven, and it says one.
	b.send(t, event("Other", fixed))
	if res := check(); res.Verified != 1 {
		t.Fatalf("not verified on server traffic: %+v", res)
	}
	if _, _, _, _, reason := b.LastTransition(t, inc.ID); !strings.Contains(reason, "served 1 events") {
		t.Fatalf("evidence: %q", reason)
	}
}

// A deploy declared for the incident's environment ships the fix by
// itself, at the deploy's time: a person or a deploy script said so.
func TestDeployForTheEnvironmentShips(t *testing.T) {
	t.Parallel()
	b := setup(t, domain.PolicyObserve)
	ctx := context.Background()
	fx := release.NewFixes(b.Store, b.Incidents)
	repo, _, merge, later := gitRepo(t)
	answer := answerer(t, fx, b, repo)
	inc := b.prOpen(t, "Checkout", "https://github.com/acme/shop/pull/62")
	if err := fx.FromDelivery(ctx, b.Proj.ID, forge.Payload{Provider: forge.GitHub, Kind: forge.KindPullRequest,
		PullRequest: &forge.PullRequest{Number: 62, Closed: true, Merged: true, MergeCommitSHA: merge, URL: "https://github.com/acme/shop/pull/62"}}); err != nil {
		t.Fatal(err)
	}
	b.Clock.Advance(time.Minute)
	deployed := b.Clock.Now().Add(-time.Second).Truncate(time.Microsecond)
	if _, err := b.Releases.Declare(ctx, b.Owner, b.Proj.ID, release.Declaration{Version: "shop@2.5.0", CommitSHA: later,
		Environment: "production", DeployedAt: &deployed}); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.Check(ctx); err != nil {
		t.Fatal(err)
	}
	answer()
	if res, err := fx.Check(ctx); err != nil || res.Shipped != 1 {
		t.Fatalf("a deploy for the environment shipped nothing: %v %+v", err, res)
	}
	if got := b.Incident(t, inc.ID); got.Fix.ShippedAt == nil || !got.Fix.ShippedAt.Equal(deployed) {
		t.Fatalf("shipped %+v, want at %v", got.Fix, deployed)
	}
}
