package egress_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"anvil/domain/internal/egress"
)

// The confined client: a private address is refused at dial time (with the
// caller's sentinel), reached once the switch is on (read at every dial);
// a redirect is the answer; no proxy is taken from the environment.
func TestConfinedClient(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/away" {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	var allow atomic.Bool
	refused := errors.New("refused for the test")
	c := egress.NewClient(egress.Options{AllowPrivate: allow.Load, Refused: refused})
	if _, err := c.Get(srv.URL); !errors.Is(err, refused) || hits.Load() != 0 {
		t.Fatalf("loopback with the switch off: %v (%d hits)", err, hits.Load())
	}
	if _, err := egress.NewClient(egress.Options{}).Get(srv.URL); !errors.Is(err, egress.ErrPrivate) {
		t.Fatalf("default sentinel: %v", err)
	}
	allow.Store(true)
	res, err := c.Get(srv.URL + "/away")
	if err != nil || res.StatusCode != http.StatusFound || hits.Load() != 1 {
		t.Fatalf("redirect: %v %v (%d hits)", res, err, hits.Load())
	}
	res.Body.Close()
	if c.Transport.(*http.Transport).Proxy != nil {
		t.Fatal("the client takes a proxy from the environment")
	}
}
