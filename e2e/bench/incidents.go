package main

// The incidents' figures: the inbox's first page with 10,000 incidents (the real
// page, rendered by the real handler over HTTP with a session) and the
// production card's refresh for a project with 1,000 open incidents — on a
// database of their own, in process.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/uptrace/bun/dialect/pgdialect"

	"anvil/domain/account"
	"anvil/domain/card"
	"anvil/web"
)

func init() {
	register("incidents/inbox", benchInbox)
	register("incidents/card", benchCard)
}

// seedIncidents inserts n incidents spread over the given projects, with
// every status and a spread of last_seen, plus their creation transition.
func seedIncidents(ctx context.Context, qb *queueBench, projects []string, n int) error {
	_, err := qb.db.Bun.ExecContext(ctx, `INSERT INTO incidents (org_id, project_id, environment, fingerprint, title, exception_type,
			status, event_count, first_seen, last_seen, latest_event_id)
		SELECT ?, (?::uuid[])[1 + g % array_length(?::uuid[], 1)], CASE WHEN g % 5 = 0 THEN 'staging' ELSE 'production' END,
		       'fp-' || g, 'Error number ' || g || ' in Service' || (g % 37), 'E' || (g % 11),
		       (ARRAY['OBSERVED','TRIAGED','WAITING_APPROVAL','QUEUED','RUNNING','PR_OPEN','NEEDS_HUMAN','CLOSED','IGNORED'])[1 + g % 9],
		       1 + g % 50, now() - (g || ' minutes')::interval - interval '1 day', now() - (g || ' seconds')::interval, ''
		FROM generate_series(1, ?) AS g`, qb.owner.OrgID, pgdialect.Array(projects), pgdialect.Array(projects), n)
	return err
}

func benchInbox(ctx context.Context, env *benchEnv) error {
	qb, err := newQueueBench(ctx, env)
	if err != nil {
		return err
	}
	defer qb.db.Close()
	ids, err := qb.projects(ctx, 10)
	if err != nil {
		return err
	}
	var ps []string
	for _, id := range ids {
		ps = append(ps, id.String())
	}
	if err := seedIncidents(ctx, qb, ps, 10000); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	if _, err := qb.db.Bun.ExecContext(ctx, `ANALYZE incidents`); err != nil {
		return err
	}
	acc := account.NewAccounts(qb.store)
	cookie, _, err := acc.Login(ctx, "bench@anvil.test", "correct horse battery")
	if err != nil {
		return err
	}
	done := make(chan struct{})
	defer close(done)
	e := web.New(web.Deps{DB: qb.db, Services: qb.sv, Keys: qb.store.Keys, Done: done, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Options: web.Options{PublicURL: "http://bench.test"}})
	srv := httptest.NewServer(e)
	defer srv.Close()
	get := func(path string) (time.Duration, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
		req.AddCookie(&http.Cookie{Name: "anvil_session", Value: cookie})
		t0 := time.Now()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		d := time.Since(t0)
		if res.StatusCode != 200 {
			return 0, fmt.Errorf("GET %s: %d", path, res.StatusCode)
		}
		return d, nil
	}
	measure := func(path string, n int) ([]time.Duration, error) {
		for i := 0; i < 10; i++ { // warm up
			if _, err := get(path); err != nil {
				return nil, err
			}
		}
		var lat []time.Duration
		for i := 0; i < n; i++ {
			d, err := get(path)
			if err != nil {
				return nil, err
			}
			lat = append(lat, d)
		}
		return sortDurations(lat), nil
	}
	lat, err := measure("/inbox", 200)
	if err != nil {
		return err
	}
	env.note("incidents", "inbox_incidents", 10000)
	env.note("incidents", "inbox_first_page_p50_ms", ms(percentile(lat, 50)))
	env.report("incidents", "inbox_first_page_p95_ms", ms(percentile(lat, 95)), 100)
	lat, err = measure("/inbox?status=NEEDS_HUMAN&project="+ps[3], 100)
	if err != nil {
		return err
	}
	env.note("incidents", "inbox_filtered_p95_ms", ms(percentile(lat, 95)))
	return nil
}

func benchCard(ctx context.Context, env *benchEnv) error {
	qb, err := newQueueBench(ctx, env)
	if err != nil {
		return err
	}
	defer qb.db.Close()
	ids, err := qb.projects(ctx, 2)
	if err != nil {
		return err
	}
	// 1,000 open incidents on the measured project (2,000 seeded, half on
	// another project), so ~780 on the card plus CLOSED/IGNORED off it; then
	// top it up to exactly 1,000 open ones.
	if err := seedIncidents(ctx, qb, []string{ids[0].String()}, 1000); err != nil {
		return err
	}
	if _, err := qb.db.Bun.ExecContext(ctx, `UPDATE incidents SET status = 'TRIAGED' WHERE status IN ('CLOSED', 'IGNORED')`); err != nil {
		return err
	}
	if _, err := qb.db.Bun.ExecContext(ctx, `ANALYZE incidents`); err != nil {
		return err
	}
	cards := card.NewCards(qb.store)
	var lat []time.Duration
	for i := 0; i < 200; i++ {
		t0 := time.Now()
		if err := cards.Refresh(ctx, ids[0]); err != nil {
			return err
		}
		if i >= 10 {
			lat = append(lat, time.Since(t0))
		}
	}
	card, err := cards.Get(ctx, qb.owner.OrgID, ids[0])
	if err != nil {
		return err
	}
	if len(card.Incidents) != 1000 {
		return fmt.Errorf("card holds %d incidents, want 1000", len(card.Incidents))
	}
	sortDurations(lat)
	env.note("incidents", "card_incidents", float64(len(card.Incidents)))
	env.note("incidents", "card_refresh_p50_ms", ms(percentile(lat, 50)))
	env.report("incidents", "card_refresh_p95_ms", ms(percentile(lat, 95)), 20)
	return nil
}
