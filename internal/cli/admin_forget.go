package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

func init() {
	register(&command{name: "admin forget-secrets", usage: "--key-id ID --yes",
		summary: "erase the stored secrets of a key lost for good (audited), so that serve starts",
		about: "Erases every stored secret sealed under key ID, a key that is lost for good:\n" +
			"provider tokens and browser tokens are cleared; webhooks, run secrets and alert\n" +
			"destinations are deleted (they are nothing without their secret) and must be\n" +
			"made again. Each organisation's audit log records it. anvil serve names the\n" +
			"key id when it refuses to start (docs/install.md, \"A lost key\").",
		setup: func(fs *flag.FlagSet, _ *Config) func(context.Context, *invocation) error {
			keyID := fs.String("key-id", "", "the id of the lost key (8 hexadecimal characters)")
			yes := fs.Bool("yes", false, "erase them (required: this cannot be undone)")
			return func(ctx context.Context, x *invocation) error {
				return cmdForgetSecrets(ctx, x.cfg, x.cerr, *keyID, *yes, x.stdout, x.stderr)
			}
		}})
}

// cmdForgetSecrets is "anvil admin forget-secrets --key-id ID --yes": the
// operator declares a key lost for good, and the secrets sealed under it
// are erased (each organisation's audit says what went), so that serve
// starts again. Without --yes it erases nothing.
func cmdForgetSecrets(ctx context.Context, cfg *Config, cerr error, keyID string, yes bool, stdout, stderr io.Writer) error {
	if keyID == "" {
		return fmt.Errorf("%w: --key-id is required", errUsage)
	}
	if !yes {
		return fmt.Errorf("%w: --yes is required: the secrets sealed under key id %s are erased for good", errUsage, keyID)
	}
	a, err := adminApp(ctx, cfg, cerr, stderr)
	if err != nil {
		return err
	}
	defer a.close()
	counts, err := a.Store.ForgetSecrets(ctx, strings.ToLower(keyID))
	if err != nil {
		return err
	}
	kinds := make([]string, 0, len(counts))
	for k := range counts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	if len(kinds) == 0 {
		fmt.Fprintf(stdout, "no stored secret was sealed under key id %s\n", keyID)
		return nil
	}
	for _, k := range kinds {
		fmt.Fprintf(stdout, "erased %d %s(s)\n", counts[k], k)
	}
	fmt.Fprintf(stdout, "the secrets sealed under key id %s are gone; each organisation's audit log says so\n", keyID)
	return nil
}
