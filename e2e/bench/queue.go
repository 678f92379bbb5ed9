package main

// The run queue's figures: acceptance throughput and latency across 100 projects
// with 8 concurrent callers, and promotion after a terminal report — the
// queue service itself, in process, on the bench database.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"anvil/db"
	"anvil/domain"
	"anvil/domain/project"
	"anvil/domain/run"
	"anvil/domain/secret"
	"anvil/domain/wiring"
)

func init() {
	register("queue/accept", benchAccept)
	register("queue/promotion", benchPromotion)
}

// queueBench is the domain wired on its own fresh database.
type queueBench struct {
	sv    *wiring.Services
	db    *db.DB
	store *domain.Store
	queue *run.Queue
	owner *domain.Principal
	river *river.Client[*sql.Tx]
}

func newQueueBench(ctx context.Context, env *benchEnv) (*queueBench, error) {
	url, err := env.newDatabase(ctx)
	if err != nil {
		return nil, err
	}
	d, err := db.Open(ctx, url, 20)
	if err != nil {
		return nil, err
	}
	if err := db.Migrate(ctx, d); err != nil {
		d.Close()
		return nil, err
	}
	keys, _ := secret.NewKeyring(make([]byte, 32), nil)
	sv := wiring.NewServices(d, keys, slog.New(slog.NewTextHandler(io.Discard, nil)), wiring.Options{})
	store := sv.Store
	client, err := sv.Start(ctx, nil)
	if err != nil {
		d.Close()
		return nil, err
	}
	acc := sv.Accounts
	res, err := acc.Bootstrap(ctx, "bench", "bench@anvil.test", "correct horse battery")
	if err != nil {
		d.Close()
		return nil, err
	}
	owner, err := acc.Authenticate(ctx, res.Token)
	if err != nil {
		d.Close()
		return nil, err
	}
	return &queueBench{sv: sv, db: d, store: store, queue: sv.Queue, owner: owner, river: client}, nil
}

// close stops the services (sending what they hold), then the pool.
func (q *queueBench) close() {
	_ = q.sv.Stop(context.Background())
	q.db.Close()
}

func (q *queueBench) projects(ctx context.Context, n int) ([]uuid.UUID, error) {
	ps := project.NewProjects(q.store)
	var ids []uuid.UUID
	for i := 0; i < n; i++ {
		slug := fmt.Sprintf("p%03d", i)
		repo, branch, cmd := "https://git.example/"+slug+".git", "main", "true"
		p, err := ps.Create(ctx, q.owner, project.ProjectInput{Slug: &slug, RepoURL: &repo, DefaultBranch: &branch, RunCommand: &cmd})
		if err != nil {
			return nil, err
		}
		ids = append(ids, p.ID)
	}
	return ids, nil
}

// drain cancels every queued run (untimed) so the next wave has room.
func (q *queueBench) drain(ctx context.Context) error {
	var ids []uuid.UUID
	if err := q.db.Bun.NewRaw(`SELECT id FROM project_runs WHERE position IS NOT NULL`).Scan(ctx, &ids); err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := q.queue.RequestCancel(ctx, q.owner, id); err != nil {
			return err
		}
	}
	return nil
}

// benchAccept: 8 callers accept manual runs round-robin over 100 projects,
// in waves of 100 × 20 (the cap), draining between waves untimed.
func benchAccept(ctx context.Context, env *benchEnv) error {
	qb, err := newQueueBench(ctx, env)
	if err != nil {
		return err
	}
	defer qb.close()
	projects, err := qb.projects(ctx, 100)
	if err != nil {
		return err
	}
	const callers, waves = 8, 3
	var lat []time.Duration
	var mu sync.Mutex
	var total time.Duration
	accepted := 0
	for wave := 0; wave < waves; wave++ {
		var next atomic.Int64
		var wg sync.WaitGroup
		errc := make(chan error, callers)
		start := time.Now()
		for c := 0; c < callers; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []time.Duration
				for {
					i := next.Add(1) - 1
					if i >= int64(len(projects)*run.MaxQueued) {
						break
					}
					t0 := time.Now()
					_, err := qb.queue.AcceptManual(ctx, qb.owner, projects[i%int64(len(projects))], "")
					if err != nil && !errors.Is(err, domain.ErrQueueFull) {
						errc <- err
						return
					}
					mine = append(mine, time.Since(t0))
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		total += time.Since(start)
		select {
		case err := <-errc:
			return err
		default:
		}
		accepted += len(projects) * run.MaxQueued
		if err := qb.drain(ctx); err != nil {
			return err
		}
	}
	sortDurations(lat)
	env.note("queue", "accepted_runs", float64(accepted))
	env.reportAtLeast("queue", "accept_runs_per_s", float64(accepted)/total.Seconds(), 2000)
	env.note("queue", "accept_p50_ms", ms(percentile(lat, 50)))
	env.report("queue", "accept_p99_ms", ms(percentile(lat, 99)), 20)
	return nil
}

// benchPromotion: the time from a terminal report to the commit that holds
// the next run's execute_run job (the report and the promotion are one
// transaction), over 300 reports.
func benchPromotion(ctx context.Context, env *benchEnv) error {
	qb, err := newQueueBench(ctx, env)
	if err != nil {
		return err
	}
	defer qb.close()
	projects, err := qb.projects(ctx, 10)
	if err != nil {
		return err
	}
	var lat []time.Duration
	for round := 0; round < 30; round++ {
		for _, pid := range projects {
			a, err := qb.queue.AcceptManual(ctx, qb.owner, pid, "")
			if err != nil {
				return err
			}
			b, err := qb.queue.AcceptManual(ctx, qb.owner, pid, "")
			if err != nil {
				return err
			}
			if _, _, err := qb.queue.Claim(ctx, a.ID, "bench"); err != nil {
				return err
			}
			if _, err := qb.queue.Start(ctx, a.ID, true); err != nil {
				return err
			}
			code := 0
			t0 := time.Now()
			if _, err := qb.queue.ReportTerminal(ctx, a.ID, run.TerminalReport{State: run.StatePassed, ExitCode: &code}); err != nil {
				return err
			}
			lat = append(lat, time.Since(t0))
			var jobID *int64
			if err := qb.db.Bun.NewRaw(`SELECT job_id FROM project_runs WHERE id = ? AND state = 'executable'`, b.ID).Scan(ctx, &jobID); err != nil || jobID == nil {
				return fmt.Errorf("next run not promoted with its job: %w", err)
			}
			if _, err := qb.queue.RequestCancel(ctx, qb.owner, b.ID); err != nil {
				return err
			}
		}
	}
	sortDurations(lat)
	env.note("queue", "promotion_p50_ms", ms(percentile(lat, 50)))
	env.report("queue", "promotion_p99_ms", ms(percentile(lat, 99)), 50)
	return nil
}
