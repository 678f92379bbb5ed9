package cli

import (
	"context"
	"flag"
)

func init() {
	register(&command{name: "serve", usage: "[--addr ADDR] [--role all|web|worker]",
		summary: "serve the cockpit (applies migrations first)",
		about: "--role all runs the web tier and the workers in one process; web and worker split them\n" +
			"over several processes on one database (docs/architecture.md, \"Processes and roles\").",
		setup: serveSetup("")})
}

// serveSetup is serve's (forceRole "") and worker's flags and work.
func serveSetup(forceRole string) func(fs *flag.FlagSet, cfg *Config) func(context.Context, *invocation) error {
	return func(fs *flag.FlagSet, cfg *Config) func(context.Context, *invocation) error {
		fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "listen address (ANVIL_ADDR)")
		if forceRole == "" {
			fs.StringVar(&cfg.Role, "role", cfg.Role, "all: web tier and workers; web: web tier only; worker: workers only")
		}
		return func(ctx context.Context, x *invocation) error {
			if x.cerr != nil {
				return x.cerr
			}
			if forceRole != "" {
				x.cfg.Role = forceRole
			}
			if err := x.cfg.validate(true); err != nil {
				return err
			}
			return serve(ctx, x.cfg, x.stderr)
		}
	}
}
