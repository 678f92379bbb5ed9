package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// NewWorkspace makes a fresh private directory under root (created 0711 if
// missing) and returns it with a cleanup func that removes it completely.
//
// The directory is mode 0700; when the host process is root it is owned by
// SandboxUID/SandboxGID so that the sandboxed command can write it, and
// NewWorkspace checks that every ancestor directory can be traversed by that
// uid (bwrap, running as it, must reach the directory to bind it).
//
// cleanup removes the tree even when the command left read-only files and
// directories behind. Call it only after Run has returned.
func NewWorkspace(root string) (dir string, cleanup func() error, err error) {
	if root == "" {
		return "", nil, errors.New("sandbox: empty workspace root")
	}
	root, err = filepath.Abs(root)
	if err != nil {
		return "", nil, fmt.Errorf("sandbox: workspace root: %w", err)
	}
	if err := os.MkdirAll(root, 0o711); err != nil {
		return "", nil, fmt.Errorf("sandbox: workspace root: %w", err)
	}
	if os.Geteuid() == 0 {
		if err := checkTraversable(root); err != nil {
			return "", nil, err
		}
	}
	dir, err = os.MkdirTemp(root, "ws-")
	if err != nil {
		return "", nil, fmt.Errorf("sandbox: workspace: %w", err)
	}
	cleanup = func() error { return removeAll(dir) }
	if err := os.Chmod(dir, 0o700); err != nil {
		_ = cleanup()
		return "", nil, fmt.Errorf("sandbox: workspace: %w", err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, SandboxUID, SandboxGID); err != nil {
			_ = cleanup()
			return "", nil, fmt.Errorf("sandbox: workspace: %w", err)
		}
	}
	return dir, cleanup, nil
}

// checkTraversable reports an error when SandboxUID cannot search dir and
// every one of its ancestors.
func checkTraversable(dir string) error {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("sandbox: workspace root: %w", err)
	}
	for p := real; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("sandbox: workspace root: %w", err)
		}
		mode := fi.Mode().Perm()
		ok := mode&0o001 != 0
		if st, isSys := fi.Sys().(*syscall.Stat_t); isSys {
			switch {
			case st.Uid == SandboxUID:
				ok = mode&0o100 != 0
			case st.Gid == SandboxGID:
				ok = mode&0o010 != 0
			}
		}
		if !ok {
			return fmt.Errorf("sandbox: workspace root %s: uid %d cannot traverse %s (mode %v); make it o+x", dir, SandboxUID, p, mode)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// removeAll removes dir and everything below it. When a plain os.RemoveAll
// fails (directories without write or search permission when not root),
// it gives the owner back access to the whole tree, never following a
// symbolic link (ownerAccess), and tries again.
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = ownerAccess(dir)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("sandbox: removing %s: %w", dir, err)
	}
	return nil
}

// RemoveAll removes dir and everything below it, whatever modes a run
// left in it, never following a symbolic link out of it.
func RemoveAll(dir string) error { return removeAll(dir) }
