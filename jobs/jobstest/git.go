// Package jobstest has fixtures for tests that execute runs: real git
// repositories made on the spot.
package jobstest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Repo is a bare repository with two commits on main.
type Repo struct {
	URL  string // file:// URL of the bare repository
	Old  string // the first commit
	Head string // the second commit, the head of main
}

// GitRepo makes a bare repository with two commits on main in a fresh
// temporary folder readable by the sandbox's unprivileged user.
func GitRepo(t testing.TB) Repo {
	t.Helper()
	return GitRepoWith(t, nil)
}

// GitRepoWith is GitRepo whose second commit also adds files (path →
// content; folders are made as needed).
func GitRepoWith(t testing.TB, files map[string]string) Repo {
	t.Helper()
	dir := t.TempDir()
	bare := filepath.Join(dir, "repo.git")
	work := filepath.Join(dir, "work")
	run := func(wd string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = wd
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=anvil-test", "GIT_AUTHOR_EMAIL=test@anvil.test",
			"GIT_COMMITTER_NAME=anvil-test", "GIT_COMMITTER_EMAIL=test@anvil.test", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run(dir, "init", "-q", "--bare", "-b", "main", bare)
	run(dir, "init", "-q", "-b", "main", work)
	if err := os.WriteFile(filepath.Join(work, "README"), []byte("first\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(work, "add", ".")
	run(work, "commit", "-q", "-m", "first")
	old := run(work, "rev-parse", "HEAD")
	if err := os.WriteFile(filepath.Join(work, "README"), []byte("second\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(work, "add", ".")
	run(work, "commit", "-q", "-am", "second")
	head := run(work, "rev-parse", "HEAD")
	run(work, "push", "-q", bare, "main")
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil {
			mode := os.FileMode(0o644)
			if info.IsDir() {
				mode = 0o755
			}
			_ = os.Chmod(p, mode)
		}
		return nil
	})
	_ = os.Chmod(filepath.Dir(dir), 0o755)
	return Repo{URL: "file://" + bare, Old: old, Head: head}
}
