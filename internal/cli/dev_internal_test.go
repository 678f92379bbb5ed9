package cli

import (
	"context"
	"flag"
	"io"
	"net/url"
	"testing"
)

// The demo's database on a local Postgres is anvil_demo, never anvil, the
// name the install steps give a service's database: `make run` and an
// installed service on one machine never share one.
func TestDemoDatabaseIsNotTheServicesName(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	lookup("dev").setup(fs, flagsOfConfig())
	if def := fs.Lookup("database").DefValue; def != DemoDatabase || def == "anvil" {
		t.Fatalf("anvil dev --database defaults to %q", def)
	}
	raw, err := devDatabase(context.Background(), t.TempDir(), DemoDatabase, io.Discard)
	if err != nil {
		t.Skipf("no local Postgres on 127.0.0.1:5432: %v", err)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Path != "/anvil_demo" {
		t.Fatalf("the demo's database is %q (%v)", raw, err)
	}
}
