// Package packaging builds anvil's packages — the .deb with its systemd
// units, and the OCI image — from one commit, reproducibly: the version
// comes from git, every timestamp from the commit (SOURCE_DATE_EPOCH), the
// binary is static and built with -trimpath and no build id, so two builds
// of one commit are the same bytes (docs/install.md, "Packages").
//
// It lives under internal/ because the repository's top level is fixed and
// this is the project's own tooling, not a capability of the product: Go
// code (`go run ./internal/packaging/cmd/mkpkg`, which `make package`
// calls) beside its data — deb/ holds nfpm's configuration, the two units,
// the environment file, the sysusers entry and the maintainer scripts. Its
// tests (build tag `package`, `make test-package`) install the .deb into a
// fresh Debian root and unpack the image; nothing of the product imports
// it.
package packaging

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Info is what a build is named and dated by.
type Info struct {
	// Version is a Debian version (see [DebianVersion]).
	Version string
	// Commit is the full commit id, Time its commit time (every timestamp
	// in the packages).
	Commit string
	Time   time.Time
	// Dirty reports uncommitted changes: such a build is not reproducible.
	Dirty bool
}

// DebianRevision is the Debian revision of every package: anvil's own
// version is the upstream one, and the packaging in deb/ is its first
// (and only) Debian revision. A non-native package keeps its Debian
// changelog as changelog.Debian.gz, as lintian expects.
const DebianRevision = "1"

// PackageVersion is the .deb's version: Version and the Debian revision.
func (i Info) PackageVersion() string { return i.Version + "-" + DebianRevision }

// Tag is Version as an image tag ([A-Za-z0-9_.-]): "~" and "+" become "-".
func (i Info) Tag() string {
	return strings.NewReplacer("~", "-", "+", "-").Replace(i.Version)
}

// git runs git in dir and returns its trimmed output.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// Describe reads the version of the checkout at dir from git.
func Describe(ctx context.Context, dir string) (Info, error) {
	desc, err := git(ctx, dir, "describe", "--tags", "--long", "--always", "--dirty", "--match", "v[0-9]*")
	if err != nil {
		return Info{}, err
	}
	commit, err := git(ctx, dir, "rev-parse", "HEAD")
	if err != nil {
		return Info{}, err
	}
	ct, err := git(ctx, dir, "log", "-1", "--format=%ct", "HEAD")
	if err != nil {
		return Info{}, err
	}
	sec, err := strconv.ParseInt(ct, 10, 64)
	if err != nil {
		return Info{}, fmt.Errorf("commit time %q: %w", ct, err)
	}
	t := time.Unix(sec, 0).UTC()
	v, dirty, err := DebianVersion(desc, t)
	if err != nil {
		return Info{}, err
	}
	return Info{Version: v, Commit: commit, Time: t, Dirty: dirty}, nil
}

var (
	describeRE = regexp.MustCompile(`^v?([0-9]+(?:\.[0-9]+)*)(?:-([0-9A-Za-z.]+(?:[-.][0-9A-Za-z]+)*))?-([0-9]+)-g([0-9a-f]+)$`)
	shaRE      = regexp.MustCompile(`^[0-9a-f]{4,}$`)
	debianRE   = regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*$`)
)

// DebianVersion turns `git describe --tags --long --always --dirty` output
// into a Debian version that sorts the way the history goes:
//
//	v1.4.0-0-gabc1234            1.4.0
//	v1.4.0-rc.1-0-gabc1234       1.4.0~rc.1                        (before 1.4.0)
//	v1.4.0-3-gabc1234            1.4.0+git20261204093000.3.abc1234 (after 1.4.0, before 1.4.1)
//	abc1234 (no tag yet)         0.0.0~git20261204093000.abc1234
//
// The commit time (UTC, to the second) orders untagged builds, which the
// abbreviated commit id alone would not; "+dirty" marks uncommitted changes.
func DebianVersion(describe string, commitTime time.Time) (version string, dirty bool, err error) {
	d := strings.TrimSpace(describe)
	if s, ok := strings.CutSuffix(d, "-dirty"); ok {
		d, dirty = s, true
	}
	stamp := commitTime.UTC().Format("20060102150405")
	switch m := describeRE.FindStringSubmatch(d); {
	case m != nil:
		version = m[1]
		if m[2] != "" {
			version += "~" + strings.ReplaceAll(m[2], "-", ".")
		}
		if m[3] != "0" {
			version += fmt.Sprintf("+git%s.%s.%s", stamp, m[3], m[4])
		}
	case shaRE.MatchString(d):
		version = fmt.Sprintf("0.0.0~git%s.%s", stamp, d)
	default:
		return "", false, fmt.Errorf("packaging: cannot make a version of git describe's %q", describe)
	}
	if dirty {
		version += "+dirty"
	}
	if !debianRE.MatchString(version) {
		return "", false, fmt.Errorf("packaging: %q is not a Debian version", version)
	}
	return version, dirty, nil
}

// GoEnv is the environment of a reproducible static build for goarch.
func GoEnv(goarch string, t time.Time) []string {
	return append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch,
		"SOURCE_DATE_EPOCH="+strconv.FormatInt(t.Unix(), 10))
}

// BuildBinary builds the anvil binary of the checkout at dir into out:
// static (CGO_ENABLED=0), -trimpath, without a build id, with the version
// linked in (`anvil version` prints it).
func BuildBinary(ctx context.Context, dir, out, goarch string, info Info) error {
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -buildid= -X anvil/internal/cli.version="+info.Version, "-o", abs, ".")
	cmd.Dir = dir
	cmd.Env = GoEnv(goarch, info.Time)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	return nil
}

// Maintainer is the .deb's Maintainer field unless ANVIL_MAINTAINER says
// otherwise: a package built from a checkout has no maintainer address
// (lintian's bogus-mail-host; docs/install.md, "lintian").
const Maintainer = "anvil <anvil@localhost>"

// Deb packages binary as dist/anvil_<version>-<revision>_<arch>.deb with
// nfpm (the Go tool pinned in go.mod) and the configuration in deb/, run
// from the repository at repo; it returns the package's path. The doc
// folder gets a machine-readable copyright file and a Debian changelog,
// both made here from the commit and the binary (reproducibly).
func Deb(ctx context.Context, repo, binary, outDir, goarch string, info Info) (string, error) {
	abs, err := filepath.Abs(binary)
	if err != nil {
		return "", err
	}
	target, err := filepath.Abs(filepath.Join(outDir, fmt.Sprintf("anvil_%s_%s.deb", info.PackageVersion(), goarch)))
	if err != nil {
		return "", err
	}
	maintainer := os.Getenv("ANVIL_MAINTAINER")
	if maintainer == "" {
		maintainer = Maintainer
	}
	docs, err := os.MkdirTemp("", "anvil-deb-docs-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(docs)
	copyright, err := Copyright(abs, info)
	if err != nil {
		return "", err
	}
	changelog, err := ChangelogGz(info, maintainer)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(docs, "copyright"), copyright, 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(docs, "changelog.Debian.gz"), changelog, 0o644); err != nil {
		return "", err
	}
	os.Remove(target)
	cmd := exec.CommandContext(ctx, "go", "tool", "nfpm", "package", "--config", "internal/packaging/deb/nfpm.yaml",
		"--packager", "deb", "--target", target)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "ANVIL_VERSION="+info.Version, "ANVIL_RELEASE="+DebianRevision, "ANVIL_ARCH="+goarch, "ANVIL_BINARY="+abs,
		"ANVIL_DOCS="+docs, "ANVIL_MAINTAINER="+maintainer, "SOURCE_DATE_EPOCH="+strconv.FormatInt(info.Time.Unix(), 10))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("nfpm: %w\n%s", err, out)
	}
	return target, nil
}
