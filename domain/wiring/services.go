package wiring

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/account"
	"anvil/domain/card"
	"anvil/domain/feed"
	"anvil/domain/incident"
	"anvil/domain/project"
	"anvil/domain/repourl"
	"anvil/domain/run"
	"anvil/domain/secret"
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
}

// NewServices wires the services. pool serves the live-events listener;
// UseJobs must still be called on the store once River's client exists,
// and Start before anything commits.
func NewServices(bdb *bun.DB, pool *pgxpool.Pool, keys *secret.Keyring, log *slog.Logger, o Options) *Services {
	s := domain.NewStore(bdb, keys, log)
	s.Pool = pool
	sv := &Services{Store: s, Accounts: account.NewAccounts(s), Projects: project.NewProjects(s), Queue: run.NewQueue(s, o.HeartbeatTimeout),
		Logs: run.NewLogs(s, o.LogMaxBytes), Hub: domain.NewHub(pool, s.Log), Feed: feed.NewFeed(s), Cards: card.NewCards(s), Audit: domain.NewAudit(s)}
	sv.Projects.SetCheckout(o.CheckoutPolicy, o.ProbeRepo)
	sv.Queue.SetLatestResolver(o.LatestCommit)
	sv.Webhooks = webhook.NewWebhooks(s, sv.Queue)
	sv.Incidents = incident.NewIncidents(s, sv.Queue)
	sv.Feed.OnQueued = sv.Incidents.RequestRepairs
	return sv
}

// Start starts the services' machinery: the live-event publisher, the
// feed's card-refresh requests and the queue's acceptance groups. Nothing
// of it starts by itself.
func (sv *Services) Start(ctx context.Context) {
	sv.Store.Start(ctx)
	sv.Feed.Start(ctx)
	sv.Queue.StartAccepting(ctx)
}

// Stop flushes and stops the machinery, each part after what feeds it:
// the acceptances waiting are stored (later ones are refused), the feed's
// pending card refreshes are enqueued, then the live events of every
// commit are sent. Call it after River's soft stop (no job commits
// any more) and before the pool closes; Stop twice is no error.
func (sv *Services) Stop(ctx context.Context) error {
	return errors.Join(sv.Queue.StopAccepting(ctx), sv.Feed.Stop(ctx), sv.Store.Stop(ctx))
}
