package sandbox_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"anvil/domain/repourl"
	"anvil/jobs/jobstest"
	"anvil/jobs/sandbox"
)

// git runs git in dir for the test's repository.
func gitIn(t *testing.T, dir string, args ...string) string {
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

func commit(t *testing.T, dir, file string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, file), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, dir, "add", ".")
	gitIn(t, dir, "commit", "-q", "-m", file)
	return gitIn(t, dir, "rev-parse", "HEAD")
}

// The ancestry check in a mirror: merges, rebases, force-pushes, and a
// commit the mirror has never seen (fetched once, then "unknown").
func TestAncestry(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	gitIn(t, repo, "init", "-q", "-b", "main")
	base := commit(t, repo, "a")
	gitIn(t, repo, "checkout", "-q", "-b", "fix")
	fix := commit(t, repo, "fix")
	gitIn(t, repo, "checkout", "-q", "main")
	other := commit(t, repo, "b")
	gitIn(t, repo, "merge", "-q", "--no-ff", "-m", "merge fix", "fix")
	merge := gitIn(t, repo, "rev-parse", "HEAD")
	after := commit(t, repo, "c")

	g, err := sandbox.NewGit(false, repourl.Policy{AllowLocal: true})
	if err != nil {
		t.Fatal(err)
	}
	mirror := filepath.Join(t.TempDir(), "mirror")
	ctx := context.Background()
	ask := func(fix, rel, want string) {
		t.Helper()
		got, err := g.Ancestry(ctx, repo, "", mirror, fix, rel)
		if err != nil || got != want {
			t.Fatalf("Ancestry(%.7s in %.7s) = %q, %v; want %q", fix, rel, got, err, want)
		}
	}
	ask(fix, merge, sandbox.AncestryYes)   // merged
	ask(fix, after, sandbox.AncestryYes)   // later on main
	ask(merge, merge, sandbox.AncestryYes) // the merge commit itself
	ask(fix, other, sandbox.AncestryNo)    // main before the merge
	ask(fix, base, sandbox.AncestryNo)
	ask(merge[:10], after[:9], sandbox.AncestryYes) // abbreviated SHAs

	// A rebase and a force-push: main is rewritten without the fix; the
	// rewritten head does not contain it, the old one still does.
	gitIn(t, repo, "checkout", "-q", "-b", "rewrite", other)
	rebased := commit(t, repo, "d")
	gitIn(t, repo, "branch", "-q", "-f", "main", rebased)
	ask(fix, rebased, sandbox.AncestryNo)
	ask(fix, after, sandbox.AncestryYes)
	// A fix rebased onto main: the new commit is contained, the original not.
	gitIn(t, repo, "checkout", "-q", "fix")
	gitIn(t, repo, "rebase", "-q", "main")
	fix2 := gitIn(t, repo, "rev-parse", "HEAD")
	gitIn(t, repo, "checkout", "-q", "main")
	gitIn(t, repo, "merge", "-q", "--ff-only", "fix")
	ask(fix2, fix2, sandbox.AncestryYes)
	ask(fix, fix2, sandbox.AncestryNo)

	// Never seen, not on the remote: fetched once, then unknown.
	ask("0123456789abcdef0123456789abcdef01234567", after, sandbox.AncestryUnknown)
	ask(fix, "fedcba9", sandbox.AncestryUnknown)
	ask("not-a-sha", after, sandbox.AncestryUnknown)
}

// The ancestry check as the worker runs it: git confined (as the sandbox
// user when the host process is root), the mirror in a folder of mirrors
// the check makes itself, as WORK_ROOT/mirrors/<project> is.
func TestAncestryConfined(t *testing.T) {
	t.Parallel()
	if err := sandbox.BwrapAvailable(); err != nil {
		t.Skipf("bubblewrap cannot run here: %v", err)
	}
	repo := jobstest.GitRepo(t) // readable by the sandbox user
	g, err := sandbox.NewGit(true, repourl.Policy{AllowLocal: true})
	if err != nil {
		t.Fatal(err)
	}
	mirror := filepath.Join(t.TempDir(), "mirrors", "project")
	ctx := context.Background()
	for _, c := range []struct{ fix, rel, want string }{
		{repo.Old, repo.Head, sandbox.AncestryYes},
		{repo.Head, repo.Old, sandbox.AncestryNo},
		{"0123456789abcdef0123456789abcdef01234567", repo.Head, sandbox.AncestryUnknown},
	} {
		got, err := g.Ancestry(ctx, repo.URL, "", mirror, c.fix, c.rel)
		if err != nil || got != c.want {
			t.Fatalf("Ancestry(%.7s in %.7s) = %q, %v; want %q", c.fix, c.rel, got, err, c.want)
		}
	}
}

// A check_ancestry run fetches the mirror at most once, however many of its
// questions name commits the mirror lacks: after the run's fetch, a
// missing commit is unknown at once; the next run fetches again.
func TestAncestryFetchesOncePerRun(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	gitIn(t, repo, "init", "-q", "-b", "main")
	fix := commit(t, repo, "fix")
	first := commit(t, repo, "a")
	g, err := sandbox.NewGit(false, repourl.Policy{AllowLocal: true})
	if err != nil {
		t.Fatal(err)
	}
	mirror := filepath.Join(t.TempDir(), "mirror")
	ctx := context.Background()
	fetched := false
	if got, err := g.AncestryFetched(ctx, repo, "", mirror, fix, first, &fetched); err != nil || got != sandbox.AncestryYes || !fetched {
		t.Fatalf("first question: %q %v fetched=%v", got, err, fetched)
	}
	// Pushed after the run's fetch: this run does not fetch again.
	second := commit(t, repo, "b")
	if got, err := g.AncestryFetched(ctx, repo, "", mirror, fix, second, &fetched); err != nil || got != sandbox.AncestryUnknown {
		t.Fatalf("second question in the same run: %q %v", got, err)
	}
	next := false
	if got, err := g.AncestryFetched(ctx, repo, "", mirror, fix, second, &next); err != nil || got != sandbox.AncestryYes || !next {
		t.Fatalf("the next run: %q %v", got, err)
	}
}
