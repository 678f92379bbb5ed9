package cli

import (
	"context"
	"flag"
)

func init() {
	register(&command{name: "migrate", summary: "apply database migrations, then exit",
		about: "Applies River's and anvil's migrations. serve applies them too; run this to migrate\nbefore starting several processes.",
		setup: func(*flag.FlagSet, *Config) func(context.Context, *invocation) error { return cmdMigrate }})
}

func cmdMigrate(ctx context.Context, x *invocation) error {
	if x.cerr != nil {
		return x.cerr
	}
	if err := x.cfg.validate(false); err != nil {
		return err
	}
	d, err := openDB(ctx, x.cfg)
	if err != nil {
		return err
	}
	defer d.Close()
	return migrateDB(ctx, d, newLogger(x.cfg, x.stderr))
}
