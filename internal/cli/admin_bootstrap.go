package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
)

func init() {
	register(&command{name: "admin bootstrap", usage: "--org SLUG --email EMAIL [--password-file F] [--env-file FILE]",
		summary: "create an organisation, its owner and an API token",
		about: "Prints {\"org_id\", \"user_id\", \"token\"} as one JSON object. Without --password-file the\n" +
			"password is read from the first line of standard input.",
		setup: func(fs *flag.FlagSet, _ *Config) func(context.Context, *invocation) error {
			org := fs.String("org", "", "organisation slug (^[a-z0-9][a-z0-9-]{0,62}$)")
			email := fs.String("email", "", "the owner's email")
			pwFile := fs.String("password-file", "", "file whose first line is the owner's password (else standard input)")
			envFile := envFileFlag(fs)
			return func(ctx context.Context, x *invocation) error {
				cfg, cerr := reloadConfig(*envFile, x.cfg, x.cerr)
				if *org == "" || *email == "" {
					return fmt.Errorf("%w: --org and --email are required", errUsage)
				}
				if cerr != nil {
					return cerr
				}
				if err := cfg.validate(true); err != nil {
					return err
				}
				pw, err := readPassword(*pwFile)
				if err != nil {
					return err
				}
				a, err := newApp(ctx, cfg, x.stderr, false)
				if err != nil {
					return err
				}
				defer a.close()
				res, err := a.Accounts.Bootstrap(ctx, *org, *email, pw)
				if err != nil {
					return err
				}
				return json.NewEncoder(x.stdout).Encode(res)
			}
		}})
}
