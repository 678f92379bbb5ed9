// Package web is anvil's HTTP tier: routing, middleware, the cockpit's pages
// (templ + htmx), the private JSON API and the public ingest endpoints.
// Handlers are small methods on Server; every rule lives in domain.
package web

import (
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"anvil/db"
	"anvil/domain"
	"anvil/domain/alert"
	"anvil/domain/feedstats"
	"anvil/domain/secret"
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
}

// Server holds the dependencies of every handler.
type Server struct {
	*domain.Services
	db      *db.DB
	keys    *secret.Keyring
	log     *slog.Logger
	metrics *Metrics
	opts    Options
	done    <-chan struct{}
	logins  loginLimiter

	// outcomes counts what the feed's doors answered, per connection.
	outcomes *feedstats.Recorder

	alerts *alert.Service
}

// Deps are what New needs.
type Deps struct {
	DB       *db.DB
	Services *domain.Services
	Keys     *secret.Keyring
	Log      *slog.Logger
	Metrics  *Metrics
	Options  Options
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
		alerts: alert.For(d.Services, d.Options.PublicURL)}
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
	e.GET("/static/*", echo.WrapHandler(http.StripPrefix("/static/", static.Handler())))
	e.GET("/favicon.ico", echo.WrapHandler(static.Favicon()))

	// Pages: a session (or a redirect to /login), CSRF on every write.
	e.GET("/login", s.loginPage, s.anonymousCSRF)
	e.POST("/login", s.loginSubmit, s.anonymousCSRF)
	pages := e.Group("", s.authenticate, s.requirePage, s.requireCSRF, s.requireRouteRole)
	pages.POST("/logout", s.logout)
	pages.GET("/", s.dashboard)
	pages.GET("/inbox", s.inbox)
	pages.GET("/projects", s.projectsPage)
	pages.GET("/projects/new", s.projectNewPage)
	pages.POST("/projects", s.projectCreateSubmit)
	pages.GET("/projects/:projectId", s.projectPage)
	pages.GET("/projects/:projectId/edit", s.projectEditPage)
	pages.POST("/projects/:projectId/edit", s.projectEditSubmit)
	pages.POST("/projects/:projectId/runs", s.runNowSubmit)
	pages.GET("/projects/:projectId/queue", s.projectQueueFragment)
	pages.GET("/runs/:runId", s.runPage)
	pages.GET("/runs/:runId/log.txt", s.runLogText)
	pages.GET("/events", s.events)
	pages.POST("/runs/:runId/cancel", s.runCancelSubmit)
	pages.GET("/settings", s.settingsPage)
	pages.POST("/settings/tokens", s.tokenCreateSubmit)
	pages.POST("/settings/tokens/:tokenId/revoke", s.tokenRevokeSubmit)

	// Private API: a bearer token, or the session plus the CSRF token.
	api := e.Group("/api/private", s.authenticate, s.requireAPI, s.requireCSRF, s.requireRouteRole)
	api.GET("/projects", s.apiProjectList)
	api.POST("/projects", s.apiProjectCreate)
	api.GET("/projects/:projectId", s.apiProjectGet)
	api.PATCH("/projects/:projectId", s.apiProjectUpdate)
	api.GET("/projects/:projectId/queue", s.apiQueue)
	api.POST("/projects/:projectId/runs", s.apiRunCreate)
	api.GET("/runs/:runId", s.apiRunGet)
	api.POST("/runs/:runId/cancel", s.apiRunCancel)
	api.GET("/runs/:runId/logs", s.apiRunLogs)

	s.registerWebhooks(e, pages, api)
	s.registerFeed(e, pages, api)
	s.registerIncidents(e, pages, api)
	s.registerTeams(e, pages, api)
	s.registerAlerts(api)
	s.registerAlertPages(pages)
	s.registerCI(e, pages, api)
	s.registerErasure(pages, api)

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
