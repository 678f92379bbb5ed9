package domain

import (
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
}

// NewServices wires the services. pool serves the live-events listener;
// UseJobs must still be called on the store once River's client exists.
func NewServices(bdb *bun.DB, pool *pgxpool.Pool, keys *secret.Keyring, log *slog.Logger, o Options) *Services {
	s := NewStore(bdb, keys, log)
	s.Pool = pool
	sv := &Services{Store: s, Accounts: NewAccounts(s), Projects: NewProjects(s), Queue: NewQueue(s, o.HeartbeatTimeout),
		Logs: NewLogs(s, o.LogMaxBytes), Hub: NewHub(pool, s.Log), Feed: NewFeed(s), Cards: NewCards(s)}
	sv.Projects.SetCheckout(o.CheckoutPolicy, o.ProbeRepo)
	sv.Webhooks = NewWebhooks(s, sv.Queue)
	sv.Incidents = NewIncidents(s, sv.Queue)
	sv.Feed.OnQueued = sv.Incidents.RequestRepairs
	return sv
}
