package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"anvil/db"
	"anvil/domain"
	"anvil/domain/repourl"
	"anvil/domain/secret"
	"anvil/internal/envfile"
	"anvil/jobs/sandbox"
)

// envFileFlag adds --env-file to an admin command: the configuration is
// then read from that file (systemd's EnvironmentFile= syntax) over the
// environment, so that an operator runs the command with exactly the
// service's settings (docs/install.md).
func envFileFlag(fs *flag.FlagSet) *string {
	return fs.String("env-file", "", "read the configuration from this file (as the service does: /etc/anvil/anvil.env) over the environment")
}

// reloadConfig re-reads the configuration from file when one was given.
func reloadConfig(file string, cfg *Config, cerr error) (*Config, error) {
	if file == "" {
		return cfg, cerr
	}
	vars, err := envfile.Read(file)
	if err != nil {
		return nil, &configError{msgs: []string{"--env-file: " + err.Error()}}
	}
	return loadConfig(envfile.Getenv(vars, os.Getenv))
}

// checker collects the verdicts of `anvil admin check`, one line each.
type checker struct {
	out    io.Writer
	failed int
}

func (c *checker) line(verdict, topic, format string, args ...any) {
	fmt.Fprintf(c.out, "%-4s  %-10s  %s\n", verdict, topic, fmt.Sprintf(format, args...))
}
func (c *checker) ok(topic, format string, args ...any) { c.line("ok", topic, format, args...) }
func (c *checker) warn(topic, format string, args ...any) {
	c.line("warn", topic, format, args...)
}
func (c *checker) fail(topic, format string, args ...any) {
	c.failed++
	c.line("FAIL", topic, format, args...)
}

// errChecksFailed makes `anvil admin check` exit 1 once it has said why.
var errChecksFailed = errors.New("the configuration has problems (the FAIL lines above)")

// cmdCheck is `anvil admin check`: what is wrong with this configuration,
// in words, before anything starts — the settings, the database (reachable,
// its version, its schema, whether anvil may create tables), the key
// (present, valid, the one the database's secrets were sealed with),
// bubblewrap, the public URL and what it implies, the work folder, the
// listen address, pg_dump for backups. Exit 0 when nothing failed
// (warnings allowed), 1 otherwise.
func init() {
	register(&command{name: "admin check", usage: "[--role all|web|worker] [--env-file FILE]",
		summary: "tell what is wrong with the configuration before starting (exit 1 if anything)",
		about: "Checks the configuration before starting and says what is wrong, one line per item\n" +
			"(ok, warn, FAIL). Run it as the service's user to see what the service will see:\n" +
			"  sudo -u anvil anvil admin check --env-file /etc/anvil/anvil.env\n" +
			"Exit status 0 when nothing failed, 1 otherwise.",
		setup: func(fs *flag.FlagSet, _ *Config) func(context.Context, *invocation) error {
			role := fs.String("role", "all", "the role to check for: web needs no sandbox and no work folder")
			envFile := envFileFlag(fs)
			return func(ctx context.Context, x *invocation) error {
				return cmdCheck(ctx, x.cfg, x.cerr, *role, *envFile, x.stdout)
			}
		}})
}

func cmdCheck(ctx context.Context, cfg *Config, cerr error, role, envFile string, stdout io.Writer) error {
	switch role {
	case "all", "web", "worker":
	default:
		return fmt.Errorf("%w: --role must be all, web or worker", errUsage)
	}
	cfg, cerr = reloadConfig(envFile, cfg, cerr)
	c := &checker{out: stdout}
	if cfg == nil {
		var ce *configError
		if errors.As(cerr, &ce) {
			for _, m := range ce.msgs {
				c.fail("settings", "%s", m)
			}
		}
		return errChecksFailed
	}
	var ce *configError
	if errors.As(cerr, &ce) {
		for _, m := range ce.msgs {
			c.fail("settings", "%s", m)
		}
	}
	cfg.Role = role
	// validate also fills in the defaults (the public URL, the work folder);
	// the key is judged below on its own.
	if errors.As(cfg.validate(false), &ce) {
		for _, m := range ce.msgs {
			c.fail("settings", "%s", m)
		}
	} else if cerr == nil {
		c.ok("settings", "every ANVIL_* variable is well-formed (role %s)", role)
	}

	keys := checkKey(c, cfg)
	checkDatabase(ctx, c, cfg, keys)
	if role != "web" {
		checkSandbox(c, cfg)
		checkWorkDir(c, cfg)
		checkDataDir(c, cfg)
	} else {
		checkProbe(c, cfg)
	}
	checkPublicURL(c, cfg)
	checkListen(c, cfg)
	checkMail(c, cfg)
	if c.failed > 0 {
		fmt.Fprintf(stdout, "\n%d problem(s): anvil will not work as configured\n", c.failed)
		return errChecksFailed
	}
	fmt.Fprintln(stdout, "\nall good")
	return nil
}

// checkKey judges the operator key; it returns the ids of the keys
// configured (current first), nil when there is none.
func checkKey(c *checker, cfg *Config) []string {
	switch {
	case cfg.keyFileErr != nil:
		hint := ""
		if errors.Is(cfg.keyFileErr, os.ErrPermission) {
			hint = " (run the check as the service's user: sudo -u anvil …; the file should be root:anvil 0640)"
		}
		c.fail("key", "ANVIL_SECRET_KEY_FILE cannot be read: %v%s", cfg.keyFileErr, hint)
		return nil
	case cfg.SecretKey == nil:
		c.fail("key", "no key: set ANVIL_SECRET_KEY_FILE to a file holding 32 random bytes in base64 (openssl rand -base64 32), or ANVIL_SECRET_KEY")
		return nil
	}
	kr, err := secret.NewKeyring(cfg.SecretKey, cfg.SecretKeyPrevious)
	if err != nil {
		c.fail("key", "%v", err)
		return nil
	}
	ids := []string{kr.CurrentID()}
	from := "ANVIL_SECRET_KEY"
	if cfg.SecretKeyFile != "" {
		from = cfg.SecretKeyFile
		if fi, err := os.Stat(cfg.SecretKeyFile); err == nil && fi.Mode().Perm()&0o004 != 0 {
			c.fail("key", "%s is readable by every user of this machine (mode %04o): chmod 0640 it (owner root, group anvil)", cfg.SecretKeyFile, fi.Mode().Perm())
		}
	}
	c.ok("key", "a valid 32-byte key from %s (key id %s)", from, kr.CurrentID())
	if cfg.SecretKeyPrevious != nil {
		prev, _ := secret.NewKeyring(cfg.SecretKeyPrevious, nil)
		ids = append(ids, prev.CurrentID())
		c.warn("key", "ANVIL_SECRET_KEY_PREVIOUS (key id %s) is set: run `anvil admin rotate-key`, then remove it", prev.CurrentID())
	}
	return ids
}

func checkDatabase(ctx context.Context, c *checker, cfg *Config, keyIDs []string) {
	if cfg.DatabaseURL == "" {
		c.fail("database", "ANVIL_DATABASE_URL is not set: set it to postgres://USER:PASSWORD@HOST:5432/DATABASE (in /etc/anvil/anvil.env for the service)")
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	d, err := db.Open(cctx, cfg.DatabaseURL, 2)
	if err != nil {
		c.fail("database", "cannot connect: %v", err)
		return
	}
	defer d.Close()
	var version, name, user string
	var versionNum int
	var canCreate bool
	err = d.SQL.QueryRowContext(cctx, `SELECT current_setting('server_version'), current_setting('server_version_num')::int,
		current_database(), current_user, has_schema_privilege(current_user, 'public', 'CREATE')`).Scan(&version, &versionNum, &name, &user, &canCreate)
	if err != nil {
		c.fail("database", "connected, but cannot ask the server's version: %v", err)
		return
	}
	c.ok("database", "reachable: database %q as %q on PostgreSQL %s (%s)", name, user, version, db.Redact(cfg.DatabaseURL))
	applied, err := db.Applied(cctx, d)
	if err != nil {
		c.fail("schema", "%v", err)
		return
	}
	newest, err := db.Newest()
	if err != nil {
		c.fail("schema", "%v", err)
		return
	}
	switch {
	case applied > newest:
		c.fail("schema", "the database is at migration %s, newer than this anvil's %s: a newer anvil used it; install that version (a downgrade is not supported — restore a backup instead)", applied, newest)
	case applied == newest:
		c.ok("schema", "current (migration %s)", applied)
	case applied == "":
		c.ok("schema", "empty: anvil creates its tables when it first starts")
	default:
		c.ok("schema", "at migration %s: anvil applies the newer ones, up to %s, when it starts", applied, newest)
	}
	if applied < newest && !canCreate {
		c.fail("schema", "the role %q may not create tables in schema public, which the migrations need (PostgreSQL 15 and later grant that only to the database's owner): ALTER DATABASE %s OWNER TO %s",
			user, name, user)
	}
	if applied == newest && keyIDs != nil {
		checkSealed(cctx, c, d, keyIDs)
	}
	checkPgDump(c, versionNum)
}

// checkSealed tells whether the configured keys open the database's
// secrets: every sealed value names the key that sealed it.
func checkSealed(ctx context.Context, c *checker, d *db.DB, keyIDs []string) {
	ids, err := domain.SealedKeyIDs(ctx, d.Bun)
	if err != nil {
		c.fail("key", "cannot read the stored secrets' key ids: %v", err)
		return
	}
	var unknown []string
	n, total := 0, 0
	for id, count := range ids {
		total += count
		if !contains(keyIDs, id) {
			unknown = append(unknown, id)
			n += count
		}
	}
	sort.Strings(unknown)
	switch {
	case n > 0:
		c.fail("key", "%d stored secret(s) were sealed under key id(s) %s, which is not the configured key (%s): this database was used with another key — put that key back (a restore writes it; see docs/install.md)",
			n, strings.Join(unknown, ", "), strings.Join(keyIDs, ", "))
	case total > 0:
		c.ok("key", "opens the %d stored secret(s) of the database", total)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// checkPgDump warns when backups cannot be made here.
func checkPgDump(c *checker, serverNum int) {
	path, err := exec.LookPath("pg_dump")
	if err != nil {
		c.warn("backup", "pg_dump is not installed: `anvil admin backup` needs postgresql-client")
		return
	}
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		c.warn("backup", "%s --version failed: %v", path, err)
		return
	}
	// "pg_dump (PostgreSQL) 15.20 (Debian …)"
	fields := strings.Fields(string(out))
	major := 0
	if len(fields) >= 3 {
		major, _ = strconv.Atoi(strings.SplitN(fields[2], ".", 2)[0])
	}
	if major*10000 < serverNum/10000*10000 {
		c.warn("backup", "pg_dump is version %d, older than the server (%d): `anvil admin backup` needs postgresql-client %d or newer", major, serverNum/10000, serverNum/10000)
		return
	}
	c.ok("backup", "pg_dump %d can back the server up (`anvil admin backup FILE`)", major)
}

func checkSandbox(c *checker, cfg *Config) {
	if _, err := exec.LookPath("git"); err != nil {
		c.fail("sandbox", "git is not installed: runs cannot check repositories out (apt-get install git)")
	}
	if cfg.Sandbox == "process" {
		c.warn("sandbox", "ANVIL_SANDBOX=process: runs execute unsandboxed, as the service's user, with its network and files")
		return
	}
	exec, err := sandbox.New(cfg.Sandbox, 0)
	if err != nil {
		c.fail("sandbox", "%v", err)
		return
	}
	// This check runs in the operator's shell, not under the unit's
	// system-call filter and namespace limits: it cannot tell whether the
	// unit lets bubblewrap run. The worker probes again when it starts
	// under its unit and refuses to start when it cannot.
	c.ok("sandbox", "bubblewrap runs (%s) in this shell, outside the unit's confinement; the worker checks again under its unit when it starts (journalctl -u anvil-worker)", exec.Name())
}

// checkProbe is the web tier's use of bubblewrap: repositories are probed
// when a project is saved.
func checkProbe(c *checker, cfg *Config) {
	if cfg.Sandbox == "process" {
		return
	}
	if _, err := sandbox.NewGit(true, repourl.Policy{AllowLocal: cfg.CheckoutAllowLocal}); err != nil {
		c.warn("sandbox", "git cannot be confined here (%v): a repository is not probed when a project is saved; runs are unaffected", err)
	}
}

// checkDataDir checks the folder of the runs' caches (docs/caches.md),
// when it is not the work folder, which checkWorkDir checked.
func checkDataDir(c *checker, cfg *Config) {
	if cfg.DataDir == cfg.WorkDir || cfg.RunCacheMB == 0 {
		return
	}
	if err := os.MkdirAll(cfg.DataDir, 0o711); err != nil {
		c.fail("data dir", "cannot create %s: %v (set ANVIL_DATA_DIR to a folder the service's user may write)", cfg.DataDir, err)
		return
	}
	f, err := os.CreateTemp(cfg.DataDir, ".check-*")
	if err != nil {
		c.fail("data dir", "%s is not writable: %v", cfg.DataDir, err)
		return
	}
	f.Close()
	_ = os.Remove(f.Name())
	c.ok("data dir", "%s is writable: the runs' caches live in %s", cfg.DataDir, filepath.Join(cfg.DataDir, "caches"))
}

func checkWorkDir(c *checker, cfg *Config) {
	if err := os.MkdirAll(cfg.WorkDir, 0o711); err != nil {
		c.fail("work dir", "cannot create %s: %v (set ANVIL_WORK_DIR to a folder the service's user may write)", cfg.WorkDir, err)
		return
	}
	f, err := os.CreateTemp(cfg.WorkDir, ".check-*")
	if err != nil {
		c.fail("work dir", "%s is not writable: %v", cfg.WorkDir, err)
		return
	}
	f.Close()
	os.Remove(f.Name())
	var st syscall.Statfs_t
	if err := syscall.Statfs(cfg.WorkDir, &st); err == nil {
		free := int64(st.Bavail) * int64(st.Bsize)
		if free < 1<<30 {
			c.warn("work dir", "%s is writable but only %s are free: checkouts and builds need room", cfg.WorkDir, humanBytes(free))
			return
		}
		c.ok("work dir", "%s is writable (%s free)", cfg.WorkDir, humanBytes(free))
		return
	}
	c.ok("work dir", "%s is writable", cfg.WorkDir)
}

func checkPublicURL(c *checker, cfg *Config) {
	u, err := url.Parse(cfg.PublicURL)
	if err != nil || u.Host == "" {
		return // validate said so already
	}
	host := u.Hostname()
	loop := host == "localhost"
	if a, err := netip.ParseAddr(host); err == nil {
		loop = a.IsLoopback() || a.IsUnspecified()
	}
	hook := cfg.PublicURL + "/api/public/webhooks/…"
	switch {
	case loop:
		c.warn("public url", "%s is reachable from this machine only: forges cannot deliver webhooks (%s) and links in alerts lead nowhere; set ANVIL_PUBLIC_URL to the address people use, such as https://anvil.example.com",
			cfg.PublicURL, hook)
	case u.Scheme == "http":
		c.warn("public url", "%s is plain http: sign-in cookies are not marked Secure and travel in clear; serve anvil behind an https reverse proxy and set ANVIL_PUBLIC_URL=https://%s", cfg.PublicURL, u.Host)
	default:
		c.ok("public url", "%s: cookies are Secure; forges deliver webhooks to %s", cfg.PublicURL, hook)
	}
	if u.Path != "" && u.Path != "/" {
		c.warn("public url", "%s has a path (%s): anvil serves at the root of its host, so the proxy must strip it", cfg.PublicURL, u.Path)
	}
}

func checkListen(c *checker, cfg *Config) {
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			c.warn("listen", "%s is in use (is anvil running already?)", cfg.Addr)
			return
		}
		c.fail("listen", "cannot listen on %s: %v", cfg.Addr, err)
		return
	}
	ln.Close()
	host, _, _ := net.SplitHostPort(cfg.Addr)
	if a, err := netip.ParseAddr(host); err == nil && a.IsLoopback() && !strings.Contains(cfg.PublicURL, host) {
		c.ok("listen", "%s: this machine only — a reverse proxy here forwards %s to it", cfg.Addr, cfg.PublicURL)
		return
	}
	c.ok("listen", "%s", cfg.Addr)
}

// checkMail names the SMTP server mail goes through, its password masked
// (docs/mail.md); it sends nothing: a test alert does (Settings → Alerts).
func checkMail(c *checker, cfg *Config) {
	if cfg.Mail == nil {
		c.ok("mail", "no SMTP server (ANVIL_SMTP_URL): no e-mail alerts; invitation and reset links are shown, not mailed")
		return
	}
	c.ok("mail", "through %s from %s; send a test alert from Settings → Alerts to try it", cfg.Mail.Masked(), cfg.Mail.From)
}
