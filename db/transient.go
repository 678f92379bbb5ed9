package db

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// IsTransient reports whether err is a failure of the database itself —
// unreachable, restarting, out of connections, a connection cut — rather
// than of the statement: the same request may well succeed a few seconds
// later. A client that went away (context.Canceled) is not one.
func IsTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	// No connection could be made at all (refused, starting up, not
	// accepting connections, too many): whatever the server said.
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case len(pgErr.Code) == 5 && pgErr.Code[:2] == "08": // connection exception
			return true
		case pgErr.Code == "57P01", // admin_shutdown: a restart or pg_terminate_backend
			pgErr.Code == "57P02", // crash_shutdown
			pgErr.Code == "57P03", // cannot_connect_now: starting up or shutting down
			pgErr.Code == "53300", // too_many_connections
			pgErr.Code == "40001", // serialization_failure
			pgErr.Code == "40P01": // deadlock_detected
			return true
		}
		return false
	}
	switch {
	case pgconn.SafeToRetry(err),
		errors.Is(err, driver.ErrBadConn),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed):
		return true
	}
	return false
}

// dropDeadConn is the pool's PrepareConn: an idle connection whose server
// has gone (a restart, pg_terminate_backend) is destroyed before it is
// handed out, and pgxpool takes the next one or dials anew. Without it the
// first statement after a restart went to a dead connection and failed
// after it had been sent, where nothing may retry it. The check itself is
// a non-blocking peek at the socket (see alive).
func dropDeadConn(ctx context.Context, conn *pgx.Conn) (bool, error) {
	switch alive(conn.PgConn().Conn()) {
	case connAlive:
		return true, nil
	case connDead:
		return false, nil
	}
	// Bytes are waiting on an idle connection: most likely the server's
	// farewell (FATAL 57P01) before it closed, but possibly a notice. A
	// round trip tells.
	return conn.Ping(ctx) == nil, nil
}

type connState int

const (
	connAlive   connState = iota // nothing to read, not closed: idle as it should be
	connDead                     // the server closed it
	connUnknown                  // bytes are waiting, or the socket cannot be peeked at
)
