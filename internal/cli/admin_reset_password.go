package cli

import (
	"context"
	"flag"
	"fmt"
	"time"
)

func init() {
	register(&command{name: "admin reset-password", usage: "--email EMAIL",
		summary: "end the user's sessions, API tokens and password; print a one-time reset link",
		about: "Stops the user's password, ends every session and revokes every API token of theirs at\n" +
			"once, and prints a one-time link (ANVIL_PUBLIC_URL/reset/…, valid for one hour) on which\n" +
			"they set a new one. The link is shown only now; hand it over by any channel. With\n" +
			"ANVIL_SMTP_URL it is mailed to them too (docs/mail.md).",
		setup: func(fs *flag.FlagSet, _ *Config) func(context.Context, *invocation) error {
			email := fs.String("email", "", "the user's email")
			return func(ctx context.Context, x *invocation) error {
				if *email == "" {
					return fmt.Errorf("%w: --email is required", errUsage)
				}
				return resetPassword(ctx, x, *email)
			}
		}})
}

func resetPassword(ctx context.Context, x *invocation, email string) error {
	a, err := adminApp(ctx, x.cfg, x.cerr, x.stderr)
	if err != nil {
		return err
	}
	defer a.close()
	r, err := a.Accounts.CreatePasswordReset(ctx, email)
	if err != nil {
		return err
	}
	link := x.cfg.PublicURL + "/reset/" + r.Token
	fmt.Fprintln(x.stdout, link)
	fmt.Fprintf(x.stderr, "the link is valid until %s and works once; the old password no longer works\n", r.Expires.UTC().Format(time.RFC3339))
	fmt.Fprintf(x.stderr, "every session ended and %d API token(s) of theirs were revoked\n", r.TokensRevoked)
	if a.Accounts.Mail != nil {
		// Mailed too when the server has SMTP (docs/mail.md); the link
		// above stays the operator's to hand over if the mail fails.
		if reply, err := a.Accounts.MailPasswordReset(ctx, email, link, r.Expires); err != nil {
			fmt.Fprintf(x.stderr, "the link was NOT mailed (%v); hand it over yourself\n", err)
		} else {
			fmt.Fprintf(x.stderr, "the link was mailed to %s (the server said: %s)\n", email, reply.Text)
		}
	}
	return nil
}
