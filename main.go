// Command anvil is the cockpit: one binary that serves the web tier, runs the
// River workers that execute runs in sandboxes, migrates its database and
// bootstraps organisations. Its subcommands live in internal/cli.
package main

import (
	"os"

	"anvil/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
