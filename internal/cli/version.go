package cli

import (
	"context"
	"flag"
	"fmt"
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

func init() {
	register(&command{name: "version", summary: "print the version, then the Go toolchain and platform",
		setup: func(*flag.FlagSet, *Config) func(context.Context, *invocation) error { return cmdVersion }})
}

// cmdVersion is `anvil version`: the version alone on the first line (for
// scripts), then the toolchain and platform.
func cmdVersion(_ context.Context, x *invocation) error {
	fmt.Fprintln(x.stdout, Version())
	fmt.Fprintf(x.stdout, "%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
