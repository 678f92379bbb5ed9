package mail_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"anvil/domain/mail"
	"anvil/domain/mail/mailtest"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url, from, masked, err string
	}{
		{"", "", "(none)", ""},
		{"", "a@example.com", "", "ANVIL_SMTP_URL is not"},
		{"smtp://mail.example.com", "a@example.com", "smtp://mail.example.com:587", ""},
		{"smtps://bob:s3cret%2F@mail.example.com", "Anvil <a@example.com>", "smtps://bob:xxxxx@mail.example.com:465", ""},
		{"smtp://bob:s3cret@127.0.0.1:2525", "a@example.com", "smtp://bob:xxxxx@127.0.0.1:2525", ""},
		{"http://mail.example.com", "a@example.com", "", "must start with smtp://"},
		{"smtp://:pw@", "a@example.com", "", "no host"},
		{"smtp://bob:pw@mail.example.com:99999", "a@example.com", "", "invalid port"},
		{"smtp://bob:pw@mail.example.com/x?y", "a@example.com", "", "no path"},
		{"smtp://mail.example.com", "", "", "ANVIL_MAIL_FROM is required"},
		{"smtp://mail.example.com", "not an address", "", "not an e-mail"},
		{"smtp://bob:pw@[::1", "a@example.com", "", "not a URL"},
	} {
		c, err := mail.ParseURL(tc.url, tc.from)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.url, err, tc.err)
			}
			if err != nil && (strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), ":pw")) {
				t.Errorf("%q: the error shows the password: %v", tc.url, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.url, err)
			continue
		}
		if got := c.Masked(); got != tc.masked {
			t.Errorf("%q: masked %q, want %q", tc.url, got, tc.masked)
		}
	}
}

func TestCheckAddresses(t *testing.T) {
	t.Parallel()
	got, err := mail.CheckAddresses([]string{" ops@example.com", "OPS@example.com", "dev@shop.example"})
	if err != nil || len(got) != 2 || got[0] != "ops@example.com" || got[1] != "dev@shop.example" {
		t.Fatalf("got %q, %v", got, err)
	}
	for _, bad := range [][]string{
		nil, {""}, {"nobody"}, {"Ops <ops@example.com>"}, {"ops@example.com\r\nBcc: x@evil.example"},
		{"ops@localhost"}, {strings.Repeat("a", 250) + "@example.com"},
	} {
		if _, err := mail.CheckAddresses(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	many := make([]string, 21)
	for i := range many {
		many[i] = strings.Repeat("a", i+1) + "@example.com"
	}
	if _, err := mail.CheckAddresses(many); err == nil || !strings.Contains(err.Error(), "at most 20") {
		t.Errorf("21 recipients: %v", err)
	}
	if _, err := mail.CheckAddresses(many[:20]); err != nil {
		t.Errorf("20 recipients: %v", err)
	}
}

func message() mail.Message {
	return mail.Message{To: []string{"ops@example.com", "dev@example.com"}, Subject: "[anvil] SHOP-12: TypeError\r\nBcc: x@evil.example",
		Text: "TypeError in checkout\nhttps://anvil.example/incidents/SHOP-12", HTML: "<p>TypeError in <b>checkout</b></p>"}
}

// A message over STARTTLS, with a user and password, reaches the server
// whole: both recipients, the subject on one line, plain text and HTML; the
// reply is the server's answer.
func TestSendSTARTTLSWithAuth(t *testing.T) {
	t.Parallel()
	srv := mailtest.Start(t, mailtest.Options{TLS: true, User: "anvil", Password: "p4ss/word"})
	m := mail.New(srv.Config(t, 0))
	reply, err := m.Send(context.Background(), message())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(reply.Text, "250") {
		t.Errorf("reply %q", reply.Text)
	}
	got := srv.Messages()
	if len(got) != 1 || len(got[0].To) != 2 || got[0].From != "anvil@example.com" {
		t.Fatalf("received %+v", got)
	}
	if s := got[0].Header("Subject"); s != "[anvil] SHOP-12: TypeError Bcc: x@evil.example" {
		t.Errorf("subject %q", s)
	}
	if got[0].Header("Bcc") != "" {
		t.Error("a header was injected through the subject")
	}
	if txt, err := got[0].Body("text/plain"); err != nil || !strings.Contains(txt, "https://anvil.example/incidents/SHOP-12") {
		t.Errorf("text %q %v", txt, err)
	}
	if html, err := got[0].Body("text/html"); err != nil || !strings.Contains(html, "<b>checkout</b>") {
		t.Errorf("html %q %v", html, err)
	}
}

// smtps://: TLS from the first byte.
func TestSendImplicitTLS(t *testing.T) {
	t.Parallel()
	srv := mailtest.Start(t, mailtest.Options{Implicit: true, User: "anvil", Password: "pw"})
	if _, err := mail.New(srv.Config(t, 0)).Send(context.Background(), message()); err != nil {
		t.Fatal(err)
	}
	if len(srv.Messages()) != 1 {
		t.Fatal("not received")
	}
}

// A certificate the client does not trust stops the attempt before any
// credential is sent.
func TestSendUntrustedCertificate(t *testing.T) {
	t.Parallel()
	srv := mailtest.Start(t, mailtest.Options{TLS: true, User: "anvil", Password: "pw"})
	c := srv.Config(t, 0)
	c.TLS = nil
	_, err := mail.New(c).Send(context.Background(), message())
	var me *mail.Error
	if !errors.As(err, &me) || !strings.Contains(me.Text, "certificate") || !me.Temporary {
		t.Fatalf("%v", err)
	}
	if len(srv.Messages()) != 0 {
		t.Fatal("sent through an untrusted certificate")
	}
}

// A refusal (550) is permanent and carries the server's words; a 451 is
// temporary; a wrong password is a 535.
func TestSendRefused(t *testing.T) {
	t.Parallel()
	srv := mailtest.Start(t, mailtest.Options{RefuseRcpt: 550})
	_, err := mail.New(srv.Config(t, 0)).Send(context.Background(), message())
	var me *mail.Error
	if !errors.As(err, &me) || me.Code != 550 || me.Temporary || !strings.Contains(me.Text, "unavailable") {
		t.Fatalf("%#v", err)
	}
	srv = mailtest.Start(t, mailtest.Options{RefuseRcpt: 451})
	_, err = mail.New(srv.Config(t, 0)).Send(context.Background(), message())
	if !errors.As(err, &me) || me.Code != 451 || !me.Temporary {
		t.Fatalf("%#v", err)
	}
	srv = mailtest.Start(t, mailtest.Options{TLS: true, User: "anvil", Password: "right"})
	c := srv.Config(t, 0)
	c.Password = "wrong"
	_, err = mail.New(c).Send(context.Background(), message())
	if !errors.As(err, &me) || me.Code != 535 || me.Temporary || strings.Contains(me.Error(), "wrong") {
		t.Fatalf("%#v", err)
	}
}

// A server that accepts and never answers costs one timeout, and the
// failure is temporary.
func TestSendHangingServer(t *testing.T) {
	t.Parallel()
	srv := mailtest.Start(t, mailtest.Options{Hang: true})
	_, err := mail.New(srv.Config(t, 300*time.Millisecond)).Send(context.Background(), message())
	var me *mail.Error
	if !errors.As(err, &me) || me.Text != "timed out" || !me.Temporary || me.Code != 0 {
		t.Fatalf("%#v", err)
	}
	if srv.Connections() != 1 {
		t.Fatalf("%d connections", srv.Connections())
	}
}

// A password is never sent over a connection without TLS: the server
// offers only AUTH PLAIN and no STARTTLS, and the attempt stops with the
// reason (permanent: retrying changes nothing).
func TestSendNoPasswordInClear(t *testing.T) {
	t.Parallel()
	srv := mailtest.Start(t, mailtest.Options{User: "anvil", Password: "pw"})
	_, err := mail.New(srv.Config(t, 0)).Send(context.Background(), message())
	var me *mail.Error
	if !errors.As(err, &me) || me.Temporary || !strings.Contains(me.Text, "only over TLS") {
		t.Fatalf("%#v", err)
	}
	if len(srv.Messages()) != 0 {
		t.Fatal("sent")
	}
}

func TestNotConfigured(t *testing.T) {
	t.Parallel()
	var m *mail.Mailer
	if _, err := m.Send(context.Background(), message()); !errors.Is(err, mail.ErrNotConfigured) {
		t.Fatal(err)
	}
	if mail.New(nil) != nil {
		t.Fatal("a mailer without configuration")
	}
}
