package cli

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"anvil/jobs/sandbox"
)

func init() {
	register(&command{name: "dev", usage: "[--addr ADDR] [--dir .anvil] [--database anvil_demo] [--reset]",
		summary: "local development (what `make run` starts): own Postgres, key and demo login",
		about: "Uses ANVIL_DATABASE_URL when set; otherwise the local Postgres on 127.0.0.1:5432 when one\n" +
			"answers (creating its database), otherwise a cluster of its own in DIR/pg. It creates\n" +
			"DIR/secret.key once, arms the feed, allows local checkouts and private addresses for\n" +
			"alerts and runs, bootstraps a demo owner on the first start and prints the URL and the login.",
		setup: func(fs *flag.FlagSet, _ *Config) func(context.Context, *invocation) error {
			addr := fs.String("addr", envOr("ANVIL_ADDR", "127.0.0.1:8080"), "listen address")
			dir := fs.String("dir", ".anvil", "folder for the key, the demo password and the local cluster")
			dbName := fs.String("database", DemoDatabase, "the demo's database on the local Postgres (or its own cluster)")
			reset := fs.Bool("reset", false, "remove the demo instead: its database, then the folder with its key and login (make clean-demo)")
			return func(ctx context.Context, x *invocation) error {
				return cmdDev(ctx, *addr, *dir, *dbName, *reset, x.stdout, x.stderr)
			}
		}})
}

// cmdDev is what `make run` starts: the cockpit on an embedded default.
// It uses ANVIL_DATABASE_URL when set; otherwise the local Postgres on
// 127.0.0.1:5432 when one answers (creating database DemoDatabase); otherwise a
// cluster of its own in .anvil/pg. It creates .anvil/secret.key once, arms
// the feed, bootstraps a demo owner on the first start and prints the URL
// and the login.
func cmdDev(ctx context.Context, addr, dir, dbName string, reset bool, stdout, stderr io.Writer) error {
	if reset {
		return devReset(ctx, dir, dbName, stdout, stderr)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if os.Getenv("ANVIL_DATABASE_URL") == "" {
		url, err := devDatabase(ctx, dir, dbName, stderr)
		if err != nil {
			return err
		}
		os.Setenv("ANVIL_DATABASE_URL", url)
	}
	if os.Getenv("ANVIL_SECRET_KEY") == "" {
		key, err := devSecret(filepath.Join(dir, "secret.key"))
		if err != nil {
			return err
		}
		os.Setenv("ANVIL_SECRET_KEY", key)
	}
	if os.Getenv("ANVIL_FEED_ARMED") == "" {
		os.Setenv("ANVIL_FEED_ARMED", "true")
	}
	if os.Getenv("ANVIL_SANDBOX") == "" {
		devSandbox(ctx, stderr)
	}
	if os.Getenv("ANVIL_CHECKOUT_ALLOW_LOCAL") == "" {
		// The local demo checks out repositories of this machine.
		os.Setenv("ANVIL_CHECKOUT_ALLOW_LOCAL", "true")
	}
	if os.Getenv("ANVIL_ALERTS_ALLOW_PRIVATE") == "" {
		// The local demo's alert destinations are on this machine too
		// (a webhook receiver on localhost), as its checkouts are.
		os.Setenv("ANVIL_ALERTS_ALLOW_PRIVATE", "true")
	}
	if os.Getenv("ANVIL_RUNS_ALLOW_PRIVATE") == "" {
		// And so are what its runs reach: a registry mirror, a model
		// gateway on the host (docs/network.md). The banner says so.
		os.Setenv("ANVIL_RUNS_ALLOW_PRIVATE", "true")
	}
	if os.Getenv("ANVIL_RUNS_ALLOW_LOOPBACK") == "" {
		// The host's own loopback is a switch of its own
		// (docs/network.md): the demo's model gateway listens there.
		os.Setenv("ANVIL_RUNS_ALLOW_LOOPBACK", "true")
	}
	if os.Getenv("ANVIL_DATA_DIR") == "" {
		// The demo's runs' caches, which `make clean-demo` removes with
		// the rest of its folder.
		data, err := filepath.Abs(filepath.Join(dir, "data"))
		if err != nil {
			return err
		}
		os.Setenv("ANVIL_DATA_DIR", data)
	}
	os.Setenv("ANVIL_ADDR", addr)
	cfg, err := loadConfig(os.Getenv)
	if err != nil {
		return err
	}
	if err := cfg.validate(true); err != nil {
		return err
	}

	a, err := newApp(ctx, cfg, io.Discard, false)
	if err != nil {
		return err
	}
	if err := migrateDB(ctx, a.db, a.log); err != nil {
		a.close()
		return err
	}
	pwFile := filepath.Join(dir, "demo-password")
	email := "demo@anvil.local"
	has, err := a.Accounts.HasUsers(ctx)
	if err != nil {
		a.close()
		return err
	}
	if !has {
		pw := base64.RawURLEncoding.EncodeToString(randomBytes(12))
		// The owner and a login, no API token: nobody would ever see it. A
		// token is made in Settings, where it is shown once.
		if _, err := a.Accounts.BootstrapOwner(ctx, "demo", email, pw); err != nil {
			a.close()
			return fmt.Errorf("bootstrap demo owner: %w", err)
		}
		if err := os.WriteFile(pwFile, []byte(pw+"\n"), 0o600); err != nil {
			a.close()
			return err
		}
	}
	a.close()
	login := "(the account you created; the demo password file is missing)"
	if b, err := os.ReadFile(pwFile); err == nil {
		login = fmt.Sprintf("%s / %s", email, strings.TrimSpace(string(b)))
	}
	// The login is printed once the cockpit serves, after the start-up's
	// log lines, so that it is the last thing the terminal shows; requests
	// are logged at debug (ANVIL_LOG_LEVEL=debug shows them).
	hint := "This is the demo of `make run`: `make clean-demo` resets it for real (its database, key and login)"
	return serveWith(ctx, cfg, stderr, serveExtras{requestLogLevel: slog.LevelDebug, keyHint: hint, serving: func() {
		fmt.Fprintf(stdout, "\n  anvil is serving on %s\n  log in as %s\n  feed armed: %v · database: %s\n%s\n",
			cfg.PublicURL, login, cfg.FeedArmed, redactURL(cfg.DatabaseURL), devAllowances(cfg))
	}})
}

// devAllowances says which of the demo's switches are on: a local demo
// reaches this machine and its network, which a server must not.
func devAllowances(cfg *Config) string {
	var on []string
	if cfg.CheckoutAllowLocal {
		on = append(on, "checkouts of local repositories (ANVIL_CHECKOUT_ALLOW_LOCAL)")
	}
	if cfg.AlertsAllowPrivate {
		on = append(on, "alerts to private addresses (ANVIL_ALERTS_ALLOW_PRIVATE)")
	}
	if cfg.RunsAllowPrivate {
		on = append(on, "runs' network lists reaching private and reserved addresses (ANVIL_RUNS_ALLOW_PRIVATE)")
	}
	if cfg.RunsAllowLoopback {
		on = append(on, "runs' network lists reaching this machine's loopback, such as a model API on this host (ANVIL_RUNS_ALLOW_LOOPBACK)")
	}
	if len(on) == 0 {
		return ""
	}
	return "  allowed for this local demo, not for a server: " + strings.Join(on, "; ") + "\n"
}

// DemoDatabase is the demo's database: never "anvil", the name the
// install steps give a service's database, so that a demo and a service on
// one machine's Postgres never share one (README, "Install as a service").
const DemoDatabase = "anvil_demo"

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return b
}

func redactURL(u string) string {
	if i := strings.Index(u, "@"); i > 0 {
		if j := strings.Index(u, "://"); j > 0 && j < i {
			if k := strings.Index(u[j+3:i], ":"); k >= 0 {
				return u[:j+3+k] + ":xxxxx" + u[i:]
			}
		}
	}
	return u
}

// devSecret reads the key file, creating it once.
func devSecret(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	key := base64.StdEncoding.EncodeToString(randomBytes(32))
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return "", err
	}
	return key, nil
}

// devLocalAdmin is the local Postgres the demo's database ([DemoDatabase])
// lives on when one answers.
const (
	devLocalAdmin  = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	devClusterPort = "54329"
	// devMarker is the comment on a database `anvil dev` created: the reset
	// drops only a database that carries it (or the demo's login), never an
	// installation's database of the same name.
	devMarker = "created by anvil dev (make run); make clean-demo drops it"
)

// devDatabase finds or makes a Postgres for local use.
func devDatabase(ctx context.Context, dir, name string, log io.Writer) (string, error) {
	if url, err := ensureDatabase(ctx, devLocalAdmin, name); err == nil {
		return url, nil
	}
	return ownCluster(ctx, dir, name, log)
}

// ensureDatabase creates database name on the server of admin when missing,
// marked as the demo's.
func ensureDatabase(ctx context.Context, admin, name string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, admin)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(cctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", err
	}
	if !exists {
		if _, err := conn.Exec(cctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return "", err
		}
		if _, err := conn.Exec(cctx, "COMMENT ON DATABASE "+pgx.Identifier{name}.Sanitize()+" IS '"+devMarker+"'"); err != nil {
			return "", err
		}
	}
	return strings.Replace(admin, "/postgres?", "/"+name+"?", 1), nil
}

// ownCluster starts (creating it once) a cluster in dir/pg on port 54329,
// installing Postgres with apt when initdb is missing.
func ownCluster(ctx context.Context, dir, name string, log io.Writer) (string, error) {
	bin, err := findPGBin()
	if err != nil {
		fmt.Fprintln(log, "anvil dev: no Postgres found; installing it with apt-get (needs root)")
		for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "postgresql"}} {
			cmd := exec.CommandContext(ctx, "apt-get", args...)
			cmd.Stdout, cmd.Stderr = log, log
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			if err := cmd.Run(); err != nil {
				return "", fmt.Errorf("install postgresql: %w", err)
			}
		}
		if bin, err = findPGBin(); err != nil {
			return "", err
		}
	}
	data, _ := filepath.Abs(filepath.Join(dir, "pg"))
	port := devClusterPort
	// Postgres refuses to run as root: run it as the postgres user then.
	var asUser []string
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			return "", errors.New("running as root, but there is no postgres user to run the cluster as")
		}
		asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	runPG := func(name string, args ...string) error {
		full := append(append(append([]string{}, asUser...), filepath.Join(bin, name)), args...)
		cmd := exec.CommandContext(ctx, full[0], full[1:]...)
		cmd.Stdout, cmd.Stderr = log, log
		return cmd.Run()
	}
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		if err := os.MkdirAll(data, 0o700); err != nil {
			return "", err
		}
		if asUser != nil {
			_ = exec.Command("chown", "-R", "postgres:postgres", data).Run()
			_ = os.Chmod(filepath.Dir(data), 0o755)
		}
		if err := runPG("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"); err != nil {
			return "", fmt.Errorf("initdb: %w", err)
		}
	}
	url := "postgres://postgres@127.0.0.1:" + port + "/postgres?sslmode=disable"
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, 300*time.Millisecond); err == nil {
		c.Close()
	} else if err := runPG("pg_ctl", "-D", data, "-l", filepath.Join(data, "server.log"), "-w", "-o", "-p "+port+" -k "+data+" -h 127.0.0.1", "start"); err != nil {
		return "", fmt.Errorf("start the local cluster: %w", err)
	}
	return ensureDatabase(ctx, url, name)
}

func findPGBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("pg_ctl"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) > 0 {
		return filepath.Dir(matches[len(matches)-1]), nil
	}
	return "", errors.New("initdb not found")
}

// devSandbox makes sure runs can be sandboxed on a development machine:
// it installs bubblewrap with apt when it is missing (as root), and where
// bubblewrap still cannot run (a container without user namespaces) it
// says so loudly and runs commands unsandboxed, as ANVIL_SANDBOX=process.
func devSandbox(ctx context.Context, log io.Writer) {
	if sandbox.BwrapAvailable() == nil {
		return
	}
	if _, err := exec.LookPath("bwrap"); err != nil && os.Geteuid() == 0 {
		fmt.Fprintln(log, "anvil dev: installing bubblewrap with apt-get for sandboxed runs")
		for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "bubblewrap"}} {
			cmd := exec.CommandContext(ctx, "apt-get", args...)
			cmd.Stdout, cmd.Stderr = log, log
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			_ = cmd.Run()
		}
		if sandbox.BwrapAvailable() == nil {
			return
		}
	}
	fmt.Fprintln(log, "anvil dev: WARNING: bubblewrap cannot run here; runs execute WITHOUT a sandbox (ANVIL_SANDBOX=process)")
	os.Setenv("ANVIL_SANDBOX", "process")
}
