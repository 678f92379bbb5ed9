package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func newCaches(t *testing.T, max int64) *Caches {
	t.Helper()
	root := filepath.Join(filepath.Dir(wsRoot), "caches-"+strings.ReplaceAll(t.Name(), "/", "-"))
	t.Cleanup(func() { _ = removeAll(root) })
	return &Caches{Root: root, MaxBytes: max}
}

// runWithCache runs command in a fresh workspace with lease's cache.
func runWithCache(t *testing.T, e Executor, l *Lease, command string) string {
	t.Helper()
	var out syncBuffer
	res, err := e.Run(context.Background(), Spec{Workspace: newWorkspace(t), Command: command, Limits: DefaultLimits(), Cache: l.Cache}, &out)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run(%q): %+v %v\n%s", command, res, err, out.String())
	}
	return out.String()
}

// A writing run sees its project's cache at /cache (the process executor:
// at the host path) with every conventional variable pointing into it, and
// what it writes is there for the next run.
func TestCacheKeptBetweenRuns(t *testing.T) {
	executors(t, func(t *testing.T, e Executor) {
		c := newCaches(t, 0)
		l, err := c.Acquire("p1", 0, true, filepath.Join(t.TempDir(), "scratch"))
		if err != nil || l.Mode != CacheWrite {
			t.Fatalf("acquire: %+v %v", l, err)
		}
		out := runWithCache(t, e, l, `mkdir -p "$npm_config_cache" && echo kept > "$npm_config_cache/x" && echo "go=$GOMODCACHE xdg=$XDG_CACHE_HOME"`)
		root := CacheMount
		if !e.Sandboxed() {
			root = l.Cache.Dir
		}
		if !strings.Contains(out, "go="+root+"/go-mod xdg="+root+"/xdg") {
			t.Fatalf("variables: %q", out)
		}
		u, err := l.Release()
		if err != nil || u.Bytes == 0 {
			t.Fatalf("release: %+v %v", u, err)
		}
		l, err = c.Acquire("p1", 0, true, "")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release()
		if out := runWithCache(t, e, l, `cat "$npm_config_cache/x"`); out != "kept\n" {
			t.Fatalf("second run read %q", out)
		}
	})
}

// A fork's run gets a copy: it reads what the project's runs left, and
// nothing it writes or removes reaches the project's cache.
func TestCacheCopyNeverWritesBack(t *testing.T) {
	e := bwrapExec(t)
	c := newCaches(t, 0)
	l, err := c.Acquire("p1", 0, true, "")
	if err != nil {
		t.Fatal(err)
	}
	runWithCache(t, e, l, `mkdir -p /cache/npm && echo good > /cache/npm/pkg`)
	if _, err := l.Release(); err != nil {
		t.Fatal(err)
	}
	scratch := filepath.Join(filepath.Dir(wsRoot), "scratch-"+t.Name())
	f, err := c.Acquire("p1", 0, false, scratch)
	if err != nil || f.Mode != CacheCopy {
		t.Fatalf("acquire a copy: %+v %v", f, err)
	}
	out := runWithCache(t, e, f, `cat /cache/npm/pkg; echo poisoned > /cache/npm/pkg; echo new > /cache/npm/other; rm -rf /cache/npm/gone`)
	if out != "good\n" {
		t.Fatalf("the fork read %q", out)
	}
	if _, err := f.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(scratch); !os.IsNotExist(err) {
		t.Fatalf("the copy is left behind: %v", err)
	}
	data := filepath.Join(c.Root, "p1", "data", "npm")
	if b, _ := os.ReadFile(filepath.Join(data, "pkg")); string(b) != "good\n" {
		t.Fatalf("the project's cache holds %q", b)
	}
	if _, err := os.Stat(filepath.Join(data, "other")); !os.IsNotExist(err) {
		t.Fatalf("the fork's file reached the cache: %v", err)
	}
}

// A run that finds the cache locked by another (a second worker's run of
// the same project) does not wait and does not share it: it gets an empty
// throw-away cache. Clear refuses while the lock is held.
func TestCacheLockedGivesAnEmptyCache(t *testing.T) {
	c := newCaches(t, 0)
	l, err := c.Acquire("p1", 0, true, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.Cache.Dir, "mine"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, write := range []bool{true, false} {
		scratch := filepath.Join(t.TempDir(), "scratch")
		o, err := c.Acquire("p1", 0, write, scratch)
		if err != nil || o.Mode != CacheEmpty || o.Cache.Dir != scratch {
			t.Fatalf("write=%v: %+v %v", write, o, err)
		}
		if names, _ := os.ReadDir(scratch); len(names) != 0 {
			t.Fatalf("the empty cache holds %v", names)
		}
		if _, err := o.Release(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Clear("p1", 1); err != ErrCacheBusy {
		t.Fatalf("clear while held: %v", err)
	}
	if _, err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := c.Clear("p1", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(c.Root, "p1", "data")); !os.IsNotExist(err) {
		t.Fatalf("cleared data: %v", err)
	}
}

// A cache of an older generation (cleared since, on another worker) is
// erased when a run acquires it; a copy of it is empty.
func TestCacheOfAnOlderGenerationIsErased(t *testing.T) {
	c := newCaches(t, 0)
	l, _ := c.Acquire("p1", 0, true, "")
	os.WriteFile(filepath.Join(l.Cache.Dir, "old"), []byte("x"), 0o644)
	l.Release()
	f, err := c.Acquire("p1", 2, false, filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	if names, _ := os.ReadDir(f.Cache.Dir); len(names) != 0 {
		t.Fatalf("a copy of a cleared cache holds %v", names)
	}
	f.Release()
	l, err = c.Acquire("p1", 2, true, "")
	if err != nil || !l.Cleared {
		t.Fatalf("%+v %v", l, err)
	}
	if names, _ := os.ReadDir(l.Cache.Dir); len(names) != 0 {
		t.Fatalf("a cleared cache holds %v", names)
	}
	l.Release()
	if l, _ = c.Acquire("p1", 2, true, ""); l.Cleared {
		t.Fatal("erased twice")
	}
	l.Release()
}

// The bound removes whole top-level entries, least recently used first,
// until the cache fits; an entry used lately stays.
func TestCacheBoundRemovesLeastRecentlyUsed(t *testing.T) {
	dir := t.TempDir()
	write := func(entry string, kib int, age time.Duration) {
		p := filepath.Join(dir, entry, "sub")
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(p, "blob")
		if err := os.WriteFile(f, make([]byte, kib<<10), 0o444); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, 0o555) // as Go's module cache leaves its files
		at := time.Now().Add(-age)
		for _, q := range []string{f, p, filepath.Join(dir, entry)} {
			if err := os.Chtimes(q, at, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("go-mod", 400, 72*time.Hour)
	write("npm", 400, time.Hour)
	write("pip", 400, 48*time.Hour)
	u, err := bound(dir, 900<<10)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(u.Removed, ",") != "go-mod" || u.Bytes > 900<<10 || u.Bytes < 800<<10 {
		t.Fatalf("usage %+v", u)
	}
	u, err = bound(dir, 100<<10)
	if err != nil || strings.Join(u.Removed, ",") != "pip,npm" || u.Bytes != 0 {
		t.Fatalf("usage %+v %v", u, err)
	}
}

// Removing a cache (its project is gone) takes the cache's lock: a run
// still holding it keeps it until the next prune.
func TestCacheRemoveTakesTheLock(t *testing.T) {
	t.Parallel()
	c := newCaches(t, 0)
	l, err := c.Acquire("gone", 0, true, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Remove("gone"); !errors.Is(err, ErrCacheBusy) {
		t.Fatalf("remove under a run: %v", err)
	}
	if _, err := os.Stat(l.Cache.Dir); err != nil {
		t.Fatalf("the cache went under its run: %v", err)
	}
	if _, err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove("gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(c.Root, "gone")); !os.IsNotExist(err) {
		t.Fatalf("still there: %v", err)
	}
}

// A project's repair runs have a cache of their own.
func TestCacheScopes(t *testing.T) {
	t.Parallel()
	if CacheScope("p", false) == CacheScope("p", true) || CacheProject(CacheScope("p", true)) != "p" || CacheProject("p") != "p" {
		t.Fatal("scopes")
	}
}

// removeAll's way through a tree a run left unreadable never follows a
// symbolic link: a link to a directory outside keeps its target's modes.
func TestRemoveAllNeverFollowsALink(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	if err := os.Chmod(outside, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(outside, 0o700)
	dir := filepath.Join(t.TempDir(), "tree")
	if err := os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "a", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "a"), 0); err != nil {
		t.Fatal(err)
	}
	if err := ownerAccess(dir); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(outside); err != nil || fi.Mode().Perm() != 0o500 {
		t.Fatalf("the link's target was changed: %v %v", fi.Mode(), err)
	}
	if err := removeAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Fatalf("the link's target went: %v", err)
	}
}
