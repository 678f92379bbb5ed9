package domain

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/uptrace/bun"

	"anvil/domain/repourl"
	"anvil/domain/secret"
)

// Services is every domain service wired on one store: the one place that
// knows how they depend on each other (the command and every test harness
// build it the same way).
type Services struct {
	Store     *Store
	Accounts  *Accounts
	Projects  *Projects
	Queue     *Queue
	Logs      *Logs
	Hub       *Hub
	Webhooks  *Webhooks
	Feed      *Feed
	Incidents *Incidents
	Cards     *Cards
	Audit     *Audit
	Erasure   *Erasure
}

// Options tune the services.
type Options struct {
	HeartbeatTimeout time.Duration // the watchdog's timeout (default 60 s)
	LogMaxBytes      int64         // bound of one run's log (default 10 MiB)
	// CheckoutPolicy is applied to a repository address when a project is
	// saved (the zero value refuses local checkouts).
	CheckoutPolicy repourl.Policy
	// ProbeRepo, when set, checks at save that a repository answers.
	ProbeRepo RepoProber
	// LatestCommit, when set, resolves a default branch's head for "run
	// the latest commit".
	LatestCommit LatestResolver
}

// NewServices wires the services. pool serves the live-events listener;
// UseJobs must still be called on the store once River's client exists,
// and Start before anything commits.
func NewServices(bdb *bun.DB, pool *pgxpool.Pool, keys *secret.Keyring, log *slog.Logger, o Options) *Services {
	s := NewStore(bdb, keys, log)
	s.Pool = pool
	sv := &Services{Store: s, Accounts: NewAccounts(s), Projects: NewProjects(s), Queue: NewQueue(s, o.HeartbeatTimeout),
		Logs: NewLogs(s, o.LogMaxBytes), Hub: NewHub(pool, s.Log), Feed: NewFeed(s), Cards: NewCards(s), Audit: NewAudit(s)}
	sv.Projects.SetCheckout(o.CheckoutPolicy, o.ProbeRepo)
	sv.Queue.SetLatestResolver(o.LatestCommit)
	sv.Webhooks = NewWebhooks(s, sv.Queue)
	sv.Incidents = NewIncidents(s, sv.Queue)
	sv.Feed.OnQueued = sv.Incidents.RequestRepairs
	sv.Erasure = NewErasure(s, sv.Queue, sv.Feed, sv.Webhooks)
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
