package alert_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/alert"
	"anvil/domain/mail"
	"anvil/domain/mail/mailtest"
)

func (b *testBundle) emailDestination(t testing.TB, to ...string) uuid.UUID {
	t.Helper()
	d, sec, err := b.alerts.Create(context.Background(), b.owner, alert.Input{Name: strp("mail-" + uuid.NewString()[:8]), Kind: strp(alert.KindEmail), Recipients: &to})
	if err != nil {
		t.Fatal(err)
	}
	if sec != "" || d.Kind != alert.KindEmail || len(d.Recipients) != len(to) || d.URLHint != "" {
		t.Fatalf("created %+v, secret %q", d, sec)
	}
	return d.ID
}

// An incident's alert reaches every recipient through a real SMTP server
// over STARTTLS with a password: the subject names the alert, the
// incident's short id and its title; plain text and HTML carry the link;
// the delivery log keeps the server's answer.
func TestEmailAlertOfAnIncident(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := mailtest.Start(t, mailtest.Options{TLS: true, User: "anvil", Password: "hunter2-secret"})
	b.alerts.Mail = mail.New(srv.Config(t, 0))
	id := b.emailDestination(t, "ops@acme.test", "dev@acme.test")
	b.ingest(t, feedEvent("Cart <b>empty</b>"))
	js := b.jobs(t)
	if len(js) != 1 || js[0].Args.Alert != domain.AlertIncidentNew {
		t.Fatalf("jobs %+v", js)
	}
	if o := b.alerts.Deliver(context.Background(), js[0].Args, 1, js[0].Created); !o.Done {
		t.Fatalf("outcome %+v", o)
	}
	got := srv.Messages()
	if len(got) != 1 || strings.Join(got[0].To, ",") != "ops@acme.test,dev@acme.test" {
		t.Fatalf("received %+v", got)
	}
	if s := got[0].Header("Subject"); s != "[anvil] New incident: SHOP-1 Cart <b>empty</b>" {
		t.Errorf("subject %q", s)
	}
	link := "http://anvil.test/incidents/" + js[0].Args.IncidentID.String()
	txt, err := got[0].Body("text/plain")
	if err != nil || !strings.Contains(txt, link) || !strings.Contains(txt, "SHOP-1 Cart <b>empty</b>") || !strings.Contains(txt, "1 events") {
		t.Errorf("text %q %v", txt, err)
	}
	html, err := got[0].Body("text/html")
	if err != nil || !strings.Contains(html, `href="`+link+`"`) || !strings.Contains(html, "Cart &lt;b&gt;empty&lt;/b&gt;") || strings.Contains(html, "<b>empty") {
		t.Errorf("html %q %v", html, err)
	}
	log, err := b.alerts.Deliveries(context.Background(), b.owner, id)
	if err != nil || len(log) != 1 || log[0].Status != "delivered" || log[0].StatusCode == nil || *log[0].StatusCode != 250 ||
		!strings.HasPrefix(log[0].Answer, "250 ") {
		t.Fatalf("log %v %+v", err, log)
	}
}

// The test button's alert, a refusal (550: stopped, the server's words in
// the log), a 4xx and a server that hangs (both retried), and giving up
// after 24 h.
func TestEmailRefusedAndHanging(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ok := mailtest.Start(t, mailtest.Options{})
	b.alerts.Mail = mail.New(ok.Config(t, 0))
	id := b.emailDestination(t, "ops@acme.test")
	msg, err := b.alerts.Test(ctx, b.owner, id)
	if err != nil {
		t.Fatal(err)
	}
	args := alert.DeliverArgs{DestinationID: id, Alert: alert.KindTest, OrgID: b.owner.OrgID, MessageID: msg, Nonce: msg}
	now := time.Now()
	if o := b.alerts.Deliver(ctx, args, 1, now); !o.Done {
		t.Fatalf("test alert: %+v", o)
	}
	if m := ok.Messages(); len(m) != 1 || !strings.HasPrefix(m[0].Header("Subject"), "[anvil] Test alert for ") {
		t.Fatalf("test alert: %+v", m)
	}

	refusing := mailtest.Start(t, mailtest.Options{RefuseRcpt: 550})
	b.alerts.Mail = mail.New(refusing.Config(t, 0))
	if o := b.alerts.Deliver(ctx, args, 2, now); o.Stop == nil || o.Done || o.Retry != nil {
		t.Fatalf("550: %+v", o)
	}
	busy := mailtest.Start(t, mailtest.Options{RefuseRcpt: 451})
	b.alerts.Mail = mail.New(busy.Config(t, 0))
	if o := b.alerts.Deliver(ctx, args, 3, now); o.Retry == nil || o.Stop != nil {
		t.Fatalf("451: %+v", o)
	}
	hanging := mailtest.Start(t, mailtest.Options{Hang: true})
	b.alerts.Mail = mail.New(hanging.Config(t, 200*time.Millisecond))
	if o := b.alerts.Deliver(ctx, args, 4, now); o.Retry == nil || o.Stop != nil {
		t.Fatalf("hanging: %+v", o)
	}
	if o := b.alerts.Deliver(ctx, args, 5, now.Add(-25*time.Hour)); o.Stop == nil {
		t.Fatalf("after 24 h: %+v", o)
	}
	log, err := b.alerts.Deliveries(ctx, b.owner, id)
	if err != nil || len(log) != 5 {
		t.Fatalf("log %v %+v", err, log)
	}
	refused := log[3]
	if refused.Status != "failed" || refused.StatusCode == nil || *refused.StatusCode != 550 || !strings.Contains(refused.Error, "unavailable") ||
		!strings.Contains(refused.Error, "not retried") {
		t.Errorf("550 logged as %+v", refused)
	}
	if l := log[1]; l.Error != "timed out" || l.StatusCode != nil {
		t.Errorf("hang logged as %+v", l)
	}
	if d, _ := b.alerts.Get(ctx, b.owner, id); d.FailingSince == nil {
		t.Error("the destination is not marked failing")
	}
}

// Recipients are checked at create and change; an e-mail destination has
// no URL; none can be made on a server without SMTP.
func TestEmailDestinationInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	none := []string{}
	_, _, err := b.alerts.Create(ctx, b.owner, alert.Input{Name: strp("x"), Kind: strp(alert.KindEmail), Recipients: &[]string{"ops@acme.test"}})
	if codeOf(err) != "mail_not_configured" {
		t.Fatalf("without SMTP: %v", err)
	}
	srv := mailtest.Start(t, mailtest.Options{})
	b.alerts.Mail = mail.New(srv.Config(t, 0))
	many := make([]string, 21)
	for i := range many {
		many[i] = strings.Repeat("a", i+1) + "@acme.test"
	}
	for name, in := range map[string]alert.Input{
		"no recipients":  {Name: strp("x"), Kind: strp(alert.KindEmail), Recipients: &none},
		"missing":        {Name: strp("x"), Kind: strp(alert.KindEmail)},
		"bad address":    {Name: strp("x"), Kind: strp(alert.KindEmail), Recipients: &[]string{"ops@acme.test\r\nBcc: x@evil.test"}},
		"21 recipients":  {Name: strp("x"), Kind: strp(alert.KindEmail), Recipients: &many},
		"with a url":     {Name: strp("x"), Kind: strp(alert.KindEmail), Recipients: &[]string{"ops@acme.test"}, URL: strp("https://x.test/")},
		"webhook + rcpt": {Name: strp("x"), Kind: strp(alert.KindWebhook), URL: strp("https://x.test/"), Recipients: &[]string{"ops@acme.test"}},
	} {
		if _, _, err := b.alerts.Create(ctx, b.owner, in); !errors.Is(err, domain.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	id := b.emailDestination(t, "ops@acme.test")
	d, err := b.alerts.Update(ctx, b.owner, id, alert.Input{Recipients: &[]string{"a@acme.test", "b@acme.test"}})
	if err != nil || strings.Join(d.Recipients, ",") != "a@acme.test,b@acme.test" {
		t.Fatalf("update: %v %+v", err, d)
	}
	if _, err := b.alerts.Update(ctx, b.owner, id, alert.Input{URL: strp("https://x.test/")}); !errors.Is(err, domain.ErrInvalid) {
		t.Errorf("a url on an email destination: %v", err)
	}
}

func codeOf(err error) string {
	var de *domain.Error
	if errors.As(err, &de) {
		return de.Code
	}
	return ""
}

// The minute's digest reaches an e-mail destination as one message ("and
// N more"), and only then are the folded lines digested.
func TestEmailDigest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	srv := mailtest.Start(t, mailtest.Options{})
	b.alerts.Mail = mail.New(srv.Config(t, 0))
	id := b.emailDestination(t, "ops@acme.test")
	for i := range 3 {
		if _, err := b.db.Bun.NewRaw(`INSERT INTO alert_deliveries (destination_id, message_id, kind, status) VALUES (?, ?, 'incident.new', 'folded')`,
			id, "msg_folded_"+string(rune('a'+i))).Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if o := b.alerts.Digest(ctx, id, 1, time.Now()); !o.Done {
		t.Fatalf("digest: %+v", o)
	}
	got := srv.Messages()
	if len(got) != 1 || got[0].Header("Subject") != "[anvil] and 3 more alerts" || got[0].To[0] != "ops@acme.test" {
		t.Fatalf("received %+v", got)
	}
	var n int
	if err := b.db.Bun.NewRaw(`SELECT count(*) FROM alert_deliveries WHERE destination_id = ? AND status = 'folded'`, id).Scan(ctx, &n); err != nil || n != 0 {
		t.Fatalf("%d still folded (%v)", n, err)
	}
}
