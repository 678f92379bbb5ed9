package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// cmdPurgeUser is `anvil admin purge-user --email E` (docs/erasure.md).
func cmdPurgeUser(ctx context.Context, cfg *Config, cerr error, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("purge-user", "anvil admin purge-user --email EMAIL\n\nRemoves a person: their memberships, sessions, personal API tokens, password resets,\n"+
		"the invitations addressed to them and the pending ones they sent, and their account.\n"+
		"The audit log keeps their entries under a pseudonym (user-<hash>). The last owner of an\n"+
		"organisation is refused: make someone else its owner, or delete it, first.", stdout)
	email := fs.String("email", "", "the person's email")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *email == "" {
		return fmt.Errorf("%w: --email is required", errUsage)
	}
	a, err := adminApp(ctx, cfg, cerr, stderr)
	if err != nil {
		return err
	}
	defer a.close()
	rep, err := a.Accounts.PurgeUser(ctx, *email)
	if err != nil {
		return err
	}
	orgs := strings.Join(rep.Organizations, ", ")
	if orgs == "" {
		orgs = "none"
	}
	fmt.Fprintf(stdout, "purged %s (now %s in the audit log)\n", *email, rep.Pseudonym)
	fmt.Fprintf(stdout, "  memberships:      %d (%s)\n", len(rep.Organizations), orgs)
	fmt.Fprintf(stdout, "  sessions:         %d\n", rep.Sessions)
	fmt.Fprintf(stdout, "  api tokens:       %d\n", rep.APITokens)
	fmt.Fprintf(stdout, "  invitations:      %d\n", rep.Invitations)
	fmt.Fprintf(stdout, "  password resets:  %d\n", rep.PasswordResets)
	fmt.Fprintf(stdout, "  audit entries:    %d pseudonymised\n", rep.AuditEntries)
	return nil
}
