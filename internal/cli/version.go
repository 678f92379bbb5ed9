package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is the package version, set at link time by `make package`
// (-ldflags "-X anvil/internal/cli.version=…", see internal/packaging): a Debian version
// made from `git describe`. A plain `go build` leaves it empty and
// [Version] falls back to the commit the toolchain recorded.
var version string

// Version is what `anvil version` prints and backups record: the linked-in
// package version, else "devel+<commit>" from the build's VCS stamp (with
// "+dirty" for a tree with changes), else "devel".
func Version() string {
	if version != "" {
		return version
	}
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			v += "+" + rev + dirty
		}
	}
	return v
}

// cmdVersion is `anvil version`: the version alone on the first line (for
// scripts), then the toolchain and platform.
func cmdVersion(args []string, stdout io.Writer) error {
	fs := newFlags("version", "anvil version   (prints the version, then the Go toolchain and platform)", stdout)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(stdout, Version())
	fmt.Fprintf(stdout, "%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
