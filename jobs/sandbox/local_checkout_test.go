package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A local repository named by its bare path is cloned as file://, so the
// clone is shallow like any other and git prints no "--depth is ignored in
// local clones" into the run's log.
func TestCheckoutOfALocalPathIsShallowAndQuiet(t *testing.T) {
	t.Parallel()
	gits(t, func(t *testing.T, g *Git) {
		ws := newWorkspace(t)
		var log syncBuffer
		sha, err := g.Checkout(context.Background(), fixture.bare, "main", "", "", ws, &log)
		if err != nil || sha != fixture.second {
			t.Fatalf("Checkout: %s, %v (log %q)", sha, err, log.String())
		}
		if strings.Contains(log.String(), "depth is ignored") {
			t.Errorf("the log warns about --depth: %q", log.String())
		}
		if _, err := os.Stat(filepath.Join(ws, ".git", "shallow")); err != nil {
			t.Errorf("the checkout of a local path is not shallow: %v", err)
		}
	})
}

func TestGitSource(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/srv/git/shop.git":               "file:///srv/git/shop.git",
		"/srv/git/../git/shop":            "file:///srv/git/shop",
		"file:///srv/git/shop.git":        "file:///srv/git/shop.git",
		"https://git.example.com/a/b.git": "https://git.example.com/a/b.git",
		"git@git.example.com:a/b.git":     "git@git.example.com:a/b.git",
	} {
		if got := gitSource(in); got != want {
			t.Errorf("gitSource(%q) = %q, want %q", in, got, want)
		}
	}
}
