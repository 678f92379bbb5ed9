package db_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"anvil/db"
	"anvil/db/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// terminateAll ends every backend of the database and waits for each.
func terminateAll(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, testdb.URLFor("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = $1`, name); err != nil {
		t.Fatal(err)
	}
}

// holdIdle makes the pool keep n idle connections.
func holdIdle(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	var conns []*pgxpool.Conn
	for i := 0; i < n; i++ {
		c, err := pool.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
}

// Failures of the database itself are transient; failures of a statement
// are not. The errors are real ones from Postgres and pgx.
func TestIsTransient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := testdb.Name(t)

	conn, err := pgx.Connect(ctx, testdb.URLFor(name))
	if err != nil {
		t.Fatal(err)
	}
	_, syntaxErr := conn.Exec(ctx, `SELEC 1`)
	terminateAll(t, name)
	_, terminated := conn.Exec(ctx, `SELECT 1`)
	_, afterClose := conn.Exec(ctx, `SELECT 1`)
	_, refused := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:1/none?connect_timeout=5")

	for _, c := range []struct {
		what      string
		err       error
		transient bool
	}{
		{"terminated backend", terminated, true},
		{"connection already closed", afterClose, true},
		{"connection refused", refused, true},
		{"wrapped", fmt.Errorf("token: %w", terminated), true},
		{"syntax error", syntaxErr, false},
		{"no rows", sql.ErrNoRows, false},
		{"client went away", fmt.Errorf("session: %w", context.Canceled), false},
		{"other", errors.New("boom"), false},
		{"nil", nil, false},
	} {
		if c.err == nil && c.what != "nil" {
			t.Errorf("%s: no error to classify", c.what)
			continue
		}
		if got := db.IsTransient(c.err); got != c.transient {
			t.Errorf("%s (%v): IsTransient = %v, want %v", c.what, c.err, got, c.transient)
		}
	}
}

// After every backend was terminated (a Postgres restart), the pool hands
// out no dead connection: the next statements succeed, through bun and
// through pgx alike.
func TestPoolDropsDeadConnections(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	ctx := context.Background()
	name := d.Pool.Config().ConnConfig.Database
	for round := 0; round < 3; round++ {
		holdIdle(t, d.Pool, 4)
		terminateAll(t, name)
		var one int
		if err := d.Bun.NewRaw(`SELECT 1`).Scan(ctx, &one); err != nil || one != 1 {
			t.Fatalf("round %d: bun after the restart: %v", round, err)
		}
		holdIdle(t, d.Pool, 4)
		terminateAll(t, name)
		if err := d.Pool.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
			t.Fatalf("round %d: pgx after the restart: %v", round, err)
		}
	}
}
