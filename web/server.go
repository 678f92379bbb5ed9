// Package web is anvil's HTTP tier: routing, middleware, the cockpit's pages
// (templ + htmx), the private JSON API and the public ingest endpoints.
// Handlers are small methods on Server; every rule lives in domain.
package web

import (
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"anvil/db"
	"anvil/domain/alert"
	"anvil/domain/feedstats"
	"anvil/domain/image"
	"anvil/domain/retention"
	"anvil/domain/secret"
	"anvil/domain/wiring"
	"anvil/static"
)

// Options are the parts of the configuration the web tier needs.
type Options struct {
	PublicURL      string // e.g. https://anvil.example.com; cookies are Secure when it is https
	SecureCookies  bool
	FeedArmed      bool           // the feed endpoints exist only when true
	FeedMaxBody    int            // bytes
	FeedMaxBatch   int            // events per batch
	FeedRatePerMin int            // requests per connection per fixed 60 s window
	TrustedProxies []netip.Prefix // whose X-Forwarded-For is believed
	BodyTimeout    time.Duration  // how long a request body may take to arrive; DefaultBodyTimeout when 0

	// FeedMaxEnvelope bounds a Sentry door body after decompression
	// (bytes; 1 MiB when zero).
	FeedMaxEnvelope int
	// FeedBrowserRatePerMin bounds a browser connection's events per client
	// address per fixed 60 s window (60 when zero; feed_browser_doors.go).
	FeedBrowserRatePerMin int
	// RunCacheMaxBytes is the bound of each project's cache, shown on its
	// page (ANVIL_RUN_CACHE_MB; docs/caches.md). 0: caches are off.
	RunCacheMaxBytes int64
	// RequestLogLevel is the level of the "http request" line of a request
	// answered without an error (info when zero). `anvil dev` logs them at
	// debug: in a terminal, a line per request buries everything else.
	RequestLogLevel slog.Level
}

// Server holds the dependencies of every handler.
type Server struct {
	*wiring.Services
	db      *db.DB
	keys    *secret.Keyring
	log     *slog.Logger
	metrics *Metrics
	images  *image.Store
	opts    Options
	done    <-chan struct{}
	logins  loginLimiter

	// outcomes counts what the feed's doors answered, per connection.
	outcomes *feedstats.Recorder
	// addrLim bounds browser connections per client address.
	addrLim *addrLimiter

	alerts *alert.Service
	// retention holds the policies and the feed's daily budget.
	retention *retention.Service
}

// Deps are what New needs.
type Deps struct {
	DB       *db.DB
	Services *wiring.Services
	Keys     *secret.Keyring
	Log      *slog.Logger
	Metrics  *Metrics
	Options  Options
	// Images is this host's image store when the process runs workers
	// (docs/images.md); nil: the settings page says images live on the
	// workers.
	Images *image.Store
	// Done is closed when the server shuts down, ending live streams
	// (http.Server.Shutdown waits for them otherwise).
	Done <-chan struct{}
}

func newServer(d Deps) *Server {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Metrics == nil {
		d.Metrics = NewMetrics(d.DB)
	}
	return &Server{Services: d.Services, db: d.DB, keys: d.Keys, log: d.Log, metrics: d.Metrics, opts: d.Options, done: d.Done,
		alerts: d.Services.Alerts, retention: d.Services.Retention, images: d.Images}
}

func (s *Server) base() *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	e.Use(s.requestID, s.recover, s.securityHeaders, s.observe, s.bodyDeadline)
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", echo.WrapHandler(s.metrics.Handler()))
	return e
}

// NewOps serves only /healthz, /readyz and /metrics: the worker's listener.
func NewOps(d Deps) *echo.Echo { return newServer(d).base() }

// New builds the whole cockpit.
func New(d Deps) *echo.Echo {
	s := newServer(d)
	e := s.base()
	e.GET("/static/*", staticFiles())
	e.GET("/favicon.ico", echo.WrapHandler(static.Favicon()))

	// Pages: a session (or a redirect to /login), CSRF on every write.
	pages := e.Group("", s.authenticate, s.requirePage, s.requireCSRF, s.requireRouteRole)
	// Private API: a bearer token, or the session plus the CSRF token.
	api := e.Group("/api/private", s.authenticate, s.requireAPI, s.requireCSRF, s.requireRouteRole)

	// The cockpit's shell: the dashboard and the live events of every page.
	pages.GET("/", s.dashboard)
	pages.GET("/events", s.events)

	// One registration per capability (web/<capability>_routes.go); public
	// endpoints that authenticate themselves go on e.
	s.registerAccounts(e, pages, api)
	s.registerProjects(e, pages, api)
	s.registerRuns(e, pages, api)
	s.registerRunSecrets(e, pages, api)
	s.registerRunCaches(e, pages, api)
	s.registerWebhooks(e, pages, api)
	s.registerFeed(e, pages, api)
	s.registerIncidents(e, pages, api)
	s.registerCards(e, pages, api)
	s.registerAlerts(e, pages, api)
	s.registerRetention(pages, api)
	s.registerErasure(pages, api)
	s.registerMonitors(e, pages, api)
	s.registerSourceMaps(e, api)
	s.registerReleases(pages, api)
	s.registerSentryReleases(e)
	s.registerImages(pages, api)

	// A group with middleware claims every unknown path under its prefix, so
	// that its middleware runs: an anonymous GET /no/such/page was sent to
	// the login page. Unknown paths are a 404 for everybody instead; known
	// pages still send anonymous visitors to the login.
	e.RouteNotFound("/*", s.notFound)
	e.RouteNotFound("/api/private", s.notFound)
	e.RouteNotFound("/api/private/*", s.notFound)
	return e
}

// notFound answers a path no route claims: JSON under /api/, a page
// otherwise. The session is looked up (best effort) only so that a signed-in
// visitor's error page keeps its navigation.
func (s *Server) notFound(c echo.Context) error {
	if !strings.HasPrefix(c.Request().URL.Path, "/api/") {
		_ = s.authenticate(func(echo.Context) error { return nil })(c)
	}
	return echo.ErrNotFound
}
