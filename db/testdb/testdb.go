// Package testdb gives every test its own Postgres database, cloned from a
// migrated template, so tests run in parallel on committed data and leave
// nothing behind.
//
// Each test package calls Main from TestMain; New(t) then returns a fresh
// database. The server is ANVIL_TEST_DATABASE_URL, by default the local one
// at postgres://postgres@127.0.0.1:5432/postgres.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"anvil/db"
)

var (
	once     sync.Once
	template string
	setupErr error
	created  sync.Map // database name → struct{}
)

// AdminURL is the maintenance database the helper connects to.
func AdminURL() string {
	if u := os.Getenv("ANVIL_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// URLFor returns the URL of database name on the test server.
func URLFor(name string) string {
	u, err := url.Parse(AdminURL())
	if err != nil {
		panic(err)
	}
	u.Path = "/" + name
	return u.String()
}

func randomName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

func admin(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		return fmt.Errorf("testdb: connect to %s: %w", db.Redact(AdminURL()), err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// createFrom creates name from tmpl, retrying while another session still
// holds the template (Postgres refuses to copy a database in use).
func createFrom(ctx context.Context, name, tmpl string) error {
	var err error
	for i := 0; i < 50; i++ {
		err = admin(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", pgx.Identifier{name}.Sanitize(), pgx.Identifier{tmpl}.Sanitize()))
		if err == nil || !strings.Contains(err.Error(), "being accessed by other users") {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

func setup() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	template = randomName("anvil_tmpl_")
	if setupErr = admin(ctx, "CREATE DATABASE "+template); setupErr != nil {
		return
	}
	created.Store(template, struct{}{})
	d, err := db.Open(ctx, URLFor(template), 4)
	if err != nil {
		setupErr = err
		return
	}
	defer d.Close()
	setupErr = db.Migrate(ctx, d)
}

// Name creates a fresh migrated database and returns its name; it is dropped
// when the test ends.
func Name(t testing.TB) string {
	t.Helper()
	once.Do(setup)
	if setupErr != nil {
		t.Fatalf("testdb: template: %v", setupErr)
	}
	ctx := context.Background()
	name := randomName("anvil_test_")
	if err := createFrom(ctx, name, template); err != nil {
		t.Fatalf("testdb: create %s: %v", name, err)
	}
	created.Store(name, struct{}{})
	t.Cleanup(func() { drop(name) })
	return name
}

// New returns an open handle on a fresh migrated database.
func New(t testing.TB) *db.DB {
	t.Helper()
	name := Name(t)
	d, err := db.Open(context.Background(), URLFor(name), 20)
	if err != nil {
		t.Fatalf("testdb: open: %v", err)
	}
	t.Cleanup(d.Close) // runs before the drop registered by Name
	return d
}

func drop(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := admin(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", pgx.Identifier{name}.Sanitize())); err == nil {
		created.Delete(name)
	}
}

// Main runs the package's tests and then drops the template and anything a
// test left behind.
func Main(m *testing.M) {
	code := m.Run()
	created.Range(func(k, _ any) bool {
		drop(k.(string))
		return true
	})
	os.Exit(code)
}
