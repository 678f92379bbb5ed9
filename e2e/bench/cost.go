package main

// Cost meters: the CPU time a measured stretch took in the server process,
// in the Postgres backends of its database and in the bench itself, and
// the transactions and rows Postgres counted for that database. On a
// shared 2-core machine wall-clock rates swing with whatever else runs;
// CPU time per event does not (much), so the sections that compare two
// runs print it beside the rates (docs/figures.md).

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// cost is one reading of the meters.
type cost struct {
	server, postgres, bench time.Duration
	xacts, rows             int64 // commits and rollbacks; rows inserted, updated and deleted
}

// sub is c − o.
func (c cost) sub(o cost) cost {
	return cost{c.server - o.server, c.postgres - o.postgres, c.bench - o.bench, c.xacts - o.xacts, c.rows - o.rows}
}

// costMeter reads the meters of one server on one database.
type costMeter struct {
	pid  int
	conn *pgx.Conn
	// seen keeps the last reading of every backend met, so that a backend
	// that ends between two readings still counts what it used.
	seen map[int]time.Duration
}

// newCostMeter watches the server pid on dbURL; close it when done.
func newCostMeter(ctx context.Context, dbURL string, pid int) (*costMeter, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	return &costMeter{pid: pid, conn: conn, seen: map[int]time.Duration{}}, nil
}

func (m *costMeter) close(ctx context.Context) { _ = m.conn.Close(ctx) }

// read takes a reading. Postgres' own is the backends of the database but
// the meter's (and the autovacuum and checkpointer, which serve everyone).
func (m *costMeter) read(ctx context.Context) (cost, error) {
	var c cost
	var err error
	if c.server, err = procCPU(m.pid); err != nil {
		return c, err
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		c.bench = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	rows, err := m.conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		return c, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return c, err
	}
	for _, pid := range pids {
		if t, err := procCPU(int(pid)); err == nil {
			m.seen[int(pid)] = t
		}
	}
	for _, t := range m.seen {
		c.postgres += t
	}
	// The statistics are sent by each backend at the end of its
	// transactions, at most once a second: a fresh snapshot, not the
	// cached one.
	if _, err := m.conn.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		return c, err
	}
	err = m.conn.QueryRow(ctx, `SELECT xact_commit + xact_rollback, tup_inserted + tup_updated + tup_deleted
		FROM pg_stat_database WHERE datname = current_database()`).Scan(&c.xacts, &c.rows)
	return c, err
}

// procCPU is the user and system time a process has used.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces: the fields start after its ")".
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(ut+st) * tick, nil
}

// perEvent prints a cost per event of a section's run.
func (e *benchEnv) notePerEvent(group, run string, c cost, events int64) {
	us := func(d time.Duration) float64 { return float64(int(float64(d.Microseconds())/float64(events)*10)) / 10 }
	e.note(group, run+"_server_cpu_us_per_event", us(c.server))
	e.note(group, run+"_postgres_cpu_us_per_event", us(c.postgres))
	e.note(group, run+"_bench_cpu_us_per_event", us(c.bench))
	e.note(group, run+"_xacts", float64(c.xacts))
	e.note(group, run+"_rows_written", float64(c.rows))
}
