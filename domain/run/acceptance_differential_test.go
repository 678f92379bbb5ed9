package run_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/forge"
	"anvil/domain/internal/difftest"
	"anvil/domain/project"
	"anvil/domain/run"
	"anvil/domain/webhook"
)

// TestAcceptanceFastEqualsGeneral holds acceptance's two-round-trip path
// (tryGroupFast) to its general path (tryGroup's bun transaction): the
// same manual triggers and webhook deliveries — runs promoted at once and
// queued behind them, a queue filled to its cap and the 21st refused,
// every kind of ignored delivery, duplicate delivery ids one after the
// other and at once, a queue_full delivery re-evaluated, a stranded queue
// healed, commit statuses of a project with a forge, and groups that mix
// all of it across projects — must leave the same runs, positions, read
// model rows, ledger rows and River jobs whichever path stored them, and
// get the same answers.
func TestAcceptanceFastEqualsGeneral(t *testing.T) {
	t.Parallel()
	difftest.Run(t, 10, acceptanceSeam, acceptanceScript)
}

// acceptanceSeam sends the general bundle's acceptance down tryGroup's
// bun transaction always. The test lives here, not in domain/webhook
// whose deliveries it drives, because the seam is in this package's
// run_export_test.go.
func acceptanceSeam(b *difftest.Bundle, general bool) {
	if general {
		b.SV.Queue.TakeGeneralPath()
	}
}

// acceptRun is the acceptance script's state in one bundle.
type acceptRun struct {
	*difftest.Bundle
	projects map[string]*domain.Project
}

func (a *acceptRun) project(t *testing.T, slug string, in project.ProjectInput) *domain.Project {
	t.Helper()
	in.Slug, in.RepoURL = strp(slug), strp("https://git.example/"+slug+".git")
	in.DefaultBranch, in.RunCommand = strp("main"), strp("make test")
	p, err := a.SV.Projects.Create(context.Background(), a.Owner, in)
	if err != nil {
		t.Fatal(err)
	}
	a.projects[slug] = p
	return p
}

func (a *acceptRun) webhook(t *testing.T, slug, provider string, enabled bool) {
	t.Helper()
	if _, err := a.SV.Webhooks.Put(context.Background(), a.Owner, a.projects[slug].ID, provider,
		webhook.WebhookInput{Enabled: boolp(enabled)}); err != nil {
		t.Fatal(err)
	}
}

// runName names a run by its project and number.
func (a *acceptRun) runName(t *testing.T, id uuid.UUID) string {
	t.Helper()
	var name string
	if err := a.DB.Bun.NewRaw(`SELECT p.slug || '#' || r.number || ' ' || r.state FROM project_runs r JOIN projects p ON p.id = r.project_id
		WHERE r.id = ?`, id).Scan(context.Background(), &name); err != nil {
		t.Fatalf("%s: run %s: %v", a.Name, id, err)
	}
	return name
}

// manual triggers a run of slug's branch and returns the answer ("" for
// a project that does not exist).
func (a *acceptRun) manual(t *testing.T, slug, branch string) string {
	id := uuid.Nil
	if p := a.projects[slug]; p != nil {
		id = p.ID
	}
	r, err := a.SV.Queue.AcceptManual(context.Background(), a.Owner, id, branch)
	if err != nil {
		return fmt.Sprintf("manual %s %s: %s", slug, branch, errCode(err))
	}
	return fmt.Sprintf("manual %s %s: %s #%d", slug, branch, r.State, r.Number)
}

// deliver verifies and delivers pl to slug's webhook and returns the answer.
func (a *acceptRun) deliver(t *testing.T, slug string, pl forge.Payload) string {
	res, err := deliver(context.Background(), a.SV.Webhooks, a.projects[slug].ID, string(pl.Provider), pl)
	out := fmt.Sprintf("delivery %s/%s: %s", slug, pl.DeliveryID, res.Outcome)
	if res.Replayed {
		out += " (replayed)"
	}
	if err != nil {
		out += " error " + errCode(err)
	}
	if res.RunID != nil {
		// The run's state now: at once, the group's answer is committed.
		out += " run " + strings.SplitN(a.runName(t, *res.RunID), " ", 2)[0]
	}
	return out
}

// seq runs one call at the script's next instant and records its answer.
func (a *acceptRun) seq(answer string) {
	a.Step()
	a.Record("%s", answer)
}

// together runs the calls at once, at one instant, and records their
// answers sorted.
func (a *acceptRun) together(what string, calls ...func() string) {
	a.Step()
	answers := make([]string, len(calls))
	fns := make([]func(), len(calls))
	for i, c := range calls {
		fns[i] = func() { answers[i] = c() }
	}
	difftest.Parallel(fns...)
	slices.Sort(answers)
	a.Record("%s: %v", what, answers)
}

func times(n int, call func() string) []func() string {
	out := make([]func() string, n)
	for i := range out {
		out[i] = call
	}
	return out
}

// The commits of the script (domain/webhook's tests use the same).
const (
	shaA = "199eddf46df50de8d02e99bf1c5fdb4101338224"
	shaB = "a10867b14bb761a232cd80139fbd4c0d33264240"
	zero = "0000000000000000000000000000000000000000"
)

func boolp(b bool) *bool { return &b }

func push(provider forge.Provider, id, branch, sha string) forge.Payload {
	return forge.Payload{Provider: provider, DeliveryID: id, Kind: forge.KindPush, Event: "push",
		Ref: "refs/heads/" + branch, Branch: branch, CommitSHA: sha, BeforeSHA: shaB}
}

// deliver verifies like the route does (the webhook's material) and
// delivers pl with that verification.
func deliver(ctx context.Context, w *webhook.Webhooks, projectID uuid.UUID, provider string, pl forge.Payload) (run.DeliveryResult, error) {
	m, err := w.VerificationMaterial(ctx, projectID, provider)
	if err != nil {
		return run.DeliveryResult{}, err
	}
	return w.Deliver(ctx, m.Verification(), pl)
}

// shaC is a third commit: a Gitea push whose before and after are one
// commit is the forge's test delivery.
const shaC = "c0ffee15c0ffee15c0ffee15c0ffee15c0ffee15"

func pull(provider forge.Provider, id, head, base, sha string, fork bool) forge.Payload {
	return forge.Payload{Provider: provider, DeliveryID: id, Kind: forge.KindPullRequest, Event: "pull_request",
		Ref: head, Branch: head, CommitSHA: sha,
		PullRequest: &forge.PullRequest{Number: 7, Action: "opened", BaseBranch: base, Fork: fork, NewCommits: true}}
}

// acceptanceScript is acceptance's inputs; it names no events.
func acceptanceScript(t *testing.T, b *difftest.Bundle) []string {
	ctx := context.Background()
	a := &acceptRun{Bundle: b, projects: map[string]*domain.Project{}}
	a.project(t, "manual", project.ProjectInput{})
	a.project(t, "burst", project.ProjectInput{})
	a.project(t, "hooked", project.ProjectInput{BranchFilters: &[]string{"main", "release/*"}})
	a.project(t, "forge", project.ProjectInput{Provider: strp("gitea"), ProviderRepo: strp("acme/forge"),
		ProviderAPIURL: strp("https://gitea.example")})
	a.project(t, "alpha", project.ProjectInput{})
	a.project(t, "beta", project.ProjectInput{})
	a.project(t, "off", project.ProjectInput{})
	a.webhook(t, "hooked", "github", true)
	a.webhook(t, "forge", "gitea", true)
	a.webhook(t, "beta", "gitea", true)
	a.webhook(t, "off", "github", false)
	gh, gt := forge.GitHub, forge.Gitea
	ping := forge.Payload{Provider: gh, DeliveryID: "h4", Kind: forge.KindPing, Event: "ping"}

	// Manual runs: the first promoted at once, the others queued behind.
	for range 3 {
		a.seq(a.manual(t, "manual", ""))
	}
	a.seq(a.manual(t, "manual", "feature/x"))
	// Twenty-five at once into an idle queue: twenty accepted, the 21st
	// and later refused; then one more, alone.
	a.together("burst", times(25, func() string { return a.manual(t, "burst", "") })...)
	a.seq(a.manual(t, "burst", ""))

	// Deliveries of every kind (branch filters main and release/*).
	for _, pl := range []forge.Payload{
		push(gh, "h1", "main", shaA),
		push(gh, "h2", "release/1", shaB),
		push(gh, "h3", "feature", shaA),
		ping,
		{Provider: gh, DeliveryID: "h5", Kind: forge.KindTag, Event: "push", Ref: "refs/tags/v1", CommitSHA: shaA},
		{Provider: gh, DeliveryID: "h6", Kind: forge.KindBranchDelete, Event: "push", Ref: "refs/heads/main", Branch: "main", CommitSHA: zero},
		pull(gh, "h7", "feature", "main", shaB, false),
		pull(gh, "h8", "feature", "main", shaB, true),
		pull(gh, "h9", "feature", "develop", shaB, false),
	} {
		a.seq(a.deliver(t, "hooked", pl))
	}
	// Duplicate delivery ids: one after the other, then five copies at
	// once of a new one and of an ignored one.
	for _, pl := range []forge.Payload{push(gh, "h1", "main", shaA), push(gh, "h3", "feature", shaA), pull(gh, "h7", "feature", "main", shaB, false)} {
		a.seq(a.deliver(t, "hooked", pl))
	}
	a.together("copies", append(times(5, func() string { return a.deliver(t, "hooked", push(gh, "h10", "main", shaB)) }),
		times(5, func() string { return a.deliver(t, "hooked", push(gh, "h3", "feature", shaA)) })...)...)

	// Fill the webhook project's queue; the 21st delivery is queue_full,
	// and stays so when resent while the queue is full; a run canceled,
	// its resend is accepted into the freed place; a manual trigger into
	// the full queue is refused.
	for i := range 16 {
		a.seq(a.deliver(t, "hooked", push(gh, fmt.Sprintf("f%d", i+1), "main", shaA)))
	}
	a.seq(a.deliver(t, "hooked", push(gh, "f17", "main", shaB)))
	a.seq(a.deliver(t, "hooked", push(gh, "f17", "main", shaB)))
	a.seq(a.manual(t, "hooked", ""))
	var f1 uuid.UUID
	if err := b.DB.Bun.NewRaw(`SELECT id FROM project_runs WHERE delivery_id = 'f1'`).Scan(ctx, &f1); err != nil {
		t.Fatal(err)
	}
	a.Step()
	if _, err := b.SV.Queue.RequestCancel(ctx, b.Owner, f1); err != nil {
		t.Fatal(err)
	}
	a.seq(a.deliver(t, "hooked", push(gh, "f17", "main", shaB)))
	a.seq(a.deliver(t, "hooked", push(gh, "f17", "main", shaB)))
	a.seq(a.manual(t, "hooked", ""))

	// A stranded queue (pending runs, none active: the active one ended
	// without promoting, as a crash could leave it) is healed by the next
	// acceptance.
	a.Step()
	b.Exec(t, `UPDATE project_runs SET state = 'canceled', position = NULL, finished_at = ?
		WHERE number = 1 AND project_id = ?`, b.Clock.Now(), a.projects["manual"].ID)
	a.seq(a.manual(t, "manual", ""))

	// A project with a forge: its accepted pushes report commit statuses.
	a.seq(a.deliver(t, "forge", push(gt, "g1", "main", shaA)))
	a.seq(a.deliver(t, "forge", push(gt, "g2", "main", shaC)))
	a.seq(a.manual(t, "forge", ""))
	a.seq(a.deliver(t, "forge", push(gt, "g3", "feature", shaC)))

	// Groups of everything at once, across projects: manual runs into an
	// idle queue, copies of a delivery, a disabled webhook, a project that
	// does not exist, a full queue, replays.
	calls := times(5, func() string { return a.manual(t, "alpha", "") })
	calls = append(calls, times(4, func() string { return a.deliver(t, "beta", push(gt, "x1", "main", shaA)) })...)
	calls = append(calls, times(3, func() string { return a.deliver(t, "off", push(gh, "o1", "main", shaA)) })...)
	calls = append(calls, times(2, func() string { return a.manual(t, "nowhere", "") })...)
	calls = append(calls, times(2, func() string { return a.manual(t, "burst", "") })...)
	calls = append(calls, times(3, func() string { return a.deliver(t, "hooked", push(gh, "h1", "main", shaA)) })...)
	calls = append(calls, times(3, func() string { return a.deliver(t, "hooked", ping) })...)
	a.together("mixed", calls...)
	a.together("mixed again", append(times(3, func() string { return a.manual(t, "alpha", "") }),
		times(3, func() string { return a.deliver(t, "beta", push(gt, "x2", "release/1", shaC)) })...)...)
	a.seq(a.manual(t, "alpha", "develop"))
	a.seq(a.deliver(t, "beta", push(gt, "x3", "main", shaC)))

	// The script must have done what it says, on either path.
	var runs, deliveries, jobs int
	if err := b.DB.Bun.NewRaw(`SELECT (SELECT count(*) FROM project_runs), (SELECT count(*) FROM project_webhook_deliveries),
		(SELECT count(*) FROM river_job WHERE kind = 'report_status')`).Scan(ctx, &runs, &deliveries, &jobs); err != nil {
		t.Fatal(err)
	}
	if runs != 60 || deliveries != 33 || jobs < 2 {
		t.Errorf("%s: %d runs, %d ledger rows, %d status reports: the script went wrong", b.Name, runs, deliveries, jobs)
	}
	return nil
}
