// Package cli is the anvil command: one binary that serves the web tier, runs
// the River workers that execute runs in sandboxes, migrates its database and
// bootstraps organisations. main.go at the module's root only calls [Main].
//
// Each subcommand is one file (serve.go, worker.go, migrate.go, dev.go,
// version.go, admin_*.go) holding its usage, its flags and its work, and
// registered in [commands]; `anvil help` lists every one of them with its
// flags, from the same declarations that parse them.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"anvil/jobs/sandbox"
)

// command is one subcommand: how it is typed, what it does, its flags and
// its work. setup declares the flags on fs (binding some into cfg, the
// configuration read from the environment) and returns the work, which
// runs once the flags are parsed; `anvil help` calls setup only to list
// the flags.
type command struct {
	name    string // "serve", "admin bootstrap"
	usage   string // the synopsis after "anvil NAME": "--org SLUG --email EMAIL [--password-file F]"
	summary string // one line for `anvil help`
	about   string // the paragraph of `anvil NAME --help`
	// file is the positional argument's name ("FILE": exactly one), ""
	// for none.
	file  string
	setup func(fs *flag.FlagSet, cfg *Config) func(context.Context, *invocation) error
}

// invocation is what a command's work gets: the configuration as read
// from the environment and overridden by its flags (cerr: why it did not
// load), the positional argument, and where to write.
type invocation struct {
	cfg            *Config
	cerr           error
	file           string
	stdout, stderr io.Writer
}

// commands is every subcommand, in the order `anvil help` lists them. It
// is filled by an init of each command's file, so that one file holds all
// of a command.
var commands []*command

func register(c *command) { commands = append(commands, c) }

// order is how `anvil help` sorts them: the services, then the operator's
// commands, then development.
var order = []string{"serve", "worker", "migrate", "admin bootstrap", "admin check", "admin rotate-key", "admin forget-secrets", "admin reset-password",
	"admin retention", "admin purge-user", "admin backup", "admin restore", "version", "dev"}

func rank(name string) int {
	for i, n := range order {
		if n == name {
			return i
		}
	}
	return len(order)
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// Main runs the command line and returns the process's exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	return run(args, stdout, stderr)
}

// run is main without the exit, so that tests can drive the command line.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		writeUsage(stderr, "", false)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var err error
	switch name := args[0]; {
	case name == "-h" || name == "--help" || name == "help":
		err = cmdHelp(args[1:], stdout)
	case name == "--version":
		err = execute(ctx, lookup("version"), nil, stdout, stderr)
	case name == sandbox.BridgeCommand:
		// Hidden: the network bridge a sandbox runs first (docs/network.md).
		return sandbox.BridgeMain(args[1:])
	case name == "admin" && (len(args) == 1 || args[1] == "-h" || args[1] == "--help" || args[1] == "help"):
		out := stdout
		if len(args) == 1 {
			out = stderr
			err = errUsagePrinted
		}
		writeUsage(out, "admin ", true)
	case name == "admin":
		c := lookup("admin " + args[1])
		if c == nil {
			err = fmt.Errorf("%w: unknown admin command %q (anvil admin --help lists them)", errUsage, args[1])
			break
		}
		err = execute(ctx, c, args[2:], stdout, stderr)
	default:
		c := lookup(name)
		if c == nil {
			fmt.Fprintf(stderr, "anvil: unknown command %q\n\n", name)
			writeUsage(stderr, "", false)
			return 2
		}
		err = execute(ctx, c, args[1:], stdout, stderr)
	}
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case isConfigError(err) || errors.Is(err, errUsage):
		if !errors.Is(err, errUsagePrinted) {
			fmt.Fprintf(stderr, "anvil: %v\n", err)
		}
		return 2
	default:
		fmt.Fprintf(stderr, "anvil: %v\n", err)
		return 1
	}
}

// execute reads the configuration, parses the command's flags over it and
// does its work.
func execute(ctx context.Context, c *command, args []string, stdout, stderr io.Writer) error {
	cfg, cerr := loadConfig(os.Getenv)
	fs := newFlags(c, stdout)
	work := c.setup(fs, cfg)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	x := &invocation{cfg: cfg, cerr: cerr, stdout: stdout, stderr: stderr}
	switch {
	case c.file != "" && (fs.NArg() != 1 || fs.Arg(0) == ""):
		return fmt.Errorf("%w: give exactly one %s", errUsage, c.file)
	case c.file != "":
		x.file = fs.Arg(0)
	case fs.NArg() > 0:
		return fmt.Errorf("%w: unexpected arguments: %s", errUsage, strings.Join(fs.Args(), " "))
	}
	return work(ctx, x)
}

var errUsage = errors.New("usage")

// errUsagePrinted is a usage error whose usage was printed already.
var errUsagePrinted = fmt.Errorf("%w: printed", errUsage)

// newFlags is a command's flag set; --help prints its usage, its paragraph
// and its flags.
func newFlags(c *command, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "Usage: anvil %s\n\n%s\n", strings.TrimSpace(c.name+" "+c.usage), c.summary)
		if c.about != "" {
			fmt.Fprintf(stdout, "\n%s\n", c.about)
		}
		if hasFlags(fs) {
			fmt.Fprint(stdout, "\nFlags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// flagsOf declares c's flags on a throwaway set, for the listing.
func flagsOf(c *command) *flag.FlagSet {
	cfg, _ := loadConfig(func(string) string { return "" })
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	c.setup(fs, cfg)
	return fs
}

func sorted() []*command {
	out := append([]*command(nil), commands...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && rank(out[j].name) < rank(out[j-1].name); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// writeUsage lists the commands whose name starts with prefix, each with
// its synopsis and summary, and with withFlags each flag too.
func writeUsage(w io.Writer, prefix string, withFlags bool) {
	if prefix == "" {
		fmt.Fprint(w, "anvil — a self-hostable cockpit for software teams\n\nUsage: anvil COMMAND [flags]\n\nCommands:\n")
	} else {
		fmt.Fprintf(w, "Usage: anvil %sCOMMAND [flags]\n\nCommands:\n", prefix)
	}
	for _, c := range sorted() {
		if !strings.HasPrefix(c.name, prefix) {
			continue
		}
		fmt.Fprintf(w, "  anvil %s\n      %s\n", strings.TrimSpace(c.name+" "+c.usage), c.summary)
		if !withFlags {
			continue
		}
		flagsOf(c).VisitAll(func(f *flag.Flag) {
			name, use := flag.UnquoteUsage(f)
			line := "--" + f.Name
			if name != "" {
				line += " " + name
			}
			if f.DefValue != "" && f.DefValue != "false" {
				use += fmt.Sprintf(" (default %q)", f.DefValue)
			}
			fmt.Fprintf(w, "        %-24s %s\n", line, use)
		})
	}
	if prefix == "" {
		fmt.Fprint(w, "\nConfiguration is read from the environment (ANVIL_DATABASE_URL, ANVIL_SECRET_KEY,\n"+
			"ANVIL_ADDR, ANVIL_PUBLIC_URL, ANVIL_FEED_ARMED, …; see README.md); flags override it.\n"+
			"Run \"anvil help\" for every command's flags, \"anvil COMMAND --help\" for one command.\n")
	}
}

// cmdHelp is `anvil help [COMMAND…]`: every command with its flags, or
// one command's help.
func cmdHelp(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		writeUsage(stdout, "", true)
		return nil
	}
	c := lookup(strings.Join(args, " "))
	if c == nil {
		return fmt.Errorf("%w: no command %q (anvil help lists them)", errUsage, strings.Join(args, " "))
	}
	fs := newFlags(c, stdout)
	c.setup(fs, flagsOfConfig())
	fs.Usage()
	return nil
}

func flagsOfConfig() *Config {
	cfg, _ := loadConfig(func(string) string { return "" })
	return cfg
}
