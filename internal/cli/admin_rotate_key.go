package cli

import (
	"context"
	"flag"
	"fmt"
)

func init() {
	register(&command{name: "admin rotate-key", summary: "re-encrypt every stored secret under ANVIL_SECRET_KEY",
		about: "Re-encrypts every stored secret (webhook secrets, provider tokens, …) under ANVIL_SECRET_KEY;\n" +
			"ANVIL_SECRET_KEY_PREVIOUS must hold the key they were sealed with.",
		setup: func(*flag.FlagSet, *Config) func(context.Context, *invocation) error { return cmdRotateKey }})
}

func cmdRotateKey(ctx context.Context, x *invocation) error {
	a, err := adminApp(ctx, x.cfg, x.cerr, x.stderr)
	if err != nil {
		return err
	}
	defer a.close()
	n, err := a.Store.RotateSecrets(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(x.stdout, "re-encrypted %d secrets under key %s\n", n, a.keys.CurrentID())
	return nil
}
