package cli

import (
	"context"
	"io"
	"net/url"
	"testing"
)

// The demo's database on a local Postgres is anvil_demo, never anvil, the
// name the install steps give a service's database: `make run` and an
// installed service on one machine never share one.
func TestDemoDatabaseIsNotTheServicesName(t *testing.T) {
	t.Parallel()
	raw, err := devDatabase(context.Background(), t.TempDir(), io.Discard)
	if err != nil {
		t.Skipf("no local Postgres on 127.0.0.1:5432: %v", err)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Path != "/anvil_demo" {
		t.Fatalf("the demo's database is %q (%v)", raw, err)
	}
}
