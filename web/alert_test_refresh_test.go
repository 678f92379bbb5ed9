package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// After "Send a test alert" the destination's deliveries refetch
// themselves until the test's line is there, then stop: the answer shows
// without a reload.
func TestAlertDeliveriesRefreshAfterATest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	b.services.Alerts.SetAllowPrivate(true)
	csrf := br.csrf("/settings/alerts")
	if st, out := b.api(t, b.owner.Token, "POST", "/api/private/alerts/destinations", map[string]any{"name": "team", "kind": "webhook", "url": "http://127.0.0.1:9/hook"}); st != http.StatusCreated {
		t.Fatalf("create: %d %v", st, out)
	}
	var dest string
	if err := b.db.Bun.NewRaw(`SELECT id::text FROM alert_destinations WHERE name = 'team'`).Scan(context.Background(), &dest); err != nil {
		t.Fatal(err)
	}
	res, _ := br.post("/settings/alerts/"+dest+"/test", url.Values{"_csrf": {csrf}})
	loc, err := res.Location()
	if res.StatusCode != http.StatusSeeOther || err != nil {
		t.Fatalf("test: %d %v", res.StatusCode, err)
	}
	_, page := br.get(loc.RequestURI())
	if !strings.Contains(page, `data-testid="alert-test-waiting"`) || !strings.Contains(page, `hx-trigger="every 1s"`) {
		t.Fatalf("after the test the page does not wait for its line:\n%s", page)
	}
	msg := loc.Query().Get("msg")
	part := "/settings/alerts?part=deliveries&destination=" + dest + "&" + loc.RawQuery
	if _, frag := br.get(part); !strings.Contains(frag, `hx-trigger="every 1s"`) || strings.Contains(frag, "<html") {
		t.Fatalf("the deliveries part before the answer:\n%s", frag)
	}
	// The worker delivers (here: its line written as it writes it).
	if _, err := b.db.Bun.NewRaw(`INSERT INTO alert_deliveries (destination_id, message_id, kind, status, status_code, attempt)
		VALUES (?, ?, 'test', 'delivered', 200, 1)`, dest, msg).Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, frag := br.get(part)
	if strings.Contains(frag, "hx-trigger") || !strings.Contains(frag, `data-testid="alert-delivery"`) {
		t.Fatalf("the deliveries part after the answer still polls or lacks the line:\n%s", frag)
	}
}
