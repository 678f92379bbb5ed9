package cli

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"anvil/domain/image"
	"anvil/domain/mail"
	"anvil/domain/retention"
	"anvil/domain/secret"
	"anvil/domain/sourcemap"
)

// Config is the whole configuration, read once from the environment (the
// table in the README) and overridden by flags, then validated.
type Config struct {
	DatabaseURL       string
	Addr              string
	SecretKey         []byte
	SecretKeyPrevious []byte
	PublicURL         string
	FeedArmed         bool
	FeedMaxBody       int
	FeedMaxEnvelope   int
	FeedMaxBatch      int
	FeedRatePerMin    int
	TrustedProxies    []netip.Prefix
	Sandbox           string
	HeartbeatTimeout  time.Duration
	BodyTimeout       time.Duration
	WorkDir           string
	// DataDir is where a worker keeps what outlives its processes and the
	// machine's restarts: the runs' caches (docs/caches.md). Never the
	// system's temporary folder, shared by every anvil of the machine and
	// emptied at boot.
	DataDir        string
	LogLevel       string
	RunConcurrency int
	LogMaxBytes    int64
	Role           string
	// CheckoutAllowLocal lifts the checkout policy: file:// and path
	// repositories and loopback or private-network addresses are accepted.
	CheckoutAllowLocal bool
	// SandboxTmpMax bounds a sandbox's private /tmp, in bytes.
	SandboxTmpMax int64
	// RunCacheMB bounds each project's cache between runs, in MiB; 0 gives
	// runs no cache (docs/caches.md).
	RunCacheMB int
	// ImageCacheMB bounds the worker's store of unpacked images, in MiB
	// (ANVIL_IMAGE_CACHE_MB; docs/images.md).
	ImageCacheMB int
	// RegistriesInsecure are the registries (host:port) pulled over plain
	// HTTP (ANVIL_REGISTRIES_INSECURE; docs/images.md).
	RegistriesInsecure []string
	// RunParallelSteps bounds the pipeline steps a run executes at once;
	// ArtifactsMaxMB the files a run keeps (docs/pipelines.md).
	RunParallelSteps int
	ArtifactsMaxMB   int
	// AlertsPerMinute is how many alerts one destination receives in a
	// minute before the rest fold into a digest.
	AlertsPerMinute int
	// AlertsAllowPrivate lets alert destinations reach loopback, private,
	// link-local and unique-local addresses.
	AlertsAllowPrivate bool
	// RunsAllowPrivate lets runs' egress proxies reach loopback, private,
	// link-local and unique-local addresses (docs/network.md).
	RunsAllowPrivate bool
	// RunsAllowLoopback lets them reach the worker's own loopback and
	// link-local addresses, a cloud's metadata endpoint among them
	// (docs/network.md, "Private addresses").
	RunsAllowLoopback bool
	// EventRetention is the default age of stored feed events and the most
	// any retention policy may set (docs/retention.md).
	EventRetention time.Duration
	// RetentionShare is the share of the time a clean-up may spend
	// deleting; it rests the rest (docs/retention.md, "Pacing").
	RetentionShare float64
	// SourceMaps bound source-map uploads per file, bundle and project,
	// and size the parsed maps' cache, in bytes (docs/sourcemap.md).
	SourceMaps      sourcemap.Limits
	SourceMapsCache int64

	// FeedBrowserRatePerMin bounds a browser connection's events per client
	// address per minute (docs/contracts/feed.md).
	FeedBrowserRatePerMin int
	// MonitorsPerProject caps a project's cron monitors, whoever makes
	// them — a check-in's monitor_config above all (docs/monitors.md,
	// "Bounds").
	MonitorsPerProject int

	// SecretKeyFile is where the key was read from (ANVIL_SECRET_KEY_FILE),
	// "" when it came from ANVIL_SECRET_KEY: `anvil admin restore` writes
	// the archive's key there (docs/install.md).
	SecretKeyFile string
	// Mail is the SMTP server alerts, invitations and password resets are
	// sent through (ANVIL_SMTP_URL, ANVIL_MAIL_FROM; docs/mail.md); nil:
	// this server sends no mail.
	Mail *mail.Config

	// keyFileErr is why SecretKeyFile could not be read; validate reports
	// it only for commands that need the key, so that a restore can create
	// the file.
	keyFileErr error
}

// configError is a refusal of the configuration: exit code 2.
type configError struct{ msgs []string }

func (e *configError) Error() string {
	return "invalid configuration:\n  - " + strings.Join(e.msgs, "\n  - ")
}

// loadConfig reads the environment. Every problem is collected so that an
// operator fixes them in one go.
func loadConfig(getenv func(string) string) (*Config, error) {
	ce := &configError{}
	bad := func(format string, args ...any) { ce.msgs = append(ce.msgs, fmt.Sprintf(format, args...)) }
	str := func(k, def string) string {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			return v
		}
		return def
	}
	integer := func(k string, def, min, max int) int {
		v := str(k, "")
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < min || n > max {
			bad("%s must be a whole number between %d and %d", k, min, max)
			return def
		}
		return n
	}
	c := &Config{
		DatabaseURL:     str("ANVIL_DATABASE_URL", ""),
		Addr:            str("ANVIL_ADDR", "127.0.0.1:8080"),
		PublicURL:       str("ANVIL_PUBLIC_URL", ""),
		FeedMaxBody:     integer("ANVIL_FEED_MAX_BODY", 262144, 1024, 64<<20),
		FeedMaxBatch:    integer("ANVIL_FEED_MAX_BATCH", 50, 1, 1000),
		FeedRatePerMin:  integer("ANVIL_FEED_RATE_PER_MIN", 600, 1, 1_000_000),
		AlertsPerMinute: integer("ANVIL_ALERTS_PER_MINUTE", 20, 1, 1_000_000),
		Sandbox:         str("ANVIL_SANDBOX", ""),
		WorkDir:         str("ANVIL_WORK_DIR", ""),
		DataDir:         str("ANVIL_DATA_DIR", ""),
		LogLevel:        str("ANVIL_LOG_LEVEL", "info"),
		Role:            "all",
		RunConcurrency:  integer("ANVIL_RUN_CONCURRENCY", 8, 1, 256),
		LogMaxBytes:     int64(integer("ANVIL_LOG_MAX_BYTES", 10<<20, 4096, 1<<30)),
	}
	// Each project's cache between runs (docs/caches.md): 2 GiB holds the
	// dependencies of a large npm or Go project; 0 turns caches off.
	c.RunCacheMB = integer("ANVIL_RUN_CACHE_MB", 2048, 0, 1<<20)
	// Pipelines (docs/pipelines.md): parallel steps in one workspace, as
	// many as the machine has cores; a run's artifacts, 100 MiB.
	c.RunParallelSteps = integer("ANVIL_RUN_PARALLEL_STEPS", runtime.NumCPU(), 1, 256)
	c.ArtifactsMaxMB = integer("ANVIL_ARTIFACTS_MAX_MB", 100, 1, 10240)
	// The Sentry door's bound on a body after decompression.
	c.FeedMaxEnvelope = integer("ANVIL_FEED_MAX_ENVELOPE", 1<<20, 1024, 64<<20)
	// A browser connection's events per client address per minute.
	c.FeedBrowserRatePerMin = integer("ANVIL_FEED_BROWSER_RATE_PER_MIN", 60, 1, 1_000_000)
	c.MonitorsPerProject = integer("ANVIL_MONITORS_PER_PROJECT", 1000, 1, 1_000_000)
	switch v := strings.ToLower(str("ANVIL_FEED_ARMED", "false")); v {
	case "true", "1", "yes":
		c.FeedArmed = true
	case "false", "0", "no":
	default:
		bad("ANVIL_FEED_ARMED must be true or false")
	}
	switch v := strings.ToLower(str("ANVIL_CHECKOUT_ALLOW_LOCAL", "false")); v {
	case "true", "1", "yes":
		c.CheckoutAllowLocal = true
	case "false", "0", "no":
	default:
		bad("ANVIL_CHECKOUT_ALLOW_LOCAL must be true or false")
	}
	switch v := strings.ToLower(str("ANVIL_ALERTS_ALLOW_PRIVATE", "false")); v {
	case "true", "1", "yes":
		c.AlertsAllowPrivate = true
	case "false", "0", "no":
	default:
		bad("ANVIL_ALERTS_ALLOW_PRIVATE must be true or false")
	}
	switch v := strings.ToLower(str("ANVIL_RUNS_ALLOW_PRIVATE", "false")); v {
	case "true", "1", "yes":
		c.RunsAllowPrivate = true
	case "false", "0", "no":
	default:
		bad("ANVIL_RUNS_ALLOW_PRIVATE must be true or false")
	}
	switch v := strings.ToLower(str("ANVIL_RUNS_ALLOW_LOOPBACK", "false")); v {
	case "true", "1", "yes":
		c.RunsAllowLoopback = true
	case "false", "0", "no":
	default:
		bad("ANVIL_RUNS_ALLOW_LOOPBACK must be true or false")
	}
	c.ImageCacheMB = integer(image.EnvCacheMB, image.DefaultCacheMB, 64, 1<<24)
	if ins, err := image.ParseInsecure(str(image.EnvInsecure, "")); err != nil {
		bad("%v", err)
	} else {
		c.RegistriesInsecure = ins
	}
	c.SandboxTmpMax = 512 << 20
	if v := str("ANVIL_SANDBOX_TMP_MAX", ""); v != "" {
		n, err := parseBytes(v)
		if err != nil || n < 1<<20 || n > 64<<30 {
			bad("ANVIL_SANDBOX_TMP_MAX must be a size between 1MiB and 64GiB, such as 512MiB or 1073741824 (bytes)")
		} else {
			c.SandboxTmpMax = n
		}
	}
	if v := str("ANVIL_SECRET_KEY", ""); v != "" {
		k, err := secret.ParseKey(v)
		if err != nil {
			bad("ANVIL_SECRET_KEY %v", err)
		}
		c.SecretKey = k
	}
	// The packaged service keeps its key in a file of its own rather than in
	// the environment file (docs/install.md).
	if f := str("ANVIL_SECRET_KEY_FILE", ""); f != "" {
		c.SecretKeyFile = f
		if c.SecretKey != nil {
			bad("set ANVIL_SECRET_KEY or ANVIL_SECRET_KEY_FILE, not both")
		} else if b, err := os.ReadFile(f); err != nil {
			c.keyFileErr = err
		} else if k, err := secret.ParseKey(string(b)); err != nil {
			bad("ANVIL_SECRET_KEY_FILE %s: %v", f, err)
		} else {
			c.SecretKey = k
		}
	}
	if v := str("ANVIL_SECRET_KEY_PREVIOUS", ""); v != "" {
		k, err := secret.ParseKey(v)
		if err != nil {
			bad("ANVIL_SECRET_KEY_PREVIOUS %v", err)
		}
		c.SecretKeyPrevious = k
	}
	proxies := str("ANVIL_TRUSTED_PROXIES", "127.0.0.0/8,::1/128")
	for _, p := range strings.Split(proxies, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		pfx, err := netip.ParsePrefix(p)
		if err != nil {
			if a, aerr := netip.ParseAddr(p); aerr == nil {
				pfx = netip.PrefixFrom(a, a.BitLen())
			} else {
				bad("ANVIL_TRUSTED_PROXIES: %q is not a CIDR", p)
				continue
			}
		}
		c.TrustedProxies = append(c.TrustedProxies, pfx.Masked())
	}
	c.HeartbeatTimeout = 60 * time.Second
	if v := str("ANVIL_HEARTBEAT_TIMEOUT", ""); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > 24*time.Hour {
			bad("ANVIL_HEARTBEAT_TIMEOUT must be a duration between 1s and 24h, such as 60s")
		} else {
			c.HeartbeatTimeout = d
		}
	}
	c.EventRetention = 90 * 24 * time.Hour
	if v := str("ANVIL_EVENT_RETENTION", ""); v != "" {
		d, err := retention.ParseDuration(v)
		if err != nil || d > 3650*24*time.Hour {
			bad("ANVIL_EVENT_RETENTION must be a duration such as 90d, 12h, 30m or 45s, at most 3650d")
		} else {
			c.EventRetention = d
		}
	}
	c.RetentionShare = retention.DefaultShare
	if v := str("ANVIL_RETENTION_SHARE", ""); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f >= 0.01 && f <= 1) {
			bad("ANVIL_RETENTION_SHARE must be a number between 0.01 and 1, such as 0.2")
		} else {
			c.RetentionShare = f
		}
	}
	c.SourceMaps = sourcemap.Limits{
		File:    int64(integer("ANVIL_SOURCEMAP_MAX_FILE", sourcemap.DefaultMaxFile, 1024, 1<<30)),
		Bundle:  int64(integer("ANVIL_SOURCEMAP_MAX_BUNDLE", sourcemap.DefaultMaxBundle, 1024, 4<<30)),
		Project: int64(integer("ANVIL_SOURCEMAP_MAX_PROJECT", sourcemap.DefaultMaxProject, 1024, 64<<30)),
	}
	c.SourceMapsCache = int64(integer("ANVIL_SOURCEMAP_CACHE", 256<<20, 1<<20, 16<<30))
	if m, err := mail.ParseURL(getenv("ANVIL_SMTP_URL"), getenv("ANVIL_MAIL_FROM")); err != nil {
		bad("%v", err) // never the URL: it may hold the password
	} else {
		c.Mail = m
	}
	c.BodyTimeout = 30 * time.Second
	if v := str("ANVIL_BODY_TIMEOUT", ""); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > time.Hour {
			bad("ANVIL_BODY_TIMEOUT must be a duration between 1s and 1h, such as 30s")
		} else {
			c.BodyTimeout = d
		}
	}
	if len(ce.msgs) > 0 {
		return c, ce
	}
	return c, nil
}

// validate checks what the chosen command needs; needKey is false for
// commands that never touch secrets (migrate).
func (c *Config) validate(needKey bool) error {
	ce := &configError{}
	bad := func(format string, args ...any) { ce.msgs = append(ce.msgs, fmt.Sprintf(format, args...)) }
	if c.DatabaseURL == "" {
		bad("ANVIL_DATABASE_URL is required (a postgres:// URL); `make run` provides one")
	} else if u, err := url.Parse(c.DatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		bad("ANVIL_DATABASE_URL must be a postgres:// URL")
	}
	if needKey && c.keyFileErr != nil {
		bad("ANVIL_SECRET_KEY_FILE: %v", c.keyFileErr)
	} else if needKey && c.SecretKey == nil {
		bad("ANVIL_SECRET_KEY is required: 32 random bytes, base64-encoded (e.g. `openssl rand -base64 32`)")
	}
	if _, err := netip.ParseAddrPort(c.Addr); err != nil {
		if _, _, ok := strings.Cut(c.Addr, ":"); !ok {
			bad("--addr / ANVIL_ADDR must be host:port, got %q", c.Addr)
		}
	}
	switch c.Role {
	case "all", "web", "worker":
	default:
		bad("--role must be all, web or worker, got %q", c.Role)
	}
	switch c.Sandbox {
	case "", "bwrap", "process":
	default:
		bad("ANVIL_SANDBOX must be bwrap or process, got %q", c.Sandbox)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("ANVIL_LOG_LEVEL must be debug, info, warn or error")
	}
	if c.PublicURL == "" {
		c.PublicURL = "http://" + c.Addr
	}
	if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("ANVIL_PUBLIC_URL must be an http(s) URL such as https://anvil.example.com")
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	if c.DataDir == "" && c.WorkDir != "" {
		// An operator who chose the work folder chose where its caches
		// live (ANVIL_WORK_DIR/caches, as before the data folder existed).
		c.DataDir = c.WorkDir
	}
	if c.DataDir == "" {
		c.DataDir = defaultDataDir()
	}
	if c.WorkDir == "" {
		c.WorkDir = os.TempDir() + "/anvil-work"
	}
	if len(ce.msgs) > 0 {
		return ce
	}
	return nil
}

// parseBytes reads a size: a whole number of bytes, or one with a unit
// (KiB, MiB, GiB, or K, M, G meaning the same powers of 1024).
func parseBytes(v string) (int64, error) {
	v = strings.TrimSpace(v)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}} {
		if strings.HasSuffix(v, u.suffix) {
			v, mult = strings.TrimSpace(strings.TrimSuffix(v, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("invalid size %q", v)
	}
	return n * mult, nil
}

func isConfigError(err error) bool {
	var ce *configError
	return errors.As(err, &ce)
}

// defaultDataDir is the user's data folder for anvil ($XDG_DATA_HOME/anvil,
// else ~/.local/share/anvil), when neither ANVIL_DATA_DIR nor
// ANVIL_WORK_DIR is set; `anvil dev` sets its own folder's data/.
func defaultDataDir() string {
	if x := os.Getenv("XDG_DATA_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "anvil")
	}
	if home, err := os.UserHomeDir(); err == nil && filepath.IsAbs(home) {
		return filepath.Join(home, ".local", "share", "anvil")
	}
	return filepath.Join(os.TempDir(), "anvil-data")
}
