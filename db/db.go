// Package db owns the connection to Postgres, the embedded migrations and the
// helpers that map driver errors onto meanings the domain understands.
package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
)

// DB bundles the one pgx pool with the two views of it the program needs:
// database/sql (for River and bun) and bun itself.
type DB struct {
	Pool *pgxpool.Pool
	SQL  *sql.DB
	Bun  *bun.DB
}

// Open connects to Postgres. maxConns bounds the pool; pgx's default (4 on
// two cores) starves River and the web tier at once.
func Open(ctx context.Context, dsn string, maxConns int) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("db: parse database URL %s: %w", Redact(dsn), err)
	}
	if maxConns > 0 {
		cfg.MaxConns = int32(maxConns)
	}
	cfg.PrepareConn = dropDeadConn
	// A connection idle this long is closed rather than kept: after a
	// restart the pool holds no stale connections for long.
	cfg.MaxConnIdleTime = 5 * time.Minute
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("db: connect %s: %w", Redact(dsn), err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("db: ping %s: %w", Redact(dsn), err)
	}
	sqldb := sql.OpenDB(simpleWhenInlined{stdlib.GetPoolConnector(pool)})
	sqldb.SetMaxIdleConns(0) // the pgx pool keeps the idle connections
	return &DB{Pool: pool, SQL: sqldb, Bun: bun.NewDB(sqldb, pgdialect.New())}, nil
}

// simpleWhenInlined chooses, per query without arguments, between pgx's
// statement cache and the simple protocol. bun writes every value into the
// SQL text itself. A read whose text repeats — a page's query for the same
// organisation — is best prepared once and then answered in one round trip
// with binary rows. But statements that write or lock carry new ids and
// times in their text every time: under pgx's default mode each would be
// prepared as a named statement first — a second round trip, a plan the
// server keeps, and evictions from a 512-entry cache — only to run once.
// Those go over the simple protocol. Queries with arguments (River's, the
// few written with $n) keep pgx's statement cache.
type simpleWhenInlined struct{ driver.Connector }

func (c simpleWhenInlined) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	sc, ok := conn.(*stdlib.Conn)
	if !ok {
		return conn, nil
	}
	return inlinedConn{sc}, nil
}

// inlinedConn is a pgx connection whose argument-free writes and locking
// reads use the simple protocol (pgx already does so for Exec).
type inlinedConn struct{ *stdlib.Conn }

func (c inlinedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if len(args) == 0 && !plainRead(query) {
		args = []driver.NamedValue{{Ordinal: 1, Value: pgx.QueryExecModeSimpleProtocol}}
	}
	return c.Conn.QueryContext(ctx, query, args)
}

// plainRead reports whether query is a SELECT that takes no row locks.
func plainRead(query string) bool {
	q := strings.TrimLeft(query, " \t\n(")
	if len(q) < 6 || !strings.EqualFold(q[:6], "SELECT") {
		return false
	}
	return !strings.Contains(query, " FOR UPDATE") && !strings.Contains(query, " FOR NO KEY UPDATE") &&
		!strings.Contains(query, " FOR SHARE") && !strings.Contains(query, " FOR KEY SHARE")
}

// Close releases every connection.
func (d *DB) Close() {
	_ = d.Bun.Close()
	d.Pool.Close()
}

// Redact hides the password of a database URL so it can be logged.
func Redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		if err != nil {
			return "(unparseable database URL)"
		}
		return dsn
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// IsUniqueViolation reports whether err is SQLSTATE 23505; constraint, when
// not empty, must match the violated constraint's name.
func IsUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return constraint == "" || pgErr.ConstraintName == constraint
	}
	return false
}

// IsNoRows reports whether err means the query matched nothing.
func IsNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }
