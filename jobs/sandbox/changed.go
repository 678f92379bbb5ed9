package sandbox

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// maxChangedFiles bounds the list ChangedFiles returns: past it the changes
// count as unknown (a `when: path` condition then holds).
const maxChangedFiles = 10_000

// ChangedFiles returns the paths commit sha (checked out in dir by
// Checkout) changes against its first parent: it deepens the shallow
// checkout by that parent, under the same policy and confinement as the
// checkout, and asks git for the difference. ok is false when they cannot
// be known (a root commit, a parent the remote will not give, too many
// files); pipelines then treat `when: path` as holding
// (docs/pipelines.md).
func (g *Git) ChangedFiles(ctx context.Context, repoURL, token, dir, sha string) (files []string, ok bool, err error) {
	if !shaRE.MatchString(sha) {
		return nil, false, fmt.Errorf("sandbox: commit %q is not a full hex commit id", sha)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, false, fmt.Errorf("sandbox: checkout directory: %w", err)
	}
	r, err := g.newRun(ctx, repoURL, token, real, io.Discard, nil)
	if err != nil {
		return nil, false, err
	}
	defer r.close()
	if _, err := r.git(ctx, false, "fetch", "--no-tags", "--depth", "2", "origin", strings.ToLower(sha)); err != nil {
		return nil, false, nil
	}
	if err := chownToDir(dir, g.Confined()); err != nil {
		return nil, false, err
	}
	out, err := r.git(ctx, false, "diff", "--no-renames", "--name-only", "-z", sha+"^1", sha, "--")
	if err != nil {
		return nil, false, nil // a root commit has no parent: unknown
	}
	for _, p := range strings.Split(out, "\x00") {
		if p == "" {
			continue
		}
		if files = append(files, p); len(files) > maxChangedFiles {
			return nil, false, nil
		}
	}
	return files, true, nil
}
