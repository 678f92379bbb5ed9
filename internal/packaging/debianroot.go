package packaging

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// RootPackages is what the package tests' fresh Debian root holds besides
// minbase: the .deb's dependencies, and systemd (for systemd-sysusers and
// systemd-analyze).
const RootPackages = "systemd,passwd,adduser,bubblewrap,git,ca-certificates,util-linux"

// SystemdRootPackages is what the root the units boot in holds besides
// the apt variant: systemd as its init, the .deb's dependencies, Postgres
// for the units to use, curl for the API and dbus for systemctl.
const SystemdRootPackages = "systemd,systemd-sysv,dbus,passwd,adduser,bubblewrap,git,ca-certificates,curl,util-linux,postgresql"

// DebianRoot returns a tarball of a fresh Debian root (bookworm, minbase
// and RootPackages) in cacheDir, made by mmdebstrap when the cached one is
// missing or older than a week. Making it downloads some 60 packages, so
// CI starts it at the beginning, beside the other work (`make
// package-root`), and the package tests find it made (docs/install.md,
// "Tests").
func DebianRoot(ctx context.Context, cacheDir string) (string, error) {
	return debianRoot(ctx, cacheDir, "minbase", RootPackages)
}

// SystemdRoot returns a tarball of a Debian root that boots systemd (apt
// variant and SystemdRootPackages), cached like [DebianRoot]: the test
// that runs both units under a real systemd boots it in systemd-nspawn
// (docs/install.md, "Tests").
func SystemdRoot(ctx context.Context, cacheDir string) (string, error) {
	return debianRoot(ctx, cacheDir, "apt", SystemdRootPackages)
}

func debianRoot(ctx context.Context, cacheDir, variant, packages string) (string, error) {
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", err
	}
	key := "bookworm " + variant + " " + packages
	if variant == "minbase" {
		key = "bookworm minbase " + packages // the name the cache has had
	}
	h := sha256.Sum256([]byte(key))
	tarball := filepath.Join(cacheDir, "debian-bookworm-"+hex.EncodeToString(h[:6])+".tar")
	if fi, err := os.Stat(tarball); err == nil && fi.Mode().IsRegular() && time.Since(fi.ModTime()) < 7*24*time.Hour {
		return tarball, nil
	}
	if err := os.RemoveAll(tarball); err != nil {
		return "", err
	}
	// A .part an interrupted run left behind: mmdebstrap refuses to
	// write over it. The format is named, since mmdebstrap would take a
	// target not ending in .tar for a directory.
	tmp := tarball + ".part"
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, "mmdebstrap", "--quiet", "--format=tar", "--variant="+variant, "--include="+packages, "bookworm", tmp).CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("mmdebstrap: %w\n%s", err, out)
	}
	return tarball, os.Rename(tmp, tarball)
}

// DebianRootCache is where DebianRoot keeps its tarball unless told
// otherwise: ANVIL_PKGTEST_CACHE, else ~/.cache/anvil.
func DebianRootCache() string {
	if dir := os.Getenv("ANVIL_PKGTEST_CACHE"); dir != "" {
		return dir
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "anvil")
}
