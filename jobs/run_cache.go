package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"anvil/domain"
	runs "anvil/domain/run"
	"anvil/domain/runcache"
	"anvil/jobs/sandbox"
)

// startCache gives a run its project's cache (docs/caches.md): the
// project's own directory when the run's code is the project's, a
// throw-away copy when it comes from a fork (nothing it writes reaches the
// next run), an empty throw-away one when another run holds the cache. A
// repair run has a cache of its own, apart from the runs'. The returned
// release — call it once the run's processes are gone — brings a written
// cache under its bound, least recently used entry first, and records its
// disk use for the project page (the runs' cache; a repair's is only
// said in its log).
func (w *ExecuteRunWorker) startCache(ctx context.Context, run *runs.Run, proj *domain.Project, ws string, spec *sandbox.Spec, logw *runs.LogWriter) (func(), error) {
	gen, err := w.CacheState.Generation(ctx, run.ProjectID)
	if err != nil {
		return nil, err
	}
	repair := run.Trigger == runs.TriggerRepair
	if run.FromFork && !proj.ForkCache {
		// The project gives forks' runs no copy of its cache
		// (docs/caches.md, "What a fork's copy exposes").
		l, err := w.Caches.Empty(ws + ".cache")
		if err != nil {
			return nil, err
		}
		spec.Cache = l.Cache
		logw.Printf("cache: this run's code comes from a fork and this project gives forks' runs no cache: it starts with an empty one that is not kept")
		return sync.OnceFunc(func() {
			if _, err := l.Release(); err != nil {
				w.Log.Error("release a run's cache", "run_id", run.ID, "error", err)
			}
		}), nil
	}
	l, err := w.Caches.Acquire(sandbox.CacheScope(run.ProjectID.String(), repair), gen, !run.FromFork, ws+".cache")
	if err != nil {
		return nil, err
	}
	spec.Cache = l.Cache
	switch {
	case l.CopyFailed != nil:
		w.Log.Warn("copy a project's cache for a fork's run", "run_id", run.ID, "error", l.CopyFailed)
		logw.Printf("cache: this run's code comes from a fork, and the project's cache could not be copied for it: it starts with an empty cache that is not kept")
	case l.Mode == sandbox.CacheCopy:
		logw.Printf("cache: this run's code comes from a fork: it reads a copy of the project's cache, and nothing it writes is kept")
	case l.Mode == sandbox.CacheEmpty:
		logw.Printf("cache: another run of this project holds its cache: this run starts with an empty cache that is not kept")
	case l.Cleared:
		logw.Printf("cache: the project's cache was cleared: this run starts it anew")
	case repair:
		logw.Printf("cache: this repair run reads and writes the project's repair cache, apart from its runs' (%s)", strings.Join(cacheVars(), ", "))
	default:
		logw.Printf("cache: this run reads and writes the project's cache (%s)", strings.Join(cacheVars(), ", "))
	}
	return sync.OnceFunc(func() {
		u, err := l.Release()
		if err != nil {
			w.Log.Error("release a run's cache", "run_id", run.ID, "error", err)
			return
		}
		if l.Mode != sandbox.CacheWrite {
			return
		}
		if len(u.Removed) > 0 {
			logw.Printf("cache: removed %s, least recently used, to keep the cache within %s", strings.Join(u.Removed, ", "), humanBytes(w.Caches.MaxBytes))
		}
		logw.Printf("cache: %s kept for the next run", humanBytes(u.Bytes))
		if repair {
			return
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := w.CacheState.Used(rctx, run.ProjectID, gen, u.Bytes); err != nil {
			w.Log.Warn("record a run's cache", "run_id", run.ID, "error", err)
		}
	}), nil
}

func cacheVars() []string {
	return []string{"npm_config_cache", "PIP_CACHE_DIR", "GOMODCACHE", "GOCACHE", "CARGO_HOME", "BUNDLE_PATH", "XDG_CACHE_HOME"}
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// ClearRunCacheWorker erases a project's cache on this worker when someone
// clears it from the project page (docs/caches.md, "Clearing"); a cache in
// use by a run is tried again shortly (and, whatever happens, erased before
// a run next uses it: its generation is older).
type ClearRunCacheWorker struct {
	river.WorkerDefaults[runcache.ClearArgs]
	caches *sandbox.Caches
}

// Timeout bounds the removal of one project's cache.
func (w *ClearRunCacheWorker) Timeout(*river.Job[runcache.ClearArgs]) time.Duration {
	return 5 * time.Minute
}

// Work erases the cache.
func (w *ClearRunCacheWorker) Work(_ context.Context, job *river.Job[runcache.ClearArgs]) error {
	if w.caches == nil {
		return nil
	}
	// Both scopes: the runs' cache and the repair runs'.
	err := w.caches.Clear(job.Args.ProjectID.String(), job.Args.Generation)
	if err == nil {
		err = w.caches.Clear(sandbox.CacheScope(job.Args.ProjectID.String(), true), job.Args.Generation)
	}
	if errors.Is(err, sandbox.ErrCacheBusy) {
		return river.JobSnooze(5 * time.Second)
	}
	return err
}

// pruneCaches removes the caches of projects that are no longer live
// (deleted, being erased, or gone): a cache holds what a project's builds
// fetched and made, and goes with the project — both its scopes, each
// under its lock (a cache a run still holds is left to the next prune).
// It returns how many it removed.
func pruneCaches(ctx context.Context, s *domain.Store, caches *sandbox.Caches) (int, error) {
	if caches == nil {
		return 0, nil
	}
	names, err := caches.Projects()
	if err != nil || len(names) == 0 {
		return 0, err
	}
	ids := make([]uuid.UUID, 0, len(names))
	for _, n := range names {
		if id, err := uuid.Parse(sandbox.CacheProject(n)); err == nil && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	gone, err := notLive(ctx, s, ids)
	if err != nil {
		return 0, fmt.Errorf("caches: %w", err)
	}
	removed := 0
	for _, id := range gone {
		for _, scope := range []string{sandbox.CacheScope(id.String(), false), sandbox.CacheScope(id.String(), true)} {
			if !slices.Contains(names, scope) {
				continue
			}
			switch err := caches.Remove(scope); {
			case errors.Is(err, sandbox.ErrCacheBusy):
			case err != nil:
				return removed, fmt.Errorf("caches: remove %s: %w", scope, err)
			default:
				removed++
			}
		}
	}
	return removed, nil
}
