//go:build package

package packaging

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDebLooksLikeADebianPackage: the doc folder has a machine-readable
// copyright file and a Debian changelog whose entry is this version, and
// lintian finds no error and no warning but the exceptions the package
// names in its overrides (docs/install.md, "lintian").
func TestDebLooksLikeADebianPackage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run(t, "dpkg-deb", "-x", built.deb, dir)
	copyright, err := os.ReadFile(filepath.Join(dir, "usr/share/doc/anvil/copyright"))
	if err != nil || !strings.HasPrefix(string(copyright), "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n") ||
		!strings.Contains(string(copyright), "github.com/jackc/pgx/v5 ") {
		t.Errorf("copyright: %v\n%s", err, copyright)
	}
	gz, err := os.ReadFile(filepath.Join(dir, "usr/share/doc/anvil/changelog.Debian.gz"))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	changelog, _ := io.ReadAll(zr)
	if !strings.HasPrefix(string(changelog), "anvil ("+built.info.PackageVersion()+") unstable; urgency=medium\n") || !strings.Contains(string(changelog), built.info.Commit) {
		t.Errorf("changelog.Debian.gz:\n%s", changelog)
	}
	if _, err := exec.LookPath("lintian"); err != nil {
		t.Skip("lintian is not installed (apt-get install lintian)")
	}
	cmd := exec.Command("lintian", "--fail-on", "error,warning", built.deb)
	out, err := cmd.CombinedOutput()
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "E: ") || strings.HasPrefix(l, "W: ") {
			t.Errorf("lintian: %s", l)
		}
	}
	if err != nil && !t.Failed() {
		t.Errorf("lintian: %v\n%s", err, out)
	}
}
