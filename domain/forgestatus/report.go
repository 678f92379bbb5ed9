package forgestatus

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/forgeapi"
	"anvil/domain/project"
	"anvil/domain/run"
)

// MaxInFlightPerHost bounds the posts one process has in flight to one
// forge host, so a burst of finished runs cannot trip a forge's secondary
// rate limits.
const MaxInFlightPerHost = 4

// leaseFor bounds how long one job may hold a run's report; a worker that
// died holding it is replaced after this.
const leaseFor = 2 * time.Minute

// maxRounds bounds the posts of one job: each round posts the run's state as
// it is then, until the forge shows the latest.
const maxRounds = 8

// ErrBusy means another job is posting this run's status right now; the
// caller tries again shortly, and will then post whatever is latest.
var ErrBusy = errors.New("forgestatus: another report of this run is in flight")

// Report is the last report of a run to its forge (run_forge_reports).
type Report struct {
	bun.BaseModel `bun:"table:run_forge_reports"`
	RunID         uuid.UUID  `bun:"run_id,pk,type:uuid" json:"-"`
	Provider      string     `bun:"provider" json:"provider"`
	AnvilStatus   string     `bun:"anvil_status" json:"run_status,omitempty"`
	State         string     `bun:"state" json:"state,omitempty"`
	Description   string     `bun:"description" json:"description,omitempty"`
	ReportedAt    *time.Time `bun:"reported_at" json:"reported_at,omitempty"`
	Error         string     `bun:"error" json:"error,omitempty"`
	NextAttemptAt *time.Time `bun:"next_attempt_at" json:"next_attempt_at,omitempty"`
	LeaseUntil    *time.Time `bun:"lease_until" json:"-"`
	UpdatedAt     time.Time  `bun:"updated_at" json:"updated_at"`
}

// ProviderName is the forge's name as people write it.
func ProviderName(p string) string { return forgeapi.ProviderName(p) }

// Last returns the run's last report, nil when nothing was reported.
func Last(ctx context.Context, db bun.IDB, runID uuid.UUID) (*Report, error) {
	r := new(Report)
	err := db.NewSelect().Model(r).Where("run_id = ?", runID).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("forgestatus: read report of %s: %w", runID, err)
	}
	if r.State == "" && r.Error == "" {
		return nil, nil // a lease taken, nothing posted yet
	}
	return r, nil
}

// Reporter posts runs' statuses. One per process: it holds the per-host
// semaphores and what each host said about its rate limit.
type Reporter struct {
	Store     *domain.Store
	Projects  *project.Projects
	PublicURL string
	HTTP      *http.Client

	mu    sync.Mutex
	hosts map[string]*host
}

type host struct {
	slots chan struct{}
	until time.Time // rate-limited until
}

// NewReporter builds the process's reporter; its client is the forges'
// confined one under the projects' checkout policy.
func NewReporter(s *domain.Store, ps *project.Projects, publicURL string) *Reporter {
	return &Reporter{Store: s, Projects: ps, PublicURL: strings.TrimRight(publicURL, "/"),
		HTTP: forgeapi.NewHTTPClient(ps.CheckoutPolicy())}
}

func (rp *Reporter) host(name string) *host {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.hosts == nil {
		rp.hosts = map[string]*host{}
	}
	h := rp.hosts[name]
	if h == nil {
		h = &host{slots: make(chan struct{}, MaxInFlightPerHost)}
		rp.hosts[name] = h
	}
	return h
}

func (rp *Reporter) limitedUntil(h *host) time.Time {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return h.until
}

func (rp *Reporter) limit(h *host, until time.Time) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if until.After(h.until) {
		h.until = until
	}
}

// Report posts the run's latest state to its project's forge, unless the
// forge already shows it. A run without a commit, or in a project without a
// forge, is not reported. Errors are *PostError (classified) or ErrBusy.
func (rp *Reporter) Report(ctx context.Context, runID uuid.UUID) error {
	db := rp.Store.DB
	run := new(run.Run)
	if err := db.NewSelect().Model(run).Where("id = ?", runID).Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	}
	if run.CommitSHA == nil {
		return nil
	}
	proj := new(domain.Project)
	if err := db.NewSelect().Model(proj).ModelTableExpr(domain.AllProjects+" AS project").Where("id = ?", run.ProjectID).Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	}
	if proj.Provider == "" {
		return nil
	}
	token, err := rp.Projects.ProviderToken(proj)
	if err != nil {
		return &PostError{Err: errors.New("the project's provider token cannot be decrypted")}
	}
	f := Forge{Provider: proj.Provider, APIURL: proj.ProviderAPIURL, Repo: proj.ProviderRepo, Token: token}

	posted := new(Report)
	now := rp.Store.Now()
	err = db.NewRaw(`INSERT INTO run_forge_reports (run_id, provider, lease_until) VALUES (?, ?, ?)
		ON CONFLICT (run_id) DO UPDATE SET lease_until = EXCLUDED.lease_until, provider = EXCLUDED.provider
		WHERE run_forge_reports.lease_until IS NULL OR run_forge_reports.lease_until < ?
		RETURNING *`, runID, f.Provider, now.Add(leaseFor), now).Scan(ctx, posted)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrBusy
	}
	if err != nil {
		return fmt.Errorf("forgestatus: lease report of %s: %w", runID, err)
	}
	defer func() {
		_, _ = db.NewRaw(`UPDATE run_forge_reports SET lease_until = NULL WHERE run_id = ?`, runID).Exec(context.WithoutCancel(ctx))
	}()

	h := rp.host(f.Host())
	for round := 0; round < maxRounds; round++ {
		// Read under the lease, the first round too: a state read before
		// it may be older than what the lease's last holder posted, and
		// posting it would move the forge back (a "running" after the
		// "success").
		if err := db.NewSelect().Model(run).Where("id = ?", runID).Scan(ctx); err != nil {
			return err
		}
		facts, err := rp.facts(ctx, run)
		if err != nil {
			return err
		}
		st := Status{SHA: *run.CommitSHA, State: ForgeState(f.Provider, run), Description: Describe(run, facts),
			Context: domain.StatusContextOf(proj), TargetURL: rp.PublicURL + "/runs/" + run.ID.String()}
		// GitLab refuses a transition to the state it already has; the
		// others take it, but a repeat says nothing new.
		if st.State == posted.State && (f.Provider == "gitlab" || st.Description == posted.Description) {
			return nil
		}
		if until := rp.limitedUntil(h); until.After(rp.Store.Now()) {
			perr := &PostError{Transient: true, RetryAt: until, Err: fmt.Errorf("%s is rate-limiting anvil", ProviderName(f.Provider))}
			return rp.failed(ctx, runID, perr, &until)
		}
		select {
		case h.slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		err = Post(ctx, rp.HTTP, f, st, rp.Store.Now())
		<-h.slots
		if err != nil {
			var pe *PostError
			if !errors.As(err, &pe) {
				pe = &PostError{Transient: true, Err: err}
			}
			var next *time.Time
			if !pe.RetryAt.IsZero() {
				rp.limit(h, pe.RetryAt)
				next = &pe.RetryAt
			}
			return rp.failed(ctx, runID, pe, next)
		}
		at := rp.Store.Now()
		posted.State, posted.Description, posted.AnvilStatus = st.State, st.Description, run.Status()
		if _, err := db.NewRaw(`UPDATE run_forge_reports SET anvil_status = ?, state = ?, description = ?, reported_at = ?,
			error = '', next_attempt_at = NULL, updated_at = ? WHERE run_id = ?`,
			posted.AnvilStatus, st.State, st.Description, at, at, runID).Exec(ctx); err != nil {
			return fmt.Errorf("forgestatus: record report of %s: %w", runID, err)
		}
	}
	return nil
}

// failed records a failed post for the run page and hands the error on.
func (rp *Reporter) failed(ctx context.Context, runID uuid.UUID, pe *PostError, next *time.Time) error {
	msg := pe.Error()
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	_, err := rp.Store.DB.NewRaw(`UPDATE run_forge_reports SET error = ?, next_attempt_at = ?, updated_at = ? WHERE run_id = ?`,
		msg, next, rp.Store.Now(), runID).Exec(context.WithoutCancel(ctx))
	if err != nil {
		return fmt.Errorf("forgestatus: record failed report of %s: %w", runID, err)
	}
	return pe
}

// RetryAt records when the job will try again (River's back-off), so the
// run page can say it.
func (rp *Reporter) RetryAt(ctx context.Context, runID uuid.UUID, at time.Time) {
	_, _ = rp.Store.DB.NewRaw(`UPDATE run_forge_reports SET next_attempt_at = ? WHERE run_id = ? AND error <> ''`, at, runID).Exec(ctx)
}

// GiveUp records that the job stopped trying.
func (rp *Reporter) GiveUp(ctx context.Context, runID uuid.UUID) {
	_, _ = rp.Store.DB.NewRaw(`UPDATE run_forge_reports SET next_attempt_at = NULL WHERE run_id = ?`, runID).Exec(ctx)
}

func (rp *Reporter) facts(ctx context.Context, r *run.Run) (Facts, error) {
	var f Facts
	db := rp.Store.DB
	switch {
	case r.Status() == run.StatusQueued && r.Position != nil:
		if err := db.NewRaw(`SELECT count(*) FROM project_runs WHERE project_id = ? AND state IN ('pending', 'executable') AND position <= ?`,
			r.ProjectID, *r.Position).Scan(ctx, &f.InLine); err != nil {
			return f, err
		}
	case r.Status() == run.StatusFailed && r.PipelineFile != nil:
		err := db.NewRaw(`SELECT key FROM run_steps WHERE run_id = ? AND status = 'failed' AND NOT ignored
			ORDER BY finished_at, idx LIMIT 1`, r.ID).Scan(ctx, &f.FailedStep)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return f, err
		}
	case r.Status() == run.StatusCanceled && r.CanceledBy != nil:
		err := db.NewRaw(`SELECT email FROM users WHERE id = ?`, *r.CanceledBy).Scan(ctx, &f.CanceledBy)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return f, err
		}
	}
	return f, nil
}
