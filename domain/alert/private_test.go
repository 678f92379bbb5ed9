package alert_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"anvil/domain"
	"anvil/domain/alert"
)

// fakeResolver answers every name with one address (a name that resolves
// to a public address when saved, and to whatever it likes afterwards).
type fakeResolver struct{ addr string }

func (r fakeResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr(r.addr)}, nil
}

func code(err error) string {
	var de *domain.Error
	if errors.As(err, &de) {
		return de.Code
	}
	return ""
}

// Without ANVIL_ALERTS_ALLOW_PRIVATE a destination may not be, or resolve
// to, a loopback, private, link-local or unique-local address: refused at
// create and at change with private_destination, and nothing is stored.
func TestPrivateDestinationsRefusedWhenSaved(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	rcv := newReceiver(t)
	b.alerts.SetAllowPrivate(false)
	for _, u := range []string{rcv.URL, "http://localhost:8080/hook", "http://169.254.169.254/latest/meta-data", "https://10.1.2.3/x",
		"http://[::1]:9000/", "http://[fd00::1]/", "http://0.0.0.0/", "http://[::ffff:127.0.0.1]/"} {
		_, _, err := b.alerts.Create(ctx, b.owner, alert.Input{Name: strp("x"), Kind: strp(alert.KindWebhook), URL: strp(u)})
		if code(err) != "private_destination" || !strings.Contains(err.Error(), "ANVIL_ALERTS_ALLOW_PRIVATE=true") {
			t.Errorf("%s: %v (code %q)", u, err, code(err))
		}
	}
	if ds, err := b.alerts.List(ctx, b.owner); err != nil || len(ds) != 0 {
		t.Fatalf("refused destinations were stored: %v %+v", err, ds)
	}
	// A public address is accepted; changing it to a private one is not.
	b.alerts.Resolver = fakeResolver{"93.184.216.34"}
	d, _, err := b.alerts.Create(ctx, b.owner, alert.Input{Name: strp("pub"), Kind: strp(alert.KindSlack), URL: strp("https://hooks.example/services/T/B/X")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.alerts.Update(ctx, b.owner, d.ID, alert.Input{URL: strp("http://192.168.1.1/")}); code(err) != "private_destination" {
		t.Fatalf("change to a private address: %v", err)
	}
	if got, _ := b.alerts.Get(ctx, b.owner, d.ID); got.URLHint != "https://hooks.example/…" {
		t.Fatalf("the refused change was stored: %+v", got)
	}
	// Allowed, the same private addresses are accepted (the tests' receivers).
	b.alerts.SetAllowPrivate(true)
	if _, _, err := b.alerts.Create(ctx, b.owner, alert.Input{Name: strp("local"), Kind: strp(alert.KindWebhook), URL: strp(rcv.URL)}); err != nil {
		t.Fatalf("allowed: %v", err)
	}
}

// At delivery the address actually dialled is checked: a name that
// resolved to a public address when saved and resolves to loopback now
// (DNS rebinding; here localhost) is refused, and nothing is posted.
func TestPrivateDestinationsRefusedWhenDelivered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	rcv := newReceiver(t)
	b.alerts.SetAllowPrivate(false)
	b.alerts.Resolver = fakeResolver{"93.184.216.34"} // what the name "resolved to" when saved
	port := rcv.URL[strings.LastIndexByte(rcv.URL, ':'):]
	d, _, err := b.alerts.Create(ctx, b.owner, alert.Input{Name: strp("rebind"), Kind: strp(alert.KindWebhook), URL: strp("http://localhost" + port + "/hook")})
	if err != nil {
		t.Fatal(err)
	}
	args := alert.DeliverArgs{DestinationID: d.ID, Alert: alert.KindTest, OrgID: b.owner.OrgID, MessageID: "msg_rebind"}
	o := b.alerts.Deliver(ctx, args, 1, time.Now())
	if o.Stop == nil || !errors.Is(o.Stop, alert.ErrPrivateDestination) {
		t.Fatalf("delivery to localhost: %+v", o)
	}
	if n := len(rcv.received()); n != 0 {
		t.Fatalf("%d requests reached the private receiver", n)
	}
	log, err := b.alerts.Deliveries(ctx, b.owner, d.ID)
	if err != nil || len(log) != 1 || log[0].Status != "failed" || !strings.Contains(log[0].Error, "private address") {
		t.Fatalf("log %v %+v", err, log)
	}
	// A destination saved while private addresses were allowed is refused
	// once they are not.
	b.alerts.SetAllowPrivate(true)
	d2, _, err := b.alerts.Create(ctx, b.owner, alert.Input{Name: strp("direct"), Kind: strp(alert.KindSlack), URL: strp(rcv.URL)})
	if err != nil {
		t.Fatal(err)
	}
	b.alerts.SetAllowPrivate(false)
	args.DestinationID, args.MessageID = d2.ID, "msg_direct"
	if o := b.alerts.Deliver(ctx, args, 1, time.Now()); !errors.Is(o.Stop, alert.ErrPrivateDestination) {
		t.Fatalf("delivery to 127.0.0.1: %+v", o)
	}
	if n := len(rcv.received()); n != 0 {
		t.Fatalf("%d requests reached the private receiver", n)
	}
}

// A redirect is not followed (it could point anywhere): the attempt stops.
func TestRedirectsNotFollowed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	target := newReceiver(t)
	redirect := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusFound))
	t.Cleanup(redirect.Close)
	id, _ := b.destination(t, alert.KindWebhook, redirect.URL)
	o := b.alerts.Deliver(ctx, alert.DeliverArgs{DestinationID: id, Alert: alert.KindTest, OrgID: b.owner.OrgID, MessageID: "msg_r"}, 1, time.Now())
	if o.Stop == nil || o.Done {
		t.Fatalf("redirect: %+v", o)
	}
	if n := len(target.received()); n != 0 {
		t.Fatalf("the redirect was followed (%d requests)", n)
	}
}
