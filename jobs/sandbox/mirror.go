package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The answers of an ancestry check (docs/releases.md, "Shipped").
const (
	AncestryYes     = "yes"
	AncestryNo      = "no"
	AncestryUnknown = "unknown"
)

// hexRE-like check for the abbreviated SHAs a release may name.
func validSHA(s string) bool {
	if len(s) < 7 || len(s) > 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Ancestry answers whether commit fix is contained in commit release (git
// merge-base --is-ancestor) in a bare mirror of repoURL kept in dir, under
// the same policy and confinement as a checkout. A commit the mirror lacks
// is fetched once — every branch, forced, so rebased and force-pushed
// history arrives; objects fetched before stay, so a commit a force-push
// dropped is still judged by its own history — and a commit still missing
// after that is AncestryUnknown: never a guess.
func (g *Git) Ancestry(ctx context.Context, repoURL, token, dir, fix, release string) (string, error) {
	return g.AncestryFetched(ctx, repoURL, token, dir, fix, release, new(bool))
}

// AncestryFetched is Ancestry for one of several questions asked in a row
// (a check_ancestry run): the mirror is fetched at most once for all of
// them — *fetched says whether it was, and is set when this call fetches —
// so that a run of many questions costs one fetch, and a commit still
// missing after the run's fetch is AncestryUnknown at once.
func (g *Git) AncestryFetched(ctx context.Context, repoURL, token, dir, fix, release string, fetched *bool) (string, error) {
	fix, release = strings.ToLower(fix), strings.ToLower(release)
	if !validSHA(fix) || !validSHA(release) {
		return AncestryUnknown, nil
	}
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("sandbox: mirror directory %q is not absolute", dir)
	}
	fresh := false
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); errors.Is(err, fs.ErrNotExist) {
		// The mirrors' folder is made as a workspace root is (0711): a
		// confined git runs as the sandbox user, and bwrap, running as it,
		// must traverse every ancestor to bind the mirror.
		if err := os.MkdirAll(filepath.Dir(dir), 0o711); err != nil {
			return "", fmt.Errorf("sandbox: mirror directory: %w", err)
		}
		if g.Confined() && os.Geteuid() == 0 {
			if err := checkTraversable(filepath.Dir(dir)); err != nil {
				return "", err
			}
		}
		if err := prepareDir(dir, g.Confined()); err != nil {
			return "", err
		}
		fresh = true
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("sandbox: mirror directory: %w", err)
	}
	r, err := g.newRun(ctx, repoURL, token, real, io.Discard, nil)
	if err != nil {
		return "", err
	}
	defer r.close()
	if fresh {
		if _, err := r.git(ctx, false, "init", "-q", "--bare", "--template="); err != nil {
			return "", err
		}
	}
	// The address is set on every check: the project's may have changed.
	if _, err := r.git(ctx, false, "config", "remote.origin.url", repoURL); err != nil {
		return "", err
	}
	have := func() (bool, error) {
		for _, c := range []string{fix, release} {
			if _, err := r.git(ctx, false, "rev-parse", "--verify", "--quiet", c+"^{commit}"); err != nil {
				var ee *exec.ExitError
				if errors.As(err, &ee) { // not a commit of the mirror
					return false, nil
				}
				return false, err
			}
		}
		return true, nil
	}
	ok, err := have()
	if err != nil {
		return "", err
	}
	if !ok {
		if *fetched {
			return AncestryUnknown, nil
		}
		if _, err := r.git(ctx, false, "fetch", "--quiet", "--no-tags", "origin", "+refs/heads/*:refs/heads/*"); err != nil {
			return "", err
		}
		*fetched = true
		if ok, err = have(); err != nil {
			return "", err
		}
		if !ok {
			return AncestryUnknown, nil
		}
	}
	_, err = r.git(ctx, false, "merge-base", "--is-ancestor", fix, release)
	if err == nil {
		return AncestryYes, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		return AncestryNo, nil
	}
	return "", err
}
