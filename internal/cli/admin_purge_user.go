package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"
)

func init() {
	register(&command{name: "admin purge-user", usage: "--email EMAIL",
		summary: "remove a person, their access and invitations; the audit keeps a pseudonym",
		about: "Removes a person: their memberships, sessions, personal API tokens, password resets, the\n" +
			"invitations addressed to them and the pending ones they sent, and their account. The audit\n" +
			"log keeps their entries under a pseudonym (user-<hash>). The last owner of an organisation\n" +
			"is refused: make someone else its owner, or delete it, first (docs/erasure.md).",
		setup: func(fs *flag.FlagSet, _ *Config) func(context.Context, *invocation) error {
			email := fs.String("email", "", "the person's email")
			return func(ctx context.Context, x *invocation) error {
				if *email == "" {
					return fmt.Errorf("%w: --email is required", errUsage)
				}
				return purgeUser(ctx, x, *email)
			}
		}})
}

func purgeUser(ctx context.Context, x *invocation, email string) error {
	a, err := adminApp(ctx, x.cfg, x.cerr, x.stderr)
	if err != nil {
		return err
	}
	defer a.close()
	rep, err := a.Accounts.PurgeUser(ctx, email)
	if err != nil {
		return err
	}
	orgs := strings.Join(rep.Organizations, ", ")
	if orgs == "" {
		orgs = "none"
	}
	out := x.stdout
	fmt.Fprintf(out, "purged %s (now %s in the audit log)\n", email, rep.Pseudonym)
	fmt.Fprintf(out, "  memberships:      %d (%s)\n", len(rep.Organizations), orgs)
	fmt.Fprintf(out, "  sessions:         %d\n", rep.Sessions)
	fmt.Fprintf(out, "  api tokens:       %d\n", rep.APITokens)
	fmt.Fprintf(out, "  invitations:      %d\n", rep.Invitations)
	fmt.Fprintf(out, "  password resets:  %d\n", rep.PasswordResets)
	fmt.Fprintf(out, "  audit entries:    %d pseudonymised\n", rep.AuditEntries)
	return nil
}
