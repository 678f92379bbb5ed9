package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"syscall"

	"anvil/domain/pipeline"
	runs "anvil/domain/run"
)

// Bounds of a run's artifacts besides ANVIL_ARTIFACTS_MAX_MB
// (docs/pipelines.md, "Artifacts").
const (
	maxArtifacts       = 1000
	maxArtifactPath    = 512
	defaultArtifactsMB = 100
	maxArtifactWalk    = 100_000 // entries looked at per step
)

// artifactBudget is what is left of a run's artifact bounds, shared by its
// steps.
type artifactBudget struct {
	mu    sync.Mutex
	bytes int64
	count int
}

func newArtifactBudget(maxBytes int64) *artifactBudget {
	if maxBytes <= 0 {
		maxBytes = defaultArtifactsMB << 20
	}
	return &artifactBudget{bytes: maxBytes, count: maxArtifacts}
}

// take reserves room for one file of size n.
func (b *artifactBudget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.count <= 0 || n > b.bytes {
		return false
	}
	b.count--
	b.bytes -= n
	return true
}

// keep stores the files of the workspace that match the step's globs. The
// walk goes through an os.Root of the workspace and never follows a
// symlink (a symlink is skipped, even one that stays inside): a step's
// output must not be able to name a file of the host. A directory that
// matches keeps everything under it.
func (b *artifactBudget) keep(ctx context.Context, w *ExecuteRunWorker, r *runs.Run, ws string, p *pipeline.Planned, out io.Writer) {
	root, err := os.OpenRoot(ws)
	if err != nil {
		fmt.Fprintf(out, "[anvil] artifacts: cannot open the workspace\n")
		return
	}
	defer root.Close()
	kept, seen := 0, 0
	matches := func(rel string) bool {
		for _, g := range p.Step.Artifacts {
			if pipeline.Match(g, rel, true) {
				return true
			}
		}
		return false
	}
	full := false
	err = fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // an unreadable folder holds nothing to keep
		}
		if seen++; seen > maxArtifactWalk {
			fmt.Fprintf(out, "[anvil] artifacts: stopped after %d entries of the workspace\n", maxArtifactWalk)
			return fs.SkipAll
		}
		if rel == ".git" {
			return fs.SkipDir
		}
		if d.Type()&fs.ModeSymlink != 0 || rel == "." {
			return nil
		}
		if d.IsDir() {
			if matches(rel) {
				return b.keepTree(ctx, w, r, root, rel, p, out, &kept, &full)
			}
			return nil
		}
		if d.Type().IsRegular() && matches(rel) {
			b.keepFile(ctx, w, r, root, rel, p, out, &kept, &full)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.SkipAll) {
		fmt.Fprintf(out, "[anvil] artifacts: %v\n", err)
	}
	fmt.Fprintf(out, "[anvil] artifacts: kept %d file(s)\n", kept)
}

func (b *artifactBudget) keepTree(ctx context.Context, w *ExecuteRunWorker, r *runs.Run, root *os.Root, dir string, p *pipeline.Planned, out io.Writer, kept *int, full *bool) error {
	_ = fs.WalkDir(root.FS(), dir, func(rel string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		if d.Type().IsRegular() {
			b.keepFile(ctx, w, r, root, rel, p, out, kept, full)
		}
		return nil
	})
	return fs.SkipDir
}

func (b *artifactBudget) keepFile(ctx context.Context, w *ExecuteRunWorker, r *runs.Run, root *os.Root, rel string, p *pipeline.Planned, out io.Writer, kept *int, full *bool) {
	if *full {
		return
	}
	if len(rel) > maxArtifactPath || strings.ContainsRune(rel, 0) {
		fmt.Fprintf(out, "[anvil] artifacts: a path longer than %d bytes is not kept\n", maxArtifactPath)
		return
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	if !b.take(fi.Size()) {
		fmt.Fprintf(out, "[anvil] artifacts: %s and what follows are not kept: the run's artifacts are bounded (ANVIL_ARTIFACTS_MAX_MB, %d files)\n", rel, maxArtifacts)
		*full = true
		return
	}
	body, err := io.ReadAll(io.LimitReader(f, fi.Size()))
	if err != nil {
		return
	}
	if err := w.Logs.SaveArtifact(ctx, r.ID, p.Key, rel, body); err != nil {
		fmt.Fprintf(out, "[anvil] artifacts: %s could not be stored\n", rel)
		w.Log.Error("store artifact", "run_id", r.ID, "path", rel, "error", err)
		return
	}
	*kept++
}
