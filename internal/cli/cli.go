// Package cli is the anvil command: one binary that serves the web tier, runs
// the River workers that execute runs in sandboxes, migrates its database and
// bootstraps organisations. main.go at the module's root only calls [Main].
//
//	anvil serve   [--addr 127.0.0.1:8080] [--role all|web|worker]
//	anvil worker
//	anvil migrate
//	anvil admin bootstrap --org SLUG --email EMAIL [--password-file F]
//	anvil admin rotate-key
//	anvil admin forget-secrets --key-id ID --yes
//	anvil admin reset-password --email EMAIL
//	anvil admin retention --now
//	anvil admin purge-user --email EMAIL
//	anvil admin check [--role all|web|worker]
//	anvil admin backup FILE
//	anvil admin restore [--force] FILE
//	anvil version
//	anvil dev     (what `make run` starts: a local database, a key, a demo owner)
//	anvil dev --reset   (what `make clean-demo` runs: all of that removed)
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"anvil/jobs"
	"anvil/jobs/sandbox"
)

const usage = `anvil — a self-hostable cockpit for software teams

Usage:
  anvil serve   [--addr ADDR] [--role all|web|worker]   serve the cockpit (applies migrations first)
  anvil worker  [--addr ADDR]                          run the River workers (= serve --role worker)
  anvil migrate                                        apply database migrations, then exit
  anvil admin bootstrap --org SLUG --email EMAIL [--password-file F]
                                                       create an organisation, its owner and an API token
  anvil admin rotate-key                               re-encrypt every stored secret under ANVIL_SECRET_KEY
  anvil admin forget-secrets --key-id ID --yes         erase the stored secrets of a key lost for good (audited), so that serve starts
  anvil admin reset-password --email EMAIL             end the user's sessions, API tokens and password; print a one-time reset link
  anvil admin retention --now                          run one retention clean-up at once and print what it removed
  anvil admin purge-user --email EMAIL                 remove a person, their access and invitations; the audit keeps a pseudonym
  anvil admin check [--role all|web|worker]            tell what is wrong with the configuration before starting (exit 1 if anything)
  anvil admin backup FILE                              write the database (pg_dump), the key and a manifest into one archive (0600)
  anvil admin restore [--force] FILE                   restore such an archive into an empty database and put its key in place
  anvil version                                        print the version
  anvil dev                                            local development: own Postgres, key and demo login
  anvil dev --reset                                    remove what anvil dev made: its database, key and login (make clean-demo)

Configuration is read from the environment (ANVIL_DATABASE_URL, ANVIL_SECRET_KEY,
ANVIL_ADDR, ANVIL_PUBLIC_URL, ANVIL_FEED_ARMED, …; see README.md); flags override it.
Run "anvil COMMAND --help" for a command's flags.
`

// Main runs the command line and returns the process's exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	return run(args, stdout, stderr)
}

// run is main without the exit, so that tests can drive the command line.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var err error
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "serve":
		err = cmdServe(ctx, args[1:], "", stdout, stderr)
	case "worker":
		err = cmdServe(ctx, args[1:], "worker", stdout, stderr)
	case "migrate":
		err = cmdMigrate(ctx, args[1:], stderr)
	case "admin":
		err = cmdAdmin(ctx, args[1:], stdout, stderr)
	case "dev":
		err = cmdDev(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		err = cmdVersion(args[1:], stdout)
	case sandbox.BridgeCommand:
		// Hidden: the network bridge a sandbox runs first (docs/network.md).
		return sandbox.BridgeMain(args[1:])
	default:
		fmt.Fprintf(stderr, "anvil: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case isConfigError(err) || errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "anvil: %v\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "anvil: %v\n", err)
		return 1
	}
}

var errUsage = errors.New("usage")

func newFlags(name, synopsis string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "Usage: %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments: %s", errUsage, strings.Join(fs.Args(), " "))
	}
	return nil
}

func cmdServe(ctx context.Context, args []string, forceRole string, stdout, stderr io.Writer) error {
	cfg, cerr := loadConfig(os.Getenv)
	name, synopsis := "serve", "anvil serve [--addr ADDR] [--role all|web|worker]"
	if forceRole == "worker" {
		name, synopsis = "worker", "anvil worker [--addr ADDR]   (serves only /healthz, /readyz and /metrics)"
	}
	fs := newFlags(name, synopsis, stdout)
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "listen address (ANVIL_ADDR)")
	if forceRole == "" {
		fs.StringVar(&cfg.Role, "role", cfg.Role, "all: web tier and workers; web: web tier only; worker: workers only")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	if forceRole != "" {
		cfg.Role = forceRole
	}
	if err := cfg.validate(true); err != nil {
		return err
	}
	return serve(ctx, cfg, stderr)
}

func cmdMigrate(ctx context.Context, args []string, stderr io.Writer) error {
	cfg, cerr := loadConfig(os.Getenv)
	fs := newFlags("migrate", "anvil migrate   (applies River's and anvil's migrations, then exits)", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	if err := cfg.validate(false); err != nil {
		return err
	}
	d, err := openDB(ctx, cfg)
	if err != nil {
		return err
	}
	defer d.Close()
	return migrateDB(ctx, d, newLogger(cfg, stderr))
}

func cmdAdmin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, "Usage:\n  anvil admin bootstrap --org SLUG --email EMAIL [--password-file F]\n  anvil admin rotate-key\n  anvil admin forget-secrets --key-id ID --yes\n  anvil admin reset-password --email EMAIL\n  anvil admin retention --now\n  anvil admin purge-user --email EMAIL\n  anvil admin check [--role all|web|worker]\n  anvil admin backup FILE\n  anvil admin restore [--force] FILE\n")
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	cfg, cerr := loadConfig(os.Getenv)
	switch args[0] {
	case "bootstrap":
		fs := newFlags("bootstrap", "anvil admin bootstrap --org SLUG --email EMAIL [--password-file F]\n\nCreates the organisation, its owner and a personal API token and prints\n{\"org_id\", \"user_id\", \"token\"} as one JSON object. Without --password-file the\npassword is read from the first line of standard input.", stdout)
		org := fs.String("org", "", "organisation slug (^[a-z0-9][a-z0-9-]{0,62}$)")
		email := fs.String("email", "", "the owner's email")
		pwFile := fs.String("password-file", "", "file whose first line is the owner's password (else standard input)")
		envFile := envFileFlag(fs)
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		cfg, cerr = reloadConfig(*envFile, cfg, cerr)
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
		a, err := newApp(ctx, cfg, stderr, false)
		if err != nil {
			return err
		}
		defer a.close()
		res, err := a.Accounts.Bootstrap(ctx, *org, *email, pw)
		if err != nil {
			return err
		}
		return json.NewEncoder(stdout).Encode(res)
	case "rotate-key":
		fs := newFlags("rotate-key", "anvil admin rotate-key\n\nRe-encrypts every stored secret (webhook secrets, provider tokens) under\nANVIL_SECRET_KEY; ANVIL_SECRET_KEY_PREVIOUS must hold the key they were sealed with.", stdout)
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		a, err := adminApp(ctx, cfg, cerr, stderr)
		if err != nil {
			return err
		}
		defer a.close()
		n, err := a.Store.RotateSecrets(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "re-encrypted %d secrets under key %s\n", n, a.keys.CurrentID())
		return nil
	case "forget-secrets":
		return cmdForgetSecrets(ctx, cfg, cerr, args[1:], stdout, stderr)
	case "reset-password":
		fs := newFlags("reset-password", "anvil admin reset-password --email EMAIL\n\nStops the user's password, ends every session and revokes every API token of\ntheirs at once, and prints a one-time link (ANVIL_PUBLIC_URL/reset/…, valid for\none hour) on which they set a new one. The link is shown only now; hand it over by any channel.", stdout)
		email := fs.String("email", "", "the user's email")
		if err := parseFlags(fs, args[1:]); err != nil {
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
		r, err := a.Accounts.CreatePasswordReset(ctx, *email)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s/reset/%s\n", cfg.PublicURL, r.Token)
		fmt.Fprintf(stderr, "the link is valid until %s and works once; the old password no longer works\n", r.Expires.UTC().Format(time.RFC3339))
		fmt.Fprintf(stderr, "every session ended and %d API token(s) of theirs were revoked\n", r.TokensRevoked)
		return nil
	case "retention":
		return cmdRetention(ctx, cfg, cerr, args[1:], stdout, stderr)
	case "purge-user":
		return cmdPurgeUser(ctx, cfg, cerr, args[1:], stdout, stderr)
	case "check":
		return cmdCheck(ctx, cfg, cerr, args[1:], stdout)
	case "backup":
		return cmdBackup(ctx, cfg, cerr, args[1:], stdout, stderr)
	case "restore":
		return cmdRestore(ctx, cfg, cerr, args[1:], stdout, stderr)
	}
	return fmt.Errorf("%w: unknown admin command %q", errUsage, args[0])
}

// cmdRetention is "anvil admin retention --now": one clean-up of every
// organisation at once (docs/retention.md), in this process, printing what
// it removed per project and in all.
func cmdRetention(ctx context.Context, cfg *Config, cerr error, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("retention", "anvil admin retention --now\n\nRuns one retention clean-up of every organisation at once (the periodic job's\nwork, in the same bounded batches) and prints what it removed.", stdout)
	now := fs.Bool("now", false, "run the clean-up now (required)")
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if !*now {
		return fmt.Errorf("%w: --now is required (the clean-up otherwise runs every %s in the workers)", errUsage, jobs.RetentionCleanupEvery)
	}
	a, err := adminApp(ctx, cfg, cerr, stderr)
	if err != nil {
		return err
	}
	defer a.close()
	rep, err := a.Services.Retention.Cleanup(ctx)
	if *asJSON {
		if jerr := json.NewEncoder(stdout).Encode(rep); jerr != nil {
			return jerr
		}
		return err
	}
	for _, sc := range rep.Scopes {
		name := sc.OrgSlug
		if sc.ProjectSlug != "" {
			name += "/" + sc.ProjectSlug
		}
		fmt.Fprintf(stdout, "%s: %s\n", name, sc.Removed)
	}
	fmt.Fprintf(stdout, "removed in all: %s (%s)\n", rep.Total, time.Since(rep.Started).Round(time.Millisecond))
	return err
}

func readPassword(file string) (string, error) {
	var b []byte
	var err error
	if file != "" {
		b, err = os.ReadFile(file)
	} else {
		b, err = io.ReadAll(io.LimitReader(os.Stdin, 4096))
	}
	if err != nil {
		return "", fmt.Errorf("read password: %w", err)
	}
	pw, _, _ := strings.Cut(string(b), "\n")
	pw = strings.TrimRight(pw, "\r")
	if pw == "" {
		return "", fmt.Errorf("%w: the password is empty (give --password-file or pipe it on standard input)", errUsage)
	}
	return pw, nil
}

// adminApp opens the app for an admin command: the configuration must have
// loaded (cerr) and be complete, and no worker starts.
func adminApp(ctx context.Context, cfg *Config, cerr error, stderr io.Writer) (*app, error) {
	if cerr != nil {
		return nil, cerr
	}
	if err := cfg.validate(true); err != nil {
		return nil, err
	}
	return newApp(ctx, cfg, stderr, false)
}
