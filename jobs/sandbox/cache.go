package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A project's cache (docs/caches.md) is a directory a worker keeps between
// runs, one per project, under [Caches.Root]:
//
//	<root>/<project id>/lock        flock(2): exclusive for the run that writes, shared for a copy
//	<root>/<project id>/generation  the clear count the data belongs to
//	<root>/<project id>/data/       bound at /cache inside the sandbox
//
// A run of the project's own code gets data/ itself, under the exclusive
// lock for its whole length; a run of a fork's code gets a throw-away copy
// taken under the shared lock, so nothing it writes reaches the next run
// (the rule GitHub Actions keeps against cache poisoning). A run that finds
// the lock taken does not wait: it gets an empty throw-away cache and its
// log says why. After a writing run the directory is brought under the
// bound, least recently used top-level entry first.
//
// A project has two caches, two scopes ([CacheScope]): its runs' and its
// repair runs' (<root>/<project id>.repair). A repair run holds the
// secrets scoped to repairs and reaches the repair network list: it never
// reads what an ordinary run left, nor leaves anything an ordinary run
// reads.

// CacheMount is where a run sees its cache inside the bwrap sandbox.
const CacheMount = "/cache"

// CacheDirs are the conventional variables that point each tool's cache into
// the run's cache, each to an entry of its own: an entry is what the bound
// removes as a whole, so one tool's cache never loses half its files.
var CacheDirs = map[string]string{
	"npm_config_cache": "npm",
	"PIP_CACHE_DIR":    "pip",
	"GOMODCACHE":       "go-mod",
	"GOCACHE":          "go-build",
	"CARGO_HOME":       "cargo",
	"BUNDLE_PATH":      "bundle",
	"XDG_CACHE_HOME":   "xdg",
}

// toolHomeKeep names, per entry, what of it is cache: everything else
// there is a tool's home — CARGO_HOME's config.toml, credentials.toml and
// bin/ (what `cargo install` put there) — and is removed before a cache
// is kept or copied, so no run plants configuration or executables that
// a later run (or a fork's copy) would pick up, nor leaves a credential
// a fork's copy would read (docs/caches.md, "What a cache holds").
var toolHomeKeep = map[string][]string{
	"cargo": {"registry", "git"},
}

// toolHomeDrop names, per entry, what is removed from it: npm's _npx holds
// the packages `npx` installed, executables included.
var toolHomeDrop = map[string][]string{
	"npm": {"_npx"},
}

// stripToolHomes removes from the cache at dir what toolHomeKeep and
// toolHomeDrop say is not cache.
func stripToolHomes(dir string) error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for entry, names := range toolHomeKeep {
		d := filepath.Join(dir, entry)
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() {
			if err == nil {
				keep(removeAll(d)) // a link or a file where the tool's directory goes
			}
			continue
		}
		_ = ownerAccess(d)
		list, err := os.ReadDir(d)
		keep(err)
		for _, e := range list {
			if !slices.Contains(names, e.Name()) || !e.IsDir() {
				keep(removeAll(filepath.Join(d, e.Name())))
			}
		}
	}
	for entry, names := range toolHomeDrop {
		for _, n := range names {
			keep(removeAll(filepath.Join(dir, entry, n)))
		}
	}
	return first
}

// RepairScope is the suffix of a project's repair runs' cache.
const RepairScope = ".repair"

// CacheScope names the cache a run of project uses: the project's own, or
// its repair runs' when repair.
func CacheScope(project string, repair bool) string {
	if repair {
		return project + RepairScope
	}
	return project
}

// CacheProject is the project a cache scope belongs to.
func CacheProject(scope string) string { return strings.TrimSuffix(scope, RepairScope) }

// CacheEnv returns the conventional variables for a cache seen at root.
func CacheEnv(root string) map[string]string {
	env := make(map[string]string, len(CacheDirs))
	for k, sub := range CacheDirs {
		env[k] = root + "/" + sub
	}
	return env
}

// Cache is a run's cache directory, set on a [Spec]; nil: none.
type Cache struct {
	// Dir is the directory on the host, writable by the sandbox's uid. The
	// bwrap executor binds it at [CacheMount]; the process executor points
	// the variables at Dir itself.
	Dir string
}

// validate checks a cache before a sandbox is started.
func (c *Cache) validate() error {
	if c == nil {
		return nil
	}
	if !filepath.IsAbs(c.Dir) {
		return fmt.Errorf("sandbox: cache %q is not an absolute path", c.Dir)
	}
	if fi, err := os.Stat(c.Dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("sandbox: cache %q is not a directory", c.Dir)
	}
	return nil
}

// withCache returns env with the cache's variables under it: a variable the
// run sets itself (a secret named GOCACHE) wins, and leaves the rest alone.
func withCache(env map[string]string, c *Cache, root string) map[string]string {
	if c == nil {
		return env
	}
	out := CacheEnv(root)
	for k, v := range env {
		out[k] = v
	}
	return out
}

// bwrapArgs binds the cache at CacheMount.
func (c *Cache) bwrapArgs() []string {
	if c == nil {
		return nil
	}
	return []string{"--bind", c.Dir, CacheMount}
}

// Caches keeps the per-project caches of a worker.
type Caches struct {
	// Root holds one directory per project; it is shared by the worker
	// processes of a host, which the lock keeps apart.
	Root string
	// MaxBytes bounds each project's cache (disk use, after a run).
	MaxBytes int64
}

// Cache modes: how a run uses its project's cache.
const (
	CacheWrite = "write" // the project's own cache, kept after the run
	CacheCopy  = "copy"  // a throw-away copy of it (a fork's code)
	CacheEmpty = "empty" // an empty throw-away cache (the lock was taken)
)

// Lease is one run's use of a project's cache.
type Lease struct {
	// Cache goes on the run's Spec.
	Cache *Cache
	// Mode is CacheWrite, CacheCopy or CacheEmpty.
	Mode string
	// Cleared reports that the data was erased at acquire, because the
	// project's cache was cleared since it was written.
	Cleared bool
	// CopyFailed is why a fork's copy could not be taken (Mode is then
	// CacheEmpty): the run goes on with an empty cache rather than fail.
	CopyFailed error

	c       *Caches
	project string
	lock    *os.File
	scratch string // the throw-away directory, removed at Release
}

// Usage is what a writing run left in the cache.
type Usage struct {
	// Bytes is the cache's disk use after the bound was applied.
	Bytes int64
	// Removed names the entries the bound removed, least recently used
	// first.
	Removed []string
}

// ErrCacheBusy is returned by [Caches.Clear] while a run holds the cache.
var ErrCacheBusy = errors.New("sandbox: the cache is in use by a run")

// dir is the project's directory.
func (c *Caches) dir(project string) (string, error) {
	if project == "" || strings.ContainsAny(project, "/\\") || project == "." || project == ".." {
		return "", fmt.Errorf("sandbox: invalid cache name %q", project)
	}
	return filepath.Join(c.Root, project), nil
}

// Acquire prepares project's cache for one run (project is a
// [CacheScope]). generation is how many
// times the project's cache was cleared: data of an older generation is
// erased first (a clear that reached another worker, or this one while it
// was down). write is false for a fork's code, which gets a copy. scratch
// is where a throw-away cache may go (a path beside the workspace, not yet
// existing). Call Release once the run's processes are gone.
func (c *Caches) Acquire(project string, generation int64, write bool, scratch string) (*Lease, error) {
	dir, err := c.dir(project)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.Root, 0o711); err != nil {
		return nil, fmt.Errorf("sandbox: cache root: %w", err)
	}
	if err := os.Mkdir(dir, 0o711); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("sandbox: cache: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sandbox: cache lock: %w", err)
	}
	l := &Lease{c: c, project: project}
	how := syscall.LOCK_EX
	if !write {
		how = syscall.LOCK_SH
	}
	if err := syscall.Flock(int(lock.Fd()), how|syscall.LOCK_NB); err != nil {
		lock.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("sandbox: cache lock: %w", err)
		}
		l.Mode = CacheEmpty
		return l, l.makeScratch(scratch, "")
	}
	data := filepath.Join(dir, "data")
	stale := readGeneration(dir) < generation
	if write {
		l.lock = lock
		if stale {
			if err := removeAll(data); err != nil {
				l.unlock()
				return nil, err
			}
			if err := writeGeneration(dir, generation); err != nil {
				l.unlock()
				return nil, err
			}
			l.Cleared = true
		}
		if err := ownedDir(data); err != nil {
			l.unlock()
			return nil, err
		}
		// What a killed worker left unstripped is stripped before a run
		// reads it.
		_ = stripToolHomes(data)
		l.Mode, l.Cache = CacheWrite, &Cache{Dir: data}
		return l, nil
	}
	// A copy, taken under the shared lock, which is released at once: the
	// copy is the run's own.
	defer func() {
		_ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
		lock.Close()
	}()
	l.Mode = CacheCopy
	if stale {
		data = ""
	} else if _, err := os.Stat(data); err != nil {
		data = ""
	}
	if err := l.makeScratch(scratch, data); err != nil {
		if data == "" {
			return nil, err
		}
		// A cache that cannot be copied (a file its owner cannot read,
		// left by a worker killed before it set the modes right) costs
		// the run its cache, never the run.
		l.Mode, l.CopyFailed = CacheEmpty, err
		if err := l.makeScratch(scratch, ""); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Empty gives a run an empty throw-away cache at scratch (a path beside
// the workspace, not yet existing), kept by no scope. Release removes it.
func (c *Caches) Empty(scratch string) (*Lease, error) {
	l := &Lease{c: c, Mode: CacheEmpty}
	return l, l.makeScratch(scratch, "")
}

// makeScratch creates the throw-away cache at path, a copy of from (or empty).
func (l *Lease) makeScratch(path, from string) error {
	if err := ownedDir(path); err != nil {
		return err
	}
	l.scratch, l.Cache = path, &Cache{Dir: path}
	if from == "" {
		return nil
	}
	// cp -a keeps modes and, when anvil runs as root, the sandbox uid as
	// owner; --reflink=auto makes the copy nearly free where the file
	// system shares blocks (btrfs, XFS).
	out, err := exec.Command("cp", "-a", "--reflink=auto", from+"/.", path).CombinedOutput()
	if err != nil {
		_ = removeAll(path)
		l.scratch, l.Cache = "", nil
		msg := strings.TrimSpace(string(out))
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		return fmt.Errorf("sandbox: copy the cache: %w: %s", err, msg)
	}
	return stripToolHomes(path)
}

// Release ends the lease: a writing run's cache gets its owner's access
// back on everything (a `chmod 000` must hide nothing from the bound, nor
// make the next fork's copy fail), loses what is a tool's home rather
// than a cache, and is brought under the bound and measured (its Usage);
// a throw-away cache is removed. The lock goes last.
func (l *Lease) Release() (Usage, error) {
	if l.scratch != "" {
		return Usage{}, removeAll(l.scratch)
	}
	if l.lock == nil {
		return Usage{}, nil
	}
	defer l.unlock()
	_ = ownerAccess(l.Cache.Dir)
	if err := stripToolHomes(l.Cache.Dir); err != nil {
		return Usage{}, err
	}
	return bound(l.Cache.Dir, l.c.MaxBytes)
}

func (l *Lease) unlock() {
	_ = syscall.Flock(int(l.lock.Fd()), syscall.LOCK_UN)
	l.lock.Close()
	l.lock = nil
}

// Clear erases project's cache on this worker and records generation, so a
// later Acquire of an older generation erases nothing again. ErrCacheBusy
// while a run holds it (that run's next Acquire sees the generation).
func (c *Caches) Clear(project string, generation int64) error {
	dir, err := c.dir(project)
	if err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // no cache here
	}
	if err != nil {
		return fmt.Errorf("sandbox: cache lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return ErrCacheBusy
		}
		return fmt.Errorf("sandbox: cache lock: %w", err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	if readGeneration(dir) >= generation {
		return nil
	}
	if err := removeAll(filepath.Join(dir, "data")); err != nil {
		return err
	}
	return writeGeneration(dir, generation)
}

// Remove deletes a cache scope's whole directory (its project is gone),
// under its exclusive lock: ErrCacheBusy while a run still holds it (the
// next prune tries again). A directory without a lock file (a worker
// killed while it made it) goes without one.
func (c *Caches) Remove(project string) error {
	dir, err := c.dir(project)
	if err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|syscall.O_NOFOLLOW, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return removeAll(dir)
	case err != nil:
		return fmt.Errorf("sandbox: cache lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return ErrCacheBusy
		}
		return fmt.Errorf("sandbox: cache lock: %w", err)
	}
	// Unlocked by the kernel when lock is closed, after the removal.
	return removeAll(dir)
}

// Projects lists the projects that have a cache on this worker.
func (c *Caches) Projects() ([]string, error) {
	entries, err := os.ReadDir(c.Root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox: caches: %w", err)
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

func readGeneration(dir string) int64 {
	b, err := os.ReadFile(filepath.Join(dir, "generation"))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

func writeGeneration(dir string, g int64) error {
	tmp := filepath.Join(dir, "generation.tmp")
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(g, 10)+"\n"), 0o600); err != nil {
		return fmt.Errorf("sandbox: cache generation: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "generation")); err != nil {
		return fmt.Errorf("sandbox: cache generation: %w", err)
	}
	return nil
}

// ownedDir makes dir (mode 0700) for the sandbox's uid.
func ownedDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("sandbox: cache: %w", err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, SandboxUID, SandboxGID); err != nil {
			return fmt.Errorf("sandbox: cache: %w", err)
		}
	}
	return nil
}

// entry is a top-level entry of a cache: its disk use and the last time
// any file below it was read or written.
type entry struct {
	name  string
	bytes int64
	used  time.Time
	// unread: part of it could not be read, so bytes may be short of its
	// disk use; such an entry is removed rather than kept unmeasured.
	unread bool
}

// bound removes the least recently used top-level entries of dir until its
// disk use is at most max (0: no bound) and returns what is left. An entry's
// last use is the newest access or modification time of a file below it, or
// modification time of a directory (the kernel's relatime updates a file's
// access time at least once a day when it is read).
func bound(dir string, max int64) (Usage, error) {
	names, err := os.ReadDir(dir)
	if err != nil {
		return Usage{}, fmt.Errorf("sandbox: cache: %w", err)
	}
	var entries []entry
	var total int64
	for _, n := range names {
		e := measure(filepath.Join(dir, n.Name()))
		e.name = n.Name()
		entries = append(entries, e)
		total += e.bytes
	}
	u := Usage{Bytes: total}
	// What could not be read could be any size: it goes first.
	kept := entries[:0]
	for _, e := range entries {
		if !e.unread {
			kept = append(kept, e)
			continue
		}
		if err := removeAll(filepath.Join(dir, e.name)); err != nil {
			return u, err
		}
		u.Bytes -= e.bytes
		u.Removed = append(u.Removed, e.name)
	}
	entries = kept
	if max <= 0 || u.Bytes <= max {
		return u, nil
	}
	sort.Slice(entries, func(i, j int) bool {
		if !entries[i].used.Equal(entries[j].used) {
			return entries[i].used.Before(entries[j].used)
		}
		return entries[i].name < entries[j].name
	})
	for _, e := range entries {
		if u.Bytes <= max {
			break
		}
		if err := removeAll(filepath.Join(dir, e.name)); err != nil {
			return u, err
		}
		u.Bytes -= e.bytes
		u.Removed = append(u.Removed, e.name)
	}
	return u, nil
}

// measure sums the disk use below p (never following symlinks) and finds
// its last use.
func measure(p string) entry {
	var e entry
	_ = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			e.unread = true
			return nil
		}
		var st syscall.Stat_t
		if syscall.Lstat(path, &st) != nil {
			return nil
		}
		e.bytes += st.Blocks * 512
		times := []syscall.Timespec{st.Atim, st.Mtim}
		if d.IsDir() {
			// Listing a directory (this walk itself) updates its access
			// time: only a change of its entries counts as a use.
			times = times[1:]
		}
		for _, t := range times {
			if ts := time.Unix(t.Unix()); ts.After(e.used) {
				e.used = ts
			}
		}
		return nil
	})
	return e
}
