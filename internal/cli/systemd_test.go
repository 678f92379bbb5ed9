package cli

import (
	"context"
	"net"
	"testing"
	"time"

	"anvil/db"
	"anvil/db/testdb"
)

// TestWatchdogAsksTheDatabaseApartFromThePool: with every connection of
// the pool held (a worker's running jobs may hold them all), the
// watchdog's database question still gets its answer, over its own
// connection; the pool's would wait until its time ran out and make a
// healthy database look dead.
func TestWatchdogAsksTheDatabaseApartFromThePool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URLFor(testdb.Name(t))
	d, err := db.Open(ctx, url, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	held, err := d.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()

	a := &app{cfg: &Config{DatabaseURL: url}, db: d}
	h, closeProbe := healthCheck(a, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, "serving")
	defer closeProbe()
	for i := 0; i < 2; i++ { // connecting, then the connection kept
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := h.ready(cctx)
		cancel()
		if err != nil {
			t.Fatalf("ready %d with the pool held: %v", i, err)
		}
	}
	// A database that does not answer is not ready, and the next
	// question connects afresh.
	bad := &dbProbe{dsn: "postgres://postgres@127.0.0.1:1/nowhere?connect_timeout=2"}
	defer bad.Close()
	if err := bad.Ping(ctx); err == nil {
		t.Fatal("a database that does not answer is ready")
	}
}
