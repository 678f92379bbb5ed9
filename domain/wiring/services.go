// Package wiring builds the domain: every capability service over one
// store, the alert hooks, River's client, and the machinery's Start and
// Stop. serve, worker, the admin commands and every test harness go through
// it, so they are wired alike (docs/architecture.md, "Packages and arrows").
// It is the one package that may import every capability package.
package wiring

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"

	"anvil/db"
	"anvil/domain"
	"anvil/domain/account"
	"anvil/domain/alert"
	"anvil/domain/card"
	"anvil/domain/erasure"
	"anvil/domain/feed"
	"anvil/domain/imagestore"
	"anvil/domain/incident"
	"anvil/domain/mail"
	"anvil/domain/monitor"
	"anvil/domain/network"
	"anvil/domain/project"
	"anvil/domain/release"
	"anvil/domain/repourl"
	"anvil/domain/retention"
	"anvil/domain/run"
	"anvil/domain/secret"
	"anvil/domain/sourcemap"
	"anvil/domain/webhook"
)

// Services is every domain service wired on one store: the one place that
// knows how they depend on each other (the command and every test harness
// build it the same way).
type Services struct {
	Store     *domain.Store
	Accounts  *account.Accounts
	Projects  *project.Projects
	Queue     *run.Queue
	Logs      *run.Logs
	Hub       *domain.Hub
	Webhooks  *webhook.Webhooks
	Feed      *feed.Feed
	Incidents *incident.Incidents
	Cards     *card.Cards
	Audit     *domain.Audit
	// Alerts turns changes into alert deliveries; NewServices installs its
	// hooks on the store and the queue.
	Alerts *alert.Service
	// Retention keeps what the policies say and counts the daily budgets.
	Retention *retention.Service
	// Erasure deletes projects and organisations (docs/erasure.md).
	Erasure *erasure.Service
	// Monitors are the cron monitors (docs/monitors.md).
	Monitors *monitor.Service
	// SourceMaps keeps uploaded source maps and symbolicates events at
	// ingest (docs/sourcemap.md).
	SourceMaps *sourcemap.Service
	// Releases is the releases and the fix chain (docs/releases.md).
	Releases *release.Releases
	// Fixes is the fix chain: merged and closed repairs, shipped, proven
	// and recurred fixes (docs/releases.md).
	Fixes *release.Fixes
	// Mailer sends mail through the operator's SMTP server; nil when
	// none is configured (docs/mail.md).
	Mailer *mail.Mailer
	// Network starts runs' egress proxies and keeps their connections
	// (docs/network.md).
	Network *network.Service
	// ImageStores is what the server knows of the workers' image stores,
	// and their clear (docs/images.md); each worker process runs its
	// Reporter.
	ImageStores *imagestore.Service

	db *db.DB
}

// Options tune the services.
type Options struct {
	HeartbeatTimeout time.Duration // the watchdog's timeout (default 60 s)
	LogMaxBytes      int64         // bound of one run's log (default 10 MiB)
	// CheckoutPolicy is applied to a repository address when a project is
	// saved (the zero value refuses local checkouts).
	CheckoutPolicy repourl.Policy
	// ProbeRepo, when set, checks at save that a repository answers.
	ProbeRepo project.RepoProber
	// LatestCommit, when set, resolves a default branch's head for "run
	// the latest commit".
	LatestCommit run.LatestResolver
	// PublicURL is the cockpit's address, for the links in alerts.
	PublicURL string
	// AlertsPerMinute bounds the alerts one destination receives in a
	// minute (0: alert.PerMinute).
	AlertsPerMinute int
	// AlertsAllowPrivate lets alert destinations reach loopback, private,
	// link-local and unique-local addresses (ANVIL_ALERTS_ALLOW_PRIVATE).
	AlertsAllowPrivate bool
	// EventRetention is the default age of stored feed events and the most
	// any policy may set (0: retention.DefaultEvents; docs/retention.md).
	EventRetention time.Duration
	// RetentionShare is the share of the time a clean-up spends deleting
	// (0: retention.DefaultShare).
	RetentionShare float64
	// SourceMapLimits bound uploads (zero fields: the defaults;
	// docs/sourcemap.md); SourceMapCache is the parsed maps' cache, bytes.
	SourceMapLimits sourcemap.Limits
	SourceMapCache  int64
	// RunsAllowPrivate lets runs' proxies reach loopback, private,
	// link-local and unique-local addresses (ANVIL_RUNS_ALLOW_PRIVATE).
	RunsAllowPrivate bool
	// RunsAllowLoopback lets them reach the worker's own loopback and
	// link-local addresses (ANVIL_RUNS_ALLOW_LOOPBACK).
	RunsAllowLoopback bool
	// MonitorsPerProject caps a project's monitors (0: monitor.DefaultPerProject).
	MonitorsPerProject int
	// Mail is the operator's SMTP server (ANVIL_SMTP_URL; docs/mail.md);
	// nil sends no mail: no e-mail alert destination, invitations only as
	// links.
	Mail *mail.Config
}

// NewServices wires the services on d, alerts included (d's pool also
// serves the live-events listener); Start must be called before anything commits (it
// gives the store River's client).
func NewServices(d *db.DB, keys *secret.Keyring, log *slog.Logger, o Options) *Services {
	s := domain.NewStore(d.Bun, keys, log)
	s.Pool = d.Pool
	sv := &Services{Store: s, Accounts: account.NewAccounts(s), Projects: project.NewProjects(s), Queue: run.NewQueue(s, o.HeartbeatTimeout),
		Logs: run.NewLogs(s, o.LogMaxBytes), Hub: domain.NewHub(d.Pool, s.Log), Feed: feed.NewFeed(s), Cards: card.NewCards(s), Audit: domain.NewAudit(s), db: d}
	sv.Projects.SetCheckout(o.CheckoutPolicy, o.ProbeRepo)
	sv.Queue.SetLatestResolver(o.LatestCommit)
	sv.Webhooks = webhook.NewWebhooks(s, sv.Queue)
	sv.Incidents = incident.NewIncidents(s, sv.Queue)
	sv.Feed.OnQueued = sv.Incidents.RequestRepairs
	sv.Alerts = alert.New(s, sv.Queue, o.PublicURL)
	if o.AlertsPerMinute > 0 {
		sv.Alerts.PerMinute = o.AlertsPerMinute
	}
	sv.Alerts.SetAllowPrivate(o.AlertsAllowPrivate)
	sv.Mailer = mail.New(o.Mail)
	sv.Alerts.Mail = sv.Mailer
	sv.Accounts.Mail, sv.Accounts.PublicURL = sv.Mailer, o.PublicURL
	sv.Retention = retention.New(s)
	sv.Erasure = erasure.New(s, sv.Queue, sv.Feed, sv.Webhooks)
	sv.Monitors = monitor.New(s, sv.Incidents, o.PublicURL)
	if o.MonitorsPerProject > 0 {
		sv.Monitors.PerProject = o.MonitorsPerProject
	}
	sv.SourceMaps = sourcemap.New(s, o.SourceMapLimits, o.SourceMapCache)
	sv.Feed.Symbolicate = sv.SourceMaps.Symbolicate
	sv.Retention.ExpireArtifacts = sv.SourceMaps.Expire
	sv.Releases = release.New(s)
	sv.Retention.ExpireReleases = sv.Releases.Expire
	sv.Fixes = release.NewFixes(s, sv.Incidents)
	sv.Fixes.AllowHTTPLinks = o.CheckoutPolicy.AllowLocal
	sv.Webhooks.OnDelivered = sv.Fixes.FromDelivery
	sv.Network = network.New(s)
	sv.ImageStores = imagestore.New(s)
	sv.Network.AllowPrivate = o.RunsAllowPrivate
	sv.Network.AllowLoopback = o.RunsAllowLoopback
	if o.EventRetention > 0 {
		sv.Retention.MaxEvents = o.EventRetention
	}
	if o.RetentionShare > 0 {
		sv.Retention.Share = o.RetentionShare
	}
	return sv
}

// Start creates River's client on the services' database with rc — its Workers registered by
// the caller (jobs.Register) in a process that works jobs, none in one that
// only inserts; nil is an inserting client —, hands it to the store, and
// starts the services' machinery: the live-event publisher, the feed's
// card-refresh requests and the queue's acceptance groups. Nothing of it
// starts by itself. Working jobs is River's client.Start, the caller's.
func (sv *Services) Start(ctx context.Context, rc *river.Config) (*river.Client[*sql.Tx], error) {
	if rc == nil {
		rc = &river.Config{}
	}
	client, err := river.NewClient(riverdatabasesql.NewWithPgxListener(sv.db.SQL, sv.db.Pool), rc)
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	sv.Store.UseJobs(client)
	sv.Store.Start(ctx)
	sv.Feed.Start(ctx)
	sv.Queue.StartAccepting(ctx)
	sv.Monitors.Start(ctx)
	return client, nil
}

// Stop flushes and stops the machinery, each part after what feeds it:
// the acceptances waiting are stored (later ones are refused), the feed's
// pending card refreshes are enqueued, then the live events of every
// commit are sent. Call it after River's soft stop (no job commits
// any more) and before the pool closes; Stop twice is no error.
func (sv *Services) Stop(ctx context.Context) error {
	return errors.Join(sv.Queue.StopAccepting(ctx), sv.Feed.Stop(ctx), sv.Monitors.Stop(ctx), sv.Store.Stop(ctx))
}

// Queues is River's queues in a process that works jobs: the short jobs,
// runs executions (runs at a time, ANVIL_RUN_CONCURRENCY) and alert
// deliveries.
func Queues(runs int) map[string]river.QueueConfig {
	return map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 10}, domain.RunsQueue: {MaxWorkers: runs}, alert.Queue: alert.QueueConfig}
}
