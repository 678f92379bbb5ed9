package jobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"anvil/domain/alert"
	"anvil/domain/mail/mailtest"
)

// An e-mail alert through real River and a real SMTP server that hangs on
// the first connection: the attempt times out, River retries after the
// back-off, and the second connection delivers; the log has both
// attempts, the last with the server's answer.
func TestEmailAlertRetriedAfterAHang(t *testing.T) {
	t.Parallel()
	srv := mailtest.Start(t, mailtest.Options{HangFirst: 1})
	b := setup(t, options{mode: "process", mail: srv.Config(t, 300*time.Millisecond)})
	ctx := context.Background()
	to := []string{"ops@acme.test"}
	d, _, err := b.services.Alerts.Create(ctx, b.owner, alert.Input{Name: strp("mail"), Kind: strp(alert.KindEmail), Recipients: &to})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.services.Alerts.Test(ctx, b.owner, d.ID); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := b.db.Bun.NewRaw(`SELECT id FROM river_job WHERE kind = 'deliver_alert'`).Scan(ctx, &id); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the retry to deliver", func() bool { s, _ := b.jobState(t, id); return s == "completed" })
	if _, errs := b.jobState(t, id); !strings.Contains(errs, "timed out") {
		t.Fatalf("the first attempt's error: %s", errs)
	}
	if len(srv.Messages()) != 1 || srv.Connections() != 2 {
		t.Fatalf("%d messages over %d connections", len(srv.Messages()), srv.Connections())
	}
	log, err := b.services.Alerts.Deliveries(ctx, b.owner, d.ID)
	if err != nil || len(log) != 2 || log[1].Error != "timed out" || log[0].Status != "delivered" || !strings.HasPrefix(log[0].Answer, "250") {
		t.Fatalf("log %v %+v", err, log)
	}
}

// An invitation made on a server with SMTP is mailed by its job: the
// invitee receives the link the inviter was shown, and the list says
// "sent". A refused invitation mail is not retried.
func TestInvitationMailed(t *testing.T) {
	t.Parallel()
	srv := mailtest.Start(t, mailtest.Options{TLS: true})
	b := setup(t, options{mode: "process", mail: srv.Config(t, 0)})
	ctx := context.Background()
	inv, tok, err := b.accounts.CreateInvitation(ctx, b.owner, "new@acme.test", "member")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the invitation to be mailed", func() bool { return len(srv.Messages()) == 1 })
	m := srv.Messages()[0]
	txt, err := m.Body("text/plain")
	if err != nil || !strings.Contains(txt, "/invite/"+tok) || !strings.Contains(txt, "owner@acme.test invites you to join") || m.To[0] != "new@acme.test" {
		t.Fatalf("mail to %v: %q %v", m.To, txt, err)
	}
	if html, _ := m.Body("text/html"); !strings.Contains(html, `href="/invite/`+tok+`"`) {
		t.Fatalf("html %q", html)
	}
	waitFor(t, 10*time.Second, "the status to say sent", func() bool {
		is, _ := b.accounts.ListInvitations(ctx, b.owner)
		return len(is) == 1 && is[0].ID == inv.ID && is[0].MailStatus == "sent"
	})
}

func TestInvitationMailRefused(t *testing.T) {
	t.Parallel()
	srv := mailtest.Start(t, mailtest.Options{RefuseRcpt: 550})
	b := setup(t, options{mode: "process", mail: srv.Config(t, 0)})
	ctx := context.Background()
	if _, _, err := b.accounts.CreateInvitation(ctx, b.owner, "gone@acme.test", "member"); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := b.db.Bun.NewRaw(`SELECT id FROM river_job WHERE kind = 'mail_invitation'`).Scan(ctx, &id); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the mail job to be cancelled", func() bool { s, _ := b.jobState(t, id); return s == "cancelled" })
	is, err := b.accounts.ListInvitations(ctx, b.owner)
	if err != nil || len(is) != 1 || !strings.HasPrefix(is[0].MailStatus, "refused: ") || !strings.Contains(is[0].MailStatus, "550") {
		t.Fatalf("%v %+v", err, is)
	}
}
