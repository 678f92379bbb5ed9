package alert_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/uptrace/bun"

	"anvil/db"
	"anvil/db/testdb"
	"anvil/domain"
	"anvil/domain/alert"
	"anvil/domain/feed"
	"anvil/domain/project"
	"anvil/domain/secret"
	"anvil/domain/wiring"
)

func TestMain(m *testing.M) { testdb.Main(m) }

func strp(s string) *string { return &s }

type testBundle struct {
	db     *db.DB
	sv     *wiring.Services
	alerts *alert.Service
	owner  *domain.Principal
	proj   *domain.Project
	sender *feed.FeedSender
}

func setup(t testing.TB) *testBundle {
	t.Helper()
	ctx := context.Background()
	d := testdb.New(t)
	keys, err := secret.NewKeyring(make([]byte, 32), nil)
	if err != nil {
		t.Fatal(err)
	}
	sv := wiring.NewServices(d, keys, nil, wiring.Options{PublicURL: "http://anvil.test"})
	_, err = sv.Start(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sv.Stop(context.Background()); err != nil {
			t.Errorf("stop the services: %v", err)
		}
	})
	b := &testBundle{db: d, sv: sv, alerts: sv.Alerts}
	b.alerts.SetAllowPrivate(true) // the receivers are httptest servers on 127.0.0.1
	res, err := sv.Accounts.Bootstrap(ctx, "acme", "owner@acme.test", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if b.owner, err = sv.Accounts.Authenticate(ctx, res.Token); err != nil {
		t.Fatal(err)
	}
	if b.proj, err = sv.Projects.Create(ctx, b.owner, project.ProjectInput{Slug: strp("shop"), RepoURL: strp("https://git.example/shop.git"),
		DefaultBranch: strp("main"), RunCommand: strp("make test")}); err != nil {
		t.Fatal(err)
	}
	if _, err := sv.Feed.PutBinding(ctx, b.owner, b.proj.ID, "production", domain.PolicyObserve); err != nil {
		t.Fatal(err)
	}
	_, tok, err := sv.Feed.CreateConnection(ctx, b.owner, b.proj.ID, "api")
	if err != nil {
		t.Fatal(err)
	}
	if b.sender, err = sv.Feed.Authenticate(ctx, tok); err != nil {
		t.Fatal(err)
	}
	return b
}

// receiver is a destination's server: it verifies the Standard Webhooks
// signature with the reference library and keeps what it received.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	bodies   [][]byte
	verified []error
	answer   func(n int) (int, http.Header)
	secret   string
}

func newReceiver(t testing.TB) *receiver {
	r := &receiver{answer: func(int) (int, http.Header) { return 200, nil }}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, body)
		n := len(r.bodies)
		if r.secret != "" {
			wh, err := standardwebhooks.NewWebhook(r.secret)
			if err == nil {
				err = wh.Verify(body, req.Header)
			}
			r.verified = append(r.verified, err)
		}
		r.mu.Unlock()
		code, h := r.answer(n)
		for k, v := range h {
			w.Header()[k] = v
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) received() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.bodies...)
}

func (b *testBundle) destination(t testing.TB, kind, url string) (uuid.UUID, string) {
	t.Helper()
	d, sec, err := b.alerts.Create(context.Background(), b.owner, alert.Input{Name: strp(kind + "-" + uuid.NewString()[:8]), Kind: strp(kind), URL: strp(url)})
	if err != nil {
		t.Fatal(err)
	}
	return d.ID, sec
}

func feedEvent(title string) json.RawMessage {
	raw, _ := json.Marshal(map[string]any{"schema_version": "1.0", "event_id": uuid.NewString(), "timestamp": time.Now().UTC().Format(time.RFC3339),
		"title": title, "level": "error", "environment": "production", "service": "api", "sdk": map[string]any{"name": "t"},
		"exception": map[string]any{"type": "E" + title, "message": "boom"}})
	return raw
}

func (b *testBundle) ingest(t testing.TB, raws ...json.RawMessage) {
	t.Helper()
	res, err := b.sv.Feed.Ingest(context.Background(), b.sender, "127.0.0.1", raws)
	if err != nil || len(res.Accepted) != len(raws) {
		t.Fatalf("ingest: %v %+v", err, res)
	}
}

type queued struct {
	ID      int64
	Args    alert.DeliverArgs
	Created time.Time
}

// jobs are the delivery jobs enqueued, oldest first.
func (b *testBundle) jobs(t testing.TB) []queued {
	t.Helper()
	var rows []struct {
		ID      int64     `bun:"id"`
		Args    []byte    `bun:"args"`
		Created time.Time `bun:"created_at"`
	}
	if err := b.db.Bun.NewRaw(`SELECT id, args, created_at FROM river_job WHERE kind = 'deliver_alert' ORDER BY id`).Scan(context.Background(), &rows); err != nil {
		t.Fatal(err)
	}
	var out []queued
	for _, r := range rows {
		q := queued{ID: r.ID, Created: r.Created}
		if err := json.Unmarshal(r.Args, &q.Args); err != nil {
			t.Fatal(err)
		}
		out = append(out, q)
	}
	return out
}

func kinds(qs []queued) map[string]int {
	m := map[string]int{}
	for _, q := range qs {
		m[q.Args.Alert]++
	}
	return m
}

func TestWebhookSignedAndVerifiedByTheReferenceLibrary(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rcv := newReceiver(t)
	_, sec := b.destination(t, alert.KindWebhook, rcv.URL)
	if len(sec) < 10 || sec[:6] != "whsec_" {
		t.Fatalf("secret %q", sec)
	}
	rcv.secret = sec
	b.ingest(t, feedEvent("Checkout crashed"))
	js := b.jobs(t)
	if len(js) != 1 || js[0].Args.Alert != domain.AlertIncidentNew {
		t.Fatalf("jobs: %+v", js)
	}
	if o := b.alerts.Deliver(context.Background(), js[0].Args, 1, js[0].Created); !o.Done {
		t.Fatalf("outcome %+v", o)
	}
	got := rcv.received()
	if len(got) != 1 || rcv.verified[0] != nil {
		t.Fatalf("received %d, verified %v", len(got), rcv.verified)
	}
	var m alert.Message
	if err := json.Unmarshal(got[0], &m); err != nil {
		t.Fatal(err)
	}
	if m.Type != domain.AlertIncidentNew || m.Data.Incident == nil || m.Data.Incident.Title != "Checkout crashed" ||
		m.Data.Incident.ShortID != "SHOP-1" || m.Data.Project.Slug != "shop" || m.Data.URL != "http://anvil.test/incidents/"+m.Data.Incident.ID.String() {
		t.Fatalf("message: %s", got[0])
	}
	// Tampered bodies fail the reference verification: our signature is real.
	wh, _ := standardwebhooks.NewWebhook(sec)
	h := http.Header{}
	sig, _ := alert.Sign(sec, "msg_x", time.Now(), []byte(`{"a":1}`))
	h.Set("webhook-id", "msg_x")
	h.Set("webhook-timestamp", jsonNum(time.Now().Unix()))
	h.Set("webhook-signature", sig)
	if err := wh.Verify([]byte(`{"a":1}`), h); err != nil {
		t.Fatalf("reference rejects our signature: %v", err)
	}
	if err := wh.Verify([]byte(`{"a":2}`), h); err == nil {
		t.Fatal("a tampered body verified")
	}
}

func jsonNum(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestSlackBody(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rcv := newReceiver(t)
	b.destination(t, alert.KindSlack, rcv.URL+"/services/T000/B000/XXXX")
	b.ingest(t, feedEvent("Cart empty"))
	js := b.jobs(t)
	if o := b.alerts.Deliver(context.Background(), js[0].Args, 1, js[0].Created); !o.Done {
		t.Fatalf("outcome %+v", o)
	}
	var body map[string]string
	if err := json.Unmarshal(rcv.received()[0], &body); err != nil {
		t.Fatal(err)
	}
	txt := body["text"]
	for _, want := range []string{"New incident", "shop", "production", "Cart empty", "1 events", "http://anvil.test/incidents/"} {
		if !contains(txt, want) {
			t.Errorf("slack text %q lacks %q", txt, want)
		}
	}
	if len(body) != 1 {
		t.Errorf("slack body has more than text: %v", body)
	}
}

// TestSlackBodyEscapesMarkup: an incident title from production input
// with Slack's control sequences — a channel-wide ping, a disguised link,
// an entity — reaches the channel as text: &, < and > escaped as Slack
// documents, and nothing of the title left unescaped.
func TestSlackBodyEscapesMarkup(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rcv := newReceiver(t)
	b.destination(t, alert.KindSlack, rcv.URL+"/services/T000/B000/XXXX")
	b.ingest(t, feedEvent("<!channel> log in at <https://evil.example|Re-login here> &amp; now"))
	js := b.jobs(t)
	if o := b.alerts.Deliver(context.Background(), js[0].Args, 1, js[0].Created); !o.Done {
		t.Fatalf("outcome %+v", o)
	}
	var body map[string]string
	if err := json.Unmarshal(rcv.received()[0], &body); err != nil {
		t.Fatal(err)
	}
	txt := body["text"]
	want := "&lt;!channel&gt; log in at &lt;https://evil.example|Re-login here&gt; &amp;amp; now"
	if !contains(txt, want) {
		t.Errorf("slack text %q lacks the escaped title %q", txt, want)
	}
	for _, bad := range []string{"<!channel>", "<https://evil.example", "Re-login here>", " &amp; now"} {
		if contains(txt, bad) {
			t.Errorf("slack text %q holds %q unescaped", txt, bad)
		}
	}
}

func contains(s, sub string) bool { return len(s) >= len(sub) && (s == sub || indexOf(s, sub) >= 0) }
func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// The fast path (new events) and the general path (a batch holding a
// resend) enqueue the same alerts for the same causes, once each.
func TestFastAndGeneralPathEnqueueTheSame(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.destination(t, alert.KindWebhook, "http://127.0.0.1:1/")
	first := feedEvent("A")
	b.ingest(t, first) // fast: a new incident
	fast := b.jobs(t)
	b.ingest(t, first, feedEvent("B")) // general: a resend and a new incident
	all := b.jobs(t)
	general := all[len(fast):]
	if len(fast) != 1 || len(general) != 1 || fast[0].Args.Alert != domain.AlertIncidentNew || general[0].Args.Alert != domain.AlertIncidentNew {
		t.Fatalf("fast %+v general %+v", fast, general)
	}
	// More events on known incidents cause nothing.
	b.ingest(t, feedEvent("A"), feedEvent("B"))
	if n := len(b.jobs(t)); n != 2 {
		t.Fatalf("%d jobs after events on known incidents", n)
	}
}

// Regression: a closed incident reopened by a new event, once per cause.
func TestRegressionFiresOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.destination(t, alert.KindWebhook, "http://127.0.0.1:1/")
	b.ingest(t, feedEvent("R"))
	if _, err := b.db.Bun.NewRaw(`UPDATE incidents SET status = 'CLOSED'`).Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.ingest(t, feedEvent("R"))
	b.ingest(t, feedEvent("R"))
	if k := kinds(b.jobs(t)); k[domain.AlertIncidentNew] != 1 || k[domain.AlertIncidentRegressed] != 1 {
		t.Fatalf("kinds %v", k)
	}
}

// Without destinations nothing is enqueued; a rule turned off sends nothing.
func TestRulesNarrow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.ingest(t, feedEvent("none"))
	if n := len(b.jobs(t)); n != 0 {
		t.Fatalf("%d jobs without destinations", n)
	}
	d1, _ := b.destination(t, alert.KindWebhook, "http://127.0.0.1:1/a")
	b.destination(t, alert.KindSlack, "http://127.0.0.1:1/b")
	b.ingest(t, feedEvent("both"))
	if n := len(b.jobs(t)); n != 2 {
		t.Fatalf("%d jobs for two destinations", n)
	}
	rules, err := b.alerts.PutRules(context.Background(), b.owner, b.proj.ID, []alert.Rule{{Kind: domain.AlertIncidentNew, Enabled: true, Destinations: []uuid.UUID{d1}}})
	if err != nil || len(rules) != len(domain.AlertKinds) {
		t.Fatalf("%v %+v", err, rules)
	}
	b.ingest(t, feedEvent("one"))
	js := b.jobs(t)
	if len(js) != 3 || js[2].Args.DestinationID != d1 {
		t.Fatalf("jobs %+v", js)
	}
	if _, err := b.alerts.PutRules(context.Background(), b.owner, b.proj.ID, []alert.Rule{{Kind: "nope", Enabled: true}}); err == nil {
		t.Fatal("an unknown kind was accepted")
	}
}

// A change rolled back enqueues nothing: the enqueue is in its transaction.
func TestRolledBackMoveSendsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.destination(t, alert.KindWebhook, "http://127.0.0.1:1/")
	ctx := context.Background()
	b.ingest(t, feedEvent("X"))
	before := len(b.jobs(t))
	var runID uuid.UUID
	_ = runID
	err := b.db.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := b.sv.Store.EnqueueAlerts(ctx, tx, []domain.AlertCause{{Kind: domain.AlertRepairNeedsHuman, OrgID: b.owner.OrgID, ProjectID: b.proj.ID, IncidentID: uuid.New()}}); err != nil {
			t.Fatal(err)
		}
		return sql.ErrTxDone // roll back
	})
	if err == nil {
		t.Fatal("expected the rollback's error")
	}
	if n := len(b.jobs(t)); n != before {
		t.Fatalf("a rolled-back change left %d jobs", n-before)
	}
}

func TestRetriesRetryAfterAndStops(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	rcv := newReceiver(t)
	codes := []int{503, 429, 404}
	rcv.answer = func(n int) (int, http.Header) {
		if n == 2 {
			return 429, http.Header{"Retry-After": {"7"}}
		}
		return codes[min(n-1, 2)], nil
	}
	id, _ := b.destination(t, alert.KindWebhook, rcv.URL)
	args := alert.DeliverArgs{DestinationID: id, Alert: alert.KindTest, OrgID: b.owner.OrgID, MessageID: "msg_t"}
	now := time.Now()
	if o := b.alerts.Deliver(ctx, args, 1, now); o.Retry == nil || o.Done || o.Stop != nil {
		t.Fatalf("503: %+v", o)
	}
	if o := b.alerts.Deliver(ctx, args, 2, now); o.Retry == nil || o.RetryAfter != 7*time.Second {
		t.Fatalf("429: %+v", o)
	}
	if o := b.alerts.Deliver(ctx, args, 3, now); o.Stop == nil {
		t.Fatalf("404: %+v", o)
	}
	// A network error is retried, until 24 h after the alert was caused.
	rcv.Close()
	if o := b.alerts.Deliver(ctx, args, 4, now); o.Retry == nil {
		t.Fatalf("network: %+v", o)
	}
	if o := b.alerts.Deliver(ctx, args, 5, now.Add(-25*time.Hour)); o.Stop == nil {
		t.Fatalf("after 24 h: %+v", o)
	}
	log, err := b.alerts.Deliveries(ctx, b.owner, id)
	if err != nil || len(log) != 5 {
		t.Fatalf("log %v %+v", err, log)
	}
	if log[4].StatusCode == nil || *log[4].StatusCode != 503 || log[4].Status != "failed" || log[4].LatencyMS == nil {
		t.Fatalf("first attempt logged as %+v", log[4])
	}
	if log[2].Error == "" || *log[2].StatusCode != 404 {
		t.Fatalf("404 logged as %+v", log[2])
	}
	// Failing for more than 24 h marks the destination.
	if _, err := b.db.Bun.NewRaw(`UPDATE alert_destinations SET failing_since = now() - interval '25 hours'`).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if d, _ := b.alerts.Get(ctx, b.owner, id); !d.Failing {
		t.Fatal("not marked failing")
	}
}

func TestStormFoldsBeyondTwentyAMinute(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	rcv := newReceiver(t)
	b.destination(t, alert.KindSlack, rcv.URL)
	// The bound counts clock minutes: one fixed instant keeps the 25 in one.
	at := time.Now()
	b.alerts.Now = func() time.Time { return at }
	for i := range 25 {
		b.ingest(t, feedEvent("storm "+jsonNum(int64(i))))
	}
	js := b.jobs(t)
	if len(js) != 25 {
		t.Fatalf("%d jobs", len(js))
	}
	for _, j := range js {
		if o := b.alerts.Deliver(ctx, j.Args, 1, j.Created); !o.Done {
			t.Fatalf("%+v", o)
		}
	}
	if n := len(rcv.received()); n != alert.PerMinute {
		t.Fatalf("%d sent in a minute", n)
	}
	if o := b.alerts.Digest(ctx, js[0].Args.DestinationID, 1, time.Now()); !o.Done {
		t.Fatalf("digest %+v", o)
	}
	got := rcv.received()
	if len(got) != alert.PerMinute+1 || !contains(string(got[len(got)-1]), "and 5 more") {
		t.Fatalf("digest: %s", got[len(got)-1])
	}
	var n int
	if err := b.db.Bun.NewRaw(`SELECT count(*) FROM river_job WHERE kind = 'alert_digest'`).Scan(ctx, &n); err != nil || n != 1 {
		t.Fatalf("digest jobs %d %v", n, err)
	}
}

// At most one alert per incident per kind per 10 minutes.
func TestOncePerIncidentKindPerWindow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.destination(t, alert.KindWebhook, "http://127.0.0.1:1/")
	ctx := context.Background()
	inc := uuid.New()
	for range 3 {
		if err := b.db.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			return b.sv.Store.EnqueueAlerts(ctx, tx, []domain.AlertCause{{Kind: domain.AlertRepairNeedsHuman, OrgID: b.owner.OrgID, ProjectID: b.proj.ID, IncidentID: inc}})
		}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(b.jobs(t)); n != 1 {
		t.Fatalf("%d jobs for one incident within the window", n)
	}
}
