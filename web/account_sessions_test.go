package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// agent sends every request with a browser's User-Agent.
type agent struct{ ua string }

func (a agent) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("User-Agent", a.ua)
	return http.DefaultTransport.RoundTrip(r)
}

// Account → Sessions names each session's browser and device, and "End
// all other sessions" signs out every browser but this one.
func TestAccountSessionsNameTheDeviceAndEndTheOthers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	laptop := b.browser(t)
	laptop.c.Transport = agent{"Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"}
	laptop.login("owner@acme.test", testPassword)
	phone := b.browser(t)
	phone.c.Transport = agent{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1"}
	phone.login("owner@acme.test", testPassword)

	_, page := laptop.get("/settings/account")
	for _, want := range []string{`data-testid="session-device">Firefox 133 on Linux<`, `data-testid="session-device">Safari 17 on iOS<`, `data-testid="sessions-end-others"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the account page lacks %s", want)
		}
	}
	res, _ := laptop.post("/settings/account/sessions/end-others", url.Values{"_csrf": {laptop.csrf("/settings/account")}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("end others: %d", res.StatusCode)
	}
	if res, _ := laptop.get("/settings/account"); res.StatusCode != http.StatusOK {
		t.Fatalf("this browser was signed out too: %d", res.StatusCode)
	}
	if res, _ := phone.get("/settings/account"); res.StatusCode == http.StatusOK {
		t.Fatalf("the other browser is still signed in")
	}
	_, page = laptop.get("/settings/account")
	if n := strings.Count(page, `data-testid="session-row"`); n != 1 {
		t.Errorf("%d sessions left, want 1", n)
	}
}
