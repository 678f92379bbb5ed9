package packaging

import (
	"bytes"
	"compress/gzip"
	"debug/buildinfo"
	"fmt"
	"strings"
)

// Copyright is the package's usr/share/doc/anvil/copyright, in Debian's
// machine-readable format: anvil's own files, and in a comment the Go
// modules linked into binary (read from its build information), each
// under the licence its source carries.
func Copyright(binary string, info Info) ([]byte, error) {
	bi, err := buildinfo.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("packaging: the binary's build information: %w", err)
	}
	var b bytes.Buffer
	b.WriteString("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n")
	b.WriteString("Upstream-Name: anvil\n")
	fmt.Fprintf(&b, "Comment: Built from commit %s.\n", info.Commit)
	b.WriteString(" The binary is static: it links these Go modules, each under the licence\n")
	b.WriteString(" its own source carries:\n")
	for _, d := range bi.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		fmt.Fprintf(&b, "  %s %s\n", m.Path, m.Version)
	}
	b.WriteString("\nFiles: *\n")
	fmt.Fprintf(&b, "Copyright: %d the anvil authors\n", info.Time.UTC().Year())
	b.WriteString("License: anvil\n")
	b.WriteString("\nLicense: anvil\n")
	b.WriteString(" anvil's repository carries no licence file: no licence is granted beyond\n")
	b.WriteString(" what its authors granted to whoever gave you this package.\n")
	return b.Bytes(), nil
}

// ChangelogGz is the package's usr/share/doc/anvil/changelog.Debian.gz:
// one entry for this build, dated by its commit, compressed at gzip's
// best level without a name or a time in the header (reproducible).
func ChangelogGz(info Info, maintainer string) ([]byte, error) {
	var text bytes.Buffer
	fmt.Fprintf(&text, "anvil (%s) unstable; urgency=medium\n\n", info.PackageVersion())
	fmt.Fprintf(&text, "  * Built from commit %s.\n", info.Commit)
	text.WriteString("    What changed is in the repository's history; how to install, upgrade\n")
	text.WriteString("    and remove it is in /usr/share/doc/anvil/install.md.\n\n")
	fmt.Fprintf(&text, " -- %s  %s\n", strings.TrimSpace(maintainer), info.Time.UTC().Format("Mon, 02 Jan 2006 15:04:05 -0700"))
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(text.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
