package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// nonRootCacheEnv names the folder nonRootCacheMain works in: set, the
// test binary is a non-root worker handling a cache, as the packaged
// worker does (its sandbox runs as its own uid, so what a run leaves is
// the worker's own files, with whatever modes the run gave them).
const nonRootCacheEnv = "ANVIL_TEST_NONROOT_CACHE"

// A non-root worker keeps its caches' bound and trust: a directory a run
// made unreadable (chmod 000) hides nothing from the bound, a file left
// unreadable costs a fork's run its cache and never the run, and what is
// a tool's home (CARGO_HOME's config, credentials and bin/, npx's
// packages) is not kept. Run as uid 65534 when the test runs as root.
func TestCacheAsNonRootWorker(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		if code := nonRootCacheMain(dir); code != 0 {
			t.Fatalf("exit %d", code)
		}
		return
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, SandboxUID, SandboxGID); err != nil {
		t.Fatal(err)
	}
	// Every ancestor must be searchable by the worker's uid.
	for p := filepath.Dir(dir); p != "/"; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s is not searchable by uid %d", p, SandboxUID)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = []string{"PATH=/usr/bin:/bin", nonRootCacheEnv + "=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: SandboxUID, Gid: SandboxGID, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the non-root worker: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("non-root cache: ok")) {
		t.Fatalf("the non-root worker said:\n%s", out)
	}
}

// nonRootCacheMain is the non-root worker's part; 0 when every check held.
func nonRootCacheMain(dir string) int {
	if err := nonRootCache(dir); err != nil {
		fmt.Fprintln(os.Stderr, "non-root cache:", err)
		return 1
	}
	fmt.Println("non-root cache: ok")
	return 0
}

func nonRootCache(dir string) error {
	if os.Geteuid() == 0 {
		return errors.New("running as root")
	}
	c := &Caches{Root: filepath.Join(dir, "caches"), MaxBytes: 1 << 20}
	write := func(path string, size int) error {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		return os.WriteFile(path, bytes.Repeat([]byte{'x'}, size), 0o644)
	}

	// 8 MiB below a directory made unreadable, in a 1 MiB cache.
	l, err := c.Acquire("p", 0, true, "")
	if err != nil {
		return err
	}
	data := l.Cache.Dir
	if err := write(filepath.Join(data, "xdg", "hidden", "blob"), 8<<20); err != nil {
		return err
	}
	if err := write(filepath.Join(data, "pip", "small"), 1000); err != nil {
		return err
	}
	if err := os.Chmod(filepath.Join(data, "xdg", "hidden"), 0); err != nil {
		return err
	}
	if err := os.Chmod(filepath.Join(data, "xdg"), 0); err != nil {
		return err
	}
	u, err := l.Release()
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if u.Bytes > c.MaxBytes || !slices.Contains(u.Removed, "xdg") || slices.Contains(u.Removed, "pip") {
		return fmt.Errorf("a chmod 000 directory hid its bytes from the bound: %+v", u)
	}
	if _, err := os.Lstat(filepath.Join(data, "xdg")); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("xdg is still there: %w", err)
	}

	// Tool homes are not caches.
	l, err = c.Acquire("p", 0, true, "")
	if err != nil {
		return err
	}
	for _, f := range []string{"cargo/config.toml", "cargo/credentials.toml", "cargo/bin/cargo-evil", "cargo/env",
		"cargo/registry/cache/crate.crate", "cargo/git/db/x", "npm/_npx/1234/node_modules/.bin/tool", "npm/_cacache/index"} {
		if err := write(filepath.Join(data, f), 10); err != nil {
			return err
		}
	}
	if _, err := l.Release(); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	for _, f := range []string{"cargo/config.toml", "cargo/credentials.toml", "cargo/bin", "cargo/env", "npm/_npx"} {
		if _, err := os.Lstat(filepath.Join(data, f)); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s is kept in the cache: %w", f, err)
		}
	}
	for _, f := range []string{"cargo/registry/cache/crate.crate", "cargo/git/db/x", "npm/_cacache/index"} {
		if _, err := os.Lstat(filepath.Join(data, f)); err != nil {
			return fmt.Errorf("%s is not kept: %w", f, err)
		}
	}

	// A file left unreadable (a worker killed before it set the modes
	// right): a fork's run gets an empty cache, not a failure.
	if err := write(filepath.Join(data, "go-mod", "locked"), 10); err != nil {
		return err
	}
	if err := os.Chmod(filepath.Join(data, "go-mod", "locked"), 0); err != nil {
		return err
	}
	l, err = c.Acquire("p", 0, false, filepath.Join(dir, "scratch"))
	if err != nil {
		return fmt.Errorf("a fork's run failed on an unreadable file: %w", err)
	}
	if l.Mode != CacheEmpty || l.CopyFailed == nil || !strings.Contains(l.CopyFailed.Error(), "Permission denied") {
		return fmt.Errorf("a fork's run on an unreadable file: mode %s, %w", l.Mode, l.CopyFailed)
	}
	if entries, err := os.ReadDir(l.Cache.Dir); err != nil || len(entries) != 0 {
		return fmt.Errorf("the fork's empty cache: %v %w", entries, err)
	}
	if _, err := l.Release(); err != nil {
		return err
	}
	return nil
}
