package db

import (
	"context"
	"embed"
	"fmt"

	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/uptrace/bun/migrate"
)

// migrationLockKey is the advisory lock id that serializes migrators.
const migrationLockKey = 0x616e76696c // "anvil"

//go:embed migrations/*.sql
var migrationFiles embed.FS

func migrations() (*migrate.Migrations, error) {
	m := migrate.NewMigrations()
	if err := m.Discover(migrationFiles); err != nil {
		return nil, fmt.Errorf("db: discover migrations: %w", err)
	}
	return m, nil
}

// Migrate applies River's schema and then anvil's own migrations. Both are
// idempotent, so every process may call it at start.
func Migrate(ctx context.Context, d *DB) error {
	// One migrator at a time across processes: a session advisory lock held on
	// a pinned connection (bun's lock table would strand a crashed migrator).
	conn, err := d.SQL.Conn(ctx)
	if err != nil {
		return fmt.Errorf("db: migration connection: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", migrationLockKey); err != nil {
		return fmt.Errorf("db: migration lock: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLockKey) //nolint:errcheck // released with the session anyway

	rm, err := rivermigrate.New(riverdatabasesql.New(d.SQL), nil)
	if err != nil {
		return fmt.Errorf("db: river migrator: %w", err)
	}
	if _, err := rm.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("db: river migrations: %w", err)
	}
	ms, err := migrations()
	if err != nil {
		return err
	}
	mg := migrate.NewMigrator(d.Bun, ms, migrate.WithMarkAppliedOnSuccess(true))
	if err := mg.Init(ctx); err != nil {
		return fmt.Errorf("db: init migration tables: %w", err)
	}
	if _, err := mg.Migrate(ctx); err != nil {
		return fmt.Errorf("db: migrate: %w", err)
	}
	return nil
}

// Current reports whether every embedded migration has been applied; /readyz
// uses it so a web process never serves a schema older than its code.
func Current(ctx context.Context, d *DB) (bool, error) {
	ms, err := migrations()
	if err != nil {
		return false, err
	}
	mg := migrate.NewMigrator(d.Bun, ms)
	status, err := mg.MigrationsWithStatus(ctx)
	if err != nil {
		return false, fmt.Errorf("db: migration status: %w", err)
	}
	return len(status.Unapplied()) == 0, nil
}

// Newest is the name of the newest embedded migration: the schema level
// this binary brings (names start with their timestamp, so they sort).
func Newest() (string, error) {
	ms, err := migrations()
	if err != nil {
		return "", err
	}
	newest := ""
	for _, m := range ms.Sorted() {
		newest = max(newest, m.Name)
	}
	return newest, nil
}

// Applied is the newest migration applied to d's database, "" when anvil
// never migrated it. A backup records it, and a restore refuses an archive
// newer than [Newest].
func Applied(ctx context.Context, d *DB) (string, error) {
	var exists bool
	if err := d.SQL.QueryRowContext(ctx, "SELECT to_regclass('bun_migrations') IS NOT NULL").Scan(&exists); err != nil {
		return "", fmt.Errorf("db: migration level: %w", err)
	}
	if !exists {
		return "", nil
	}
	var name string
	if err := d.SQL.QueryRowContext(ctx, "SELECT coalesce(max(name), '') FROM bun_migrations").Scan(&name); err != nil {
		return "", fmt.Errorf("db: migration level: %w", err)
	}
	return name, nil
}
