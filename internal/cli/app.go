package cli

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/riverqueue/river"

	"anvil/db"
	"anvil/domain/forgeapi"
	"anvil/domain/forgestatus"
	"anvil/domain/image"
	"anvil/domain/imagestore"
	"anvil/domain/repourl"
	"anvil/domain/secret"
	"anvil/domain/wiring"
	"anvil/jobs"
	"anvil/jobs/sandbox"
	"anvil/web"
)

// app is the wired program: database, services, River and (for serve) HTTP.
type app struct {
	cfg  *Config
	log  *slog.Logger
	db   *db.DB
	keys *secret.Keyring
	*wiring.Services
	river   *river.Client[*sql.Tx]
	sweeper *jobs.LostRunnerSweeper // nil without workers
	metrics *web.Metrics
	// Images is this host's image store when the process runs workers
	// (the settings page lists and clears it); nil otherwise.
	Images *image.Store
	// imageReporter reports Images and carries out the clears requested
	// from any process (docs/images.md); nil without workers.
	imageReporter *imagestore.Reporter
}

func newLogger(cfg *Config, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.LogLevel))
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl}))
}

// riverLogger keeps River's routine chatter (job counts every few seconds)
// out of the log unless debugging.
func riverLogger(cfg *Config, w io.Writer) *slog.Logger {
	lvl := slog.LevelWarn
	if cfg.LogLevel == "debug" {
		lvl = slog.LevelDebug
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})).With("component", "river")
}

func openDB(ctx context.Context, cfg *Config) (*db.DB, error) {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return db.Open(cctx, cfg.DatabaseURL, 25)
}

func migrateDB(ctx context.Context, d *db.DB, log *slog.Logger) error {
	start := time.Now()
	if err := db.Migrate(ctx, d); err != nil {
		return err
	}
	log.Info("database migrated", "duration", time.Since(start))
	return nil
}

// newApp wires everything. withWorkers builds a River client that works
// jobs; otherwise the client only inserts.
func newApp(ctx context.Context, cfg *Config, logOut io.Writer, withWorkers bool) (*app, error) {
	log := newLogger(cfg, logOut)
	slog.SetDefault(log)
	keys, err := secret.NewKeyring(cfg.SecretKey, cfg.SecretKeyPrevious)
	if err != nil {
		return nil, err
	}
	d, err := openDB(ctx, cfg)
	if err != nil {
		return nil, err
	}
	a := &app{cfg: cfg, log: log, db: d, keys: keys}
	// One checkout policy for saves and checkouts; git is confined unless
	// runs are (ANVIL_SANDBOX=process).
	policy := repourl.Policy{AllowLocal: cfg.CheckoutAllowLocal}
	git, gitErr := sandbox.NewGit(cfg.Sandbox != "process", policy)
	opts := wiring.Options{HeartbeatTimeout: cfg.HeartbeatTimeout, LogMaxBytes: cfg.LogMaxBytes, CheckoutPolicy: policy,
		PublicURL: cfg.PublicURL, AlertsPerMinute: cfg.AlertsPerMinute,
		AlertsAllowPrivate: cfg.AlertsAllowPrivate, EventRetention: cfg.EventRetention, RetentionShare: cfg.RetentionShare,
		SourceMapLimits: cfg.SourceMaps, SourceMapCache: cfg.SourceMapsCache}
	opts.RunsAllowPrivate = cfg.RunsAllowPrivate
	opts.RunsAllowLoopback = cfg.RunsAllowLoopback
	opts.MonitorsPerProject = cfg.MonitorsPerProject
	opts.Mail = cfg.Mail
	if cfg.Mail != nil {
		log.Info("mail is sent through the operator's SMTP server", "smtp", cfg.Mail.Masked(), "from", cfg.Mail.From)
	}
	var gitHead forgestatus.GitHead
	if gitErr == nil {
		opts.ProbeRepo, gitHead = git.Probe, git.Head
	} else if !withWorkers {
		log.Warn("repositories are not probed at save: git cannot be confined here", "error", gitErr)
	}
	// Every forge call goes through the confined client under the same
	// policy (docs/forgeapi.md).
	opts.LatestCommit = forgestatus.LatestCommit(forgeapi.NewHTTPClient(policy), gitHead)
	if cfg.CheckoutAllowLocal {
		log.Warn("local checkouts are allowed (ANVIL_CHECKOUT_ALLOW_LOCAL=true): projects may read this machine's repositories and private network")
	}
	a.Services = wiring.NewServices(d, keys, log, opts)
	a.metrics = web.NewMetrics(d)
	if cfg.AlertsAllowPrivate {
		log.Warn("alert destinations may reach private addresses (ANVIL_ALERTS_ALLOW_PRIVATE=true)")
	}
	if cfg.RunsAllowPrivate {
		log.Warn("runs' network lists may reach private addresses (ANVIL_RUNS_ALLOW_PRIVATE=true)")
	}
	if cfg.RunsAllowLoopback {
		log.Warn("runs' network lists may reach this machine's own loopback and link-local addresses (ANVIL_RUNS_ALLOW_LOOPBACK=true)")
	}

	rcfg := &river.Config{ID: riverClientID(), Logger: riverLogger(cfg, logOut), FetchCooldown: 10 * time.Millisecond, FetchPollInterval: 100 * time.Millisecond}
	if withWorkers {
		workers := river.NewWorkers()
		exec, err := sandbox.New(cfg.Sandbox, sandbox.DefaultGrace)
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("run executor: %w", err)
		}
		root, err := jobs.ProcessWorkRoot(cfg.WorkDir)
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("workspace folder %s: %w", cfg.WorkDir, err)
		}
		if gitErr != nil {
			d.Close()
			return nil, fmt.Errorf("checkout: %w", gitErr)
		}
		limits := sandbox.DefaultLimits()
		limits.TmpBytes = uint64(cfg.SandboxTmpMax)
		log.Info("run executor ready", "executor", exec.Name(), "sandboxed", exec.Sandboxed(), "checkout_confined", git.Confined(),
			"checkout_allow_local", cfg.CheckoutAllowLocal, "tmp_max", cfg.SandboxTmpMax, "workspaces", root)
		var caches *sandbox.Caches
		if cfg.RunCacheMB > 0 {
			// Under the data folder, shared by the worker processes of the
			// host: a cache outlives the process that wrote it and the
			// machine's restarts (docs/caches.md).
			caches = &sandbox.Caches{Root: filepath.Join(cfg.DataDir, "caches"), MaxBytes: int64(cfg.RunCacheMB) << 20}
		}
		// Beside the caches, outside every sandbox's view but the tree a
		// run is given (docs/images.md).
		store, err := image.OpenStore(filepath.Join(cfg.WorkDir, "images"), int64(cfg.ImageCacheMB)<<20, image.Bounds{})
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("image store: %w", err)
		}
		a.Images = store
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "unknown host"
		}
		a.imageReporter = a.ImageStores.NewReporter(store, host, store.Dir(), log)
		images := &jobs.Images{Store: store, AllowPrivate: cfg.RunsAllowPrivate, AllowLoopback: cfg.RunsAllowLoopback,
			Insecure: cfg.RegistriesInsecure}
		jobs.Register(workers, jobs.Deps{Services: a.Services, Executor: exec, Git: git, Limits: limits, WorkRoot: root, Caches: caches, ImageStore: images, Images: true, Log: log,
			ParallelSteps: cfg.RunParallelSteps, ArtifactsMaxBytes: int64(cfg.ArtifactsMaxMB) << 20,
			Reporter: forgestatus.NewReporter(a.Store, a.Projects, cfg.PublicURL)})
		rcfg.Workers = workers
		rcfg.Queues = wiring.Queues(cfg.RunConcurrency)
		rcfg.PeriodicJobs = jobs.Periodic(cfg.HeartbeatTimeout)
		a.sweeper = jobs.NewLostRunnerSweeper(a.Queue, log)
	}
	client, err := a.Services.Start(ctx, rcfg)
	if err != nil {
		d.Close()
		return nil, err
	}
	a.river = client
	return a, nil
}

// close stops the services' machinery (sending what it still holds) and
// then closes the pool.
func (a *app) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Services.Stop(ctx); err != nil {
		a.log.Warn("stop the services", "error", err)
	}
	a.db.Close()
}

// riverClientID is River's default client id (host and start time) with the
// process id added: two workers on one host are told apart in river_leader
// and in River's logs, so an operator (or a test) sees which process leads.
func riverClientID() string {
	host, _ := os.Hostname()
	host = strings.NewReplacer(".", "_", "-", "_", ":", "_").Replace(host)
	if len(host) > 50 {
		host = host[:50]
	}
	if host == "" {
		host = "unknown_host"
	}
	return fmt.Sprintf("%s_%d_%s", host, os.Getpid(), strings.Replace(time.Now().UTC().Format("2006_01_02T15_04_05.000000"), ".", "_", 1))
}

func (a *app) deps() web.Deps {
	return web.Deps{DB: a.db, Services: a.Services, Keys: a.keys, Log: a.log,
		Metrics: a.metrics, Options: web.Options{PublicURL: a.cfg.PublicURL, SecureCookies: isHTTPS(a.cfg.PublicURL),
			FeedArmed: a.cfg.FeedArmed, FeedMaxBody: a.cfg.FeedMaxBody, FeedMaxEnvelope: a.cfg.FeedMaxEnvelope, FeedMaxBatch: a.cfg.FeedMaxBatch,
			FeedRatePerMin: a.cfg.FeedRatePerMin, TrustedProxies: a.cfg.TrustedProxies, BodyTimeout: a.cfg.BodyTimeout,
			FeedBrowserRatePerMin: a.cfg.FeedBrowserRatePerMin, RunCacheMaxBytes: int64(a.cfg.RunCacheMB) << 20}}
}

func isHTTPS(u string) bool { return len(u) >= 8 && u[:8] == "https://" }

// serve runs until ctx ends (SIGTERM/SIGINT), then stops in order: HTTP
// first (no new work accepted), River softly (running jobs finish), the
// services' machinery (pending card refreshes enqueued, live events sent),
// the pool last.
func serve(ctx context.Context, cfg *Config, logOut io.Writer) error {
	return serveWith(ctx, cfg, logOut, serveExtras{})
}

// serveExtras are what `anvil dev` changes in serve: the level of the
// request lines, and a hook called once the cockpit is serving (it prints
// the URL and the login last, where a terminal shows them).
type serveExtras struct {
	requestLogLevel slog.Level
	serving         func()
	keyHint         string // added to a refusal for a foreign key
}

func serveWith(ctx context.Context, cfg *Config, logOut io.Writer, x serveExtras) error {
	tuneGC()
	withWorkers := cfg.Role != "web"
	a, err := newApp(ctx, cfg, logOut, withWorkers)
	if err != nil {
		return err
	}
	defer a.close()
	if err := migrateDB(ctx, a.db, a.log); err != nil {
		return err
	}
	if err := checkSealedKeys(ctx, a, x.keyHint); err != nil {
		return err
	}
	done := make(chan struct{})
	deps := a.deps()
	deps.Done = done
	deps.Images = a.Images
	deps.Options.RequestLogLevel = x.requestLogLevel
	var handler *echo.Echo
	if cfg.Role == "worker" {
		handler = web.NewOps(deps)
	} else {
		handler = web.New(deps)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	srv.RegisterOnShutdown(func() { close(done) })
	if withWorkers {
		if err := a.river.Start(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("start river: %w", err)
		}
		a.sweeper.Start(context.WithoutCancel(ctx))
		a.imageReporter.Start(context.WithoutCancel(ctx))
	}
	hubCtx, stopHub := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHub()
	go a.Hub.Run(hubCtx)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	a.log.Info("anvil is serving", "addr", ln.Addr().String(), "role", cfg.Role, "public_url", cfg.PublicURL)
	if x.serving != nil {
		x.serving()
	}
	// Ready for systemd only now: migrated, listening, workers started.
	status := fmt.Sprintf("serving %s on %s", cfg.Role, ln.Addr())
	sdNotify(a.log, "READY=1\nSTATUS="+status)
	h, closeProbe := healthCheck(a, ln.Addr(), status)
	defer closeProbe()
	stopWatchdog := startWatchdog(a.log, h)
	defer stopWatchdog()

	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http server: %w", err)
		}
	}
	a.log.Info("shutting down")
	stopWatchdog()
	sdNotify(a.log, "STOPPING=1\nSTATUS=shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		a.log.Warn("http shutdown", "error", err)
	}
	if withWorkers {
		// This process stops judging other runners before its own jobs stop.
		a.sweeper.Stop()
		a.imageReporter.Stop()
		if err := a.river.Stop(sctx); err != nil {
			a.log.Warn("river soft stop timed out; cancelling running jobs", "error", err)
			hctx, hcancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = a.river.StopAndCancel(hctx)
			hcancel()
		}
	}
	if err := a.Services.Stop(sctx); err != nil {
		a.log.Warn("services stop", "error", err)
	}
	a.log.Info("stopped")
	return nil
}

// tuneGC trades memory the server does not use for collector time. The
// ingest allocates about as much as it reads (a batch body, its decoded
// events, their stored form) and keeps almost none of it, so with Go's
// default GOGC=100 the collector runs every few batches under load; 400
// runs it a quarter as often, for a heap of at most five times what is
// live (about 70 MB RSS under the feed's benchmark load). The soft limit
// makes the collector work harder instead once the heap nears 512 MiB, so
// a large live heap does not grow fivefold. An operator who sets GOGC or
// GOMEMLIMIT keeps their own.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(512 << 20)
	}
}
