package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/run"
	"anvil/jobs/jobstest"
)

func accept(t *testing.T, b *testBundle, p *domain.Project) *run.Run {
	t.Helper()
	r, err := b.queue.AcceptManual(context.Background(), b.owner, p.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRunPassesFailsAndBackfillsTheCommit(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	repo, _, head := gitRepo(t)
	pass := b.project(t, "pass", repo, "cat README; echo to-stderr >&2; git rev-parse HEAD", 0)
	fail := b.project(t, "fail", repo, "echo failing; exit 3", 0)

	r1, r2 := accept(t, b, pass), accept(t, b, fail)
	if r1.CommitSHA != nil {
		t.Fatal("a manual run pins no commit at acceptance")
	}
	got := b.waitTerminal(t, r1.ID, 60*time.Second)
	if got.Status() != run.StatusPassed || got.ExitCode == nil || *got.ExitCode != 0 || got.FailureReason != nil {
		t.Fatalf("passing run: %s %v %v\n%s", got.Status(), got.ExitCode, got.FailureReason, b.logText(t, r1.ID))
	}
	if got.CommitSHA == nil || *got.CommitSHA != head {
		t.Fatalf("commit not backfilled: %v, want %s", got.CommitSHA, head)
	}
	log := b.logText(t, r1.ID)
	for _, want := range []string{"second", "to-stderr", head, "exit code 0"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	bad := b.waitTerminal(t, r2.ID, 60*time.Second)
	if bad.Status() != run.StatusFailed || bad.ExitCode == nil || *bad.ExitCode != 3 || *bad.FailureReason != run.ReasonExitCode {
		t.Fatalf("failing run: %s %v %v", bad.Status(), bad.ExitCode, bad.FailureReason)
	}
	// The read model catches up: status, exit code and the backfilled SHA.
	waitFor(t, 10*time.Second, "run_index", func() bool {
		var status string
		var sha *string
		_ = b.db.Bun.NewRaw(`SELECT status, commit_sha FROM run_index WHERE run_id = ?`, r1.ID).Scan(context.Background(), &status, &sha)
		return status == "passed" && sha != nil && *sha == head
	})
}

func TestWebhookRunExecutesThePinnedCommit(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	repo, old, _ := gitRepo(t)
	p := b.project(t, "pinned", repo, "git rev-parse HEAD; cat README", 0)
	var r *run.Run
	err := b.store.WithProject(context.Background(), p.ID, func(ctx context.Context, tx bun.Tx, proj *domain.Project) error {
		var err error
		r, err = b.queue.AcceptTx(ctx, tx, proj, run.AcceptSpec{Trigger: run.TriggerWebhook, Branch: "main", CommitSHA: &old})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got := b.waitTerminal(t, r.ID, 60*time.Second)
	log := b.logText(t, r.ID)
	if got.Status() != run.StatusPassed || *got.CommitSHA != old || !strings.Contains(log, old) || !strings.Contains(log, "first") {
		t.Fatalf("pinned run: %s %v\n%s", got.Status(), got.CommitSHA, log)
	}
}

func TestRunsOfAProjectNeverOverlapAndKeepFIFO(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	repo, _, _ := gitRepo(t)
	p := b.project(t, "fifo", repo, "sleep 0.2", 0)
	var runs []*run.Run
	for i := 0; i < 4; i++ {
		runs = append(runs, accept(t, b, p))
	}
	var prevEnd time.Time
	var prevStart time.Time
	for _, r := range runs {
		got := b.waitTerminal(t, r.ID, 60*time.Second)
		if got.Status() != run.StatusPassed || got.StartedAt == nil {
			t.Fatalf("run %s: %s", r.ID, got.Status())
		}
		if got.StartedAt.Before(prevEnd) || got.StartedAt.Before(prevStart) {
			t.Fatalf("run %s started at %s, before the previous one ended (%s)", r.ID, got.StartedAt, prevEnd)
		}
		prevStart, prevEnd = *got.StartedAt, *got.FinishedAt
	}
}

func TestCancelARunningRun(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	repo, _, _ := gitRepo(t)
	// The command ignores SIGTERM: it is killed after the grace period.
	p := b.project(t, "cancel", repo, "trap '' TERM; echo started; sleep 120", 0)
	r := accept(t, b, p)
	next := accept(t, b, p)
	waitFor(t, 60*time.Second, "the run to start", func() bool {
		return b.run(t, r.ID).State == run.StateRunning && strings.Contains(b.logText(t, r.ID), "started")
	})
	asked := time.Now()
	if _, err := b.queue.RequestCancel(context.Background(), b.owner, r.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "canceling", func() bool {
		st := b.run(t, r.ID).State
		return st == run.StateCanceling || st == run.StateCanceled
	})
	t.Logf("cancel reached the executor after %s", time.Since(asked))
	got := b.waitTerminal(t, r.ID, 30*time.Second)
	if got.Status() != run.StatusCanceled {
		t.Fatalf("canceled run: %s", got.Status())
	}
	// The next run is promoted and runs.
	waitFor(t, 30*time.Second, "the next run to start", func() bool {
		st := b.run(t, next.ID).State
		return st == run.StateRunning || run.IsTerminal(st)
	})
	if _, err := b.queue.RequestCancel(context.Background(), b.owner, next.ID); err != nil && !errors.Is(err, domain.ErrConflict) {
		t.Fatal(err)
	}
}

func TestRunTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	repo, _, _ := gitRepo(t)
	p := b.project(t, "slow", repo, "sleep 60", 1)
	r := accept(t, b, p)
	got := b.waitTerminal(t, r.ID, 60*time.Second)
	if got.Status() != run.StatusFailed || got.FailureReason == nil || *got.FailureReason != run.ReasonTimeout {
		t.Fatalf("timed out run: %s %v\n%s", got.Status(), got.FailureReason, b.logText(t, r.ID))
	}
}

func TestSandboxHasNoNetworkAndNoHostSecrets(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	repo, _, _ := gitRepo(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	cmd := fmt.Sprintf(`env; echo "uid=$(id -u)"
if cat /etc/shadow >/dev/null 2>&1; then echo SHADOW-READABLE; fi
if (exec 3<>/dev/tcp/127.0.0.1/%d) 2>/dev/null; then echo NETWORK-REACHABLE; fi
echo done`, port)
	p := b.project(t, "jail", repo, cmd, 0)
	r := accept(t, b, p)
	got := b.waitTerminal(t, r.ID, 60*time.Second)
	log := b.logText(t, r.ID)
	if got.Status() != run.StatusPassed || !strings.Contains(log, "done") {
		t.Fatalf("run: %s\n%s", got.Status(), log)
	}
	for _, bad := range []string{"ANVIL_", "SHADOW-READABLE", "NETWORK-REACHABLE", "uid=0"} {
		if strings.Contains(log, bad) {
			t.Errorf("sandbox leak %q:\n%s", bad, log)
		}
	}
	if !strings.Contains(log, "uid=65534") {
		t.Errorf("not run as an unprivileged user:\n%s", log)
	}
}

func TestProcessExecutorSaysItIsUnsandboxed(t *testing.T) {
	t.Parallel()
	b := setup(t, options{mode: "process"})
	repo, _, _ := gitRepo(t)
	p := b.project(t, "plain", repo, "echo plain", 0)
	r := accept(t, b, p)
	got := b.waitTerminal(t, r.ID, 60*time.Second)
	if got.Status() != run.StatusPassed || got.Sandboxed == nil || *got.Sandboxed {
		t.Fatalf("process run: %s sandboxed=%v", got.Status(), got.Sandboxed)
	}
	if !strings.Contains(b.logText(t, r.ID), "WITHOUT a sandbox") {
		t.Fatal("the log does not say the run was unsandboxed")
	}
}

func TestCheckoutFailureFailsTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	p := b.project(t, "nowhere", "file:///nonexistent/repo.git", "true", 0)
	r := accept(t, b, p)
	got := b.waitTerminal(t, r.ID, 60*time.Second)
	if got.Status() != run.StatusFailed || *got.FailureReason != run.ReasonCheckout {
		t.Fatalf("checkout failure: %s %v", got.Status(), got.FailureReason)
	}
}

// A project saved while local checkouts were allowed is refused at checkout
// once they are not: the run fails at checkout and its log says why.
func TestCheckoutPolicyAppliesAtRunTime(t *testing.T) {
	t.Parallel()
	b := setup(t, options{strictCheckout: true})
	repo := jobstest.GitRepo(t)
	p := b.project(t, "local", repo.URL, "echo must-not-run", 0)
	r := accept(t, b, p)
	got := b.waitTerminal(t, r.ID, 60*time.Second)
	if got.Status() != run.StatusFailed || *got.FailureReason != run.ReasonCheckout {
		t.Fatalf("run of a local repository: %s %v", got.Status(), got.FailureReason)
	}
	log := b.logText(t, r.ID)
	if !strings.Contains(log, "local checkouts are refused") || !strings.Contains(log, "ANVIL_CHECKOUT_ALLOW_LOCAL=true") || strings.Contains(log, "must-not-run\n") {
		t.Fatalf("log:\n%s", log)
	}
}
