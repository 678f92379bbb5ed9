package jobs_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/domain/alert"
	"anvil/internal/anviltest"
)

// alertReceiver is a destination's server: it keeps what it received and
// answers with answer(n), n counting from 1.
type alertReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	bodies  []string
	headers []http.Header
	answer  func(n int) int
}

func newAlertReceiver(t *testing.T, answer func(n int) int) *alertReceiver {
	t.Helper()
	r := &alertReceiver{answer: answer}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, string(body))
		r.headers = append(r.headers, req.Header.Clone())
		n := len(r.bodies)
		r.mu.Unlock()
		w.WriteHeader(r.answer(n))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *alertReceiver) received() ([]string, []http.Header) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...), append([]http.Header(nil), r.headers...)
}

// jobState reads a River job's state and its attempts' errors.
func (b *testBundle) jobState(t *testing.T, id int64) (state, errs string) {
	t.Helper()
	if err := b.db.Bun.NewRaw(`SELECT state::text, COALESCE(array_to_string(errors, ' '), '') FROM river_job WHERE id = ?`, id).
		Scan(context.Background(), &state, &errs); err != nil {
		t.Fatal(err)
	}
	return state, errs
}

// TestAlertDigestSurvivesAFailedFirstDelivery: three alerts folded for a
// destination; the digest's first delivery gets a 503, and River's retry
// of the job (real River, real Postgres, its own back-off) delivers
// "and 3 more" again, with the same message id: the failed attempt left
// the rows folded. Only the delivery digests them.
func TestAlertDigestSurvivesAFailedFirstDelivery(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	rcv := newAlertReceiver(t, func(n int) int {
		if n == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	b.services.Alerts.SetAllowPrivate(true) // the receiver is on 127.0.0.1
	d, _, err := b.services.Alerts.Create(ctx, b.owner, alert.Input{Name: strp("digest"), Kind: strp(alert.KindWebhook), URL: strp(rcv.URL + "/hook")})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := b.db.Bun.NewRaw(`INSERT INTO alert_deliveries (destination_id, message_id, kind, status) VALUES (?, ?, 'incident.new', 'folded')`,
			d.ID, "msg_folded_"+uuid.NewString()[:8]+string(rune('a'+i))).Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	res, err := b.river.Insert(ctx, alert.DigestArgs{DestinationID: d.ID}, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := res.Job.ID
	// River retries after NextRetry's 5 s; a short retry is made available
	// at once, scheduled for then.
	waitFor(t, 60*time.Second, "the retry to complete", func() bool { s, _ := b.jobState(t, id); return s == "completed" })
	if _, errs := b.jobState(t, id); !strings.Contains(errs, "HTTP 503") || strings.Count(errs, `"attempt"`) != 1 {
		t.Fatalf("the job's errors: %s, want the first attempt's 503 only", errs)
	}
	bodies, headers := rcv.received()
	if len(bodies) != 2 {
		t.Fatalf("the receiver got %d digests, want 2 (503, then the retry): %q", len(bodies), bodies)
	}
	for i, body := range bodies {
		var m struct {
			Type string `json:"type"`
			ID   string `json:"id"`
			Data struct {
				Folded int    `json:"folded"`
				Text   string `json:"text"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatal(err)
		}
		if m.Type != "digest" || m.Data.Folded != 3 || !strings.Contains(m.Data.Text, "and 3 more") {
			t.Errorf("attempt %d sent %s", i+1, body)
		}
		if m.ID != headers[i].Get("webhook-id") || headers[i].Get("webhook-id") != headers[0].Get("webhook-id") {
			t.Errorf("attempt %d: message id %q, webhook-id %q; the first %q", i+1, m.ID, headers[i].Get("webhook-id"), headers[0].Get("webhook-id"))
		}
	}
	var n int
	if err := b.db.Bun.NewRaw(`SELECT count(*) FROM alert_deliveries WHERE destination_id = ? AND status = 'folded'`, d.ID).Scan(ctx, &n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d rows still folded after the digest was delivered", n)
	}
}

// TestAlertCancelledDeliveryKeepsTheURLOut: a delivery refused because the
// destination now resolves to a private address is cancelled (River gets
// no more attempts), and neither River's record of the job
// (river_job.errors), nor the log, nor the delivery log holds the
// destination's URL, which is sealed at rest.
func TestAlertCancelledDeliveryKeepsTheURLOut(t *testing.T) {
	t.Parallel()
	var logBuf anviltest.SyncBuffer
	b := setup(t, options{log: slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	ctx := context.Background()
	rcv := newAlertReceiver(t, func(int) int { return http.StatusOK })
	const path = "/services/T000/B000/sealedPathToken42"
	b.services.Alerts.SetAllowPrivate(true) // saved while allowed …
	d, _, err := b.services.Alerts.Create(ctx, b.owner, alert.Input{Name: strp("sealed"), Kind: strp(alert.KindSlack), URL: strp(rcv.URL + path)})
	if err != nil {
		t.Fatal(err)
	}
	b.services.Alerts.SetAllowPrivate(false) // … delivered once the operator no longer allows it
	if _, err := b.services.Alerts.Test(ctx, b.owner, d.ID); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := b.db.Bun.NewRaw(`SELECT id FROM river_job WHERE kind = 'deliver_alert'`).Scan(ctx, &id); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the delivery to be cancelled", func() bool { s, _ := b.jobState(t, id); return s == "cancelled" })
	_, errs := b.jobState(t, id)
	if !strings.Contains(errs, "private") {
		t.Fatalf("river_job.errors does not say why: %s", errs)
	}
	waitFor(t, 10*time.Second, "River to log the cancellation", func() bool { return strings.Contains(logBuf.String(), "Job cancelled") })
	var logged string
	if err := b.db.Bun.NewRaw(`SELECT string_agg(error, ' ') FROM alert_deliveries WHERE destination_id = ?`, d.ID).Scan(ctx, &logged); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(rcv.URL, "http://")
	for what, text := range map[string]string{"river_job.errors": errs, "the log": logBuf.String(), "the delivery log": logged} {
		for _, leak := range []string{"sealedPathToken42", path, rcv.URL, host} {
			if i := strings.Index(text, leak); i >= 0 {
				t.Errorf("%s holds %q: …%s…", what, leak, text[max(0, i-200):min(len(text), i+200)])
			}
		}
	}
	if bodies, _ := rcv.received(); len(bodies) != 0 {
		t.Errorf("the private destination was reached: %q", bodies)
	}
}
