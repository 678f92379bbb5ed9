package main

// The cost meter: the CPU time a measured stretch took in the server
// process, in the Postgres backends of its database and in the bench
// itself, and the transactions and rows Postgres counted for that
// database. On a shared 2-core machine wall-clock rates swing with whatever
// else runs; CPU time per request or event does not (much), so the feed's
// sections print it beside their rates (docs/figures.md).

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// cost is one reading of the meter, or the difference of two.
type cost struct {
	Server, Postgres, Bench time.Duration
	// Xacts is commits and rollbacks; Rows, rows inserted, updated and
	// deleted (pg_stat_database). They lag: see costMeter.read.
	Xacts, Rows int64
}

// sub is c − o.
func (c cost) sub(o cost) cost {
	return cost{c.Server - o.Server, c.Postgres - o.Postgres, c.Bench - o.Bench, c.Xacts - o.Xacts, c.Rows - o.Rows}
}

// add is c + o.
func (c cost) add(o cost) cost {
	return cost{c.Server + o.Server, c.Postgres + o.Postgres, c.Bench + o.Bench, c.Xacts + o.Xacts, c.Rows + o.Rows}
}

// withCountsOf is c with o's transactions and rows: a later reading's,
// taken once every backend has reported its own (c keeps its CPU times).
func (c cost) withCountsOf(o cost) cost {
	c.Xacts, c.Rows = o.Xacts, o.Rows
	return c
}

// costSample is how often the meter looks for the database's backends
// between readings: a backend that ends (or starts and ends) between two
// readings still counts what it used up to the last look.
const costSample = 250 * time.Millisecond

// costCountsLag is how long after the work a reading must wait for its
// transactions and rows to be complete: a backend reports them to the
// statistics at most once a second, and when it goes idle within a second.
const costCountsLag = 1200 * time.Millisecond

// costMeter reads the costs of one server on one database.
type costMeter struct {
	pid  int
	mu   sync.Mutex // guards conn and seen
	conn *pgx.Conn
	// seen is the last CPU time read of every backend met, by pid.
	seen map[int]time.Duration
	stop chan struct{}
	done chan struct{}
}

// newCostMeter watches the server process pid on the database of dbURL
// over a connection of its own; close it when done.
func newCostMeter(ctx context.Context, dbURL string, pid int) (*costMeter, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	m := &costMeter{pid: pid, conn: conn, seen: map[int]time.Duration{}, stop: make(chan struct{}), done: make(chan struct{})}
	go m.sample(ctx)
	return m, nil
}

func (m *costMeter) sample(ctx context.Context) {
	defer close(m.done)
	t := time.NewTicker(costSample)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			m.mu.Lock()
			_ = m.lookLocked(ctx) // the next reading reports a failure
			m.mu.Unlock()
		}
	}
}

// close stops the meter.
func (m *costMeter) close(ctx context.Context) {
	close(m.stop)
	<-m.done
	_ = m.conn.Close(ctx)
}

// lookLocked reads the CPU time of every backend of the database but the
// meter's own — the server's pool, and autovacuum's workers when they clean
// up after it — into seen.
func (m *costMeter) lookLocked(ctx context.Context) error {
	rows, err := m.conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		return err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return err
	}
	for _, p := range pids {
		if t, err := procCPU(int(p)); err == nil {
			m.seen[int(p)] = t
		}
	}
	return nil
}

// read takes a reading. Its CPU times are now's; its transactions and rows
// are what the backends have reported so far (up to costCountsLag late),
// the meter's own few a second among them.
func (m *costMeter) read(ctx context.Context) (cost, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var c cost
	var err error
	if c.Server, err = procCPU(m.pid); err != nil {
		return c, err
	}
	c.Bench = selfCPU()
	if err := m.lookLocked(ctx); err != nil {
		return c, err
	}
	for _, t := range m.seen {
		c.Postgres += t
	}
	// A fresh snapshot of the statistics, not the transaction's cached one.
	if _, err := m.conn.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		return c, err
	}
	err = m.conn.QueryRow(ctx, `SELECT xact_commit + xact_rollback, tup_inserted + tup_updated + tup_deleted
		FROM pg_stat_database WHERE datname = current_database()`).Scan(&c.Xacts, &c.Rows)
	return c, err
}

// settledCounts waits costCountsLag and reads again: the transactions and
// rows of the work before it, complete.
func (m *costMeter) settledCounts(ctx context.Context) (cost, error) {
	select {
	case <-time.After(costCountsLag):
	case <-ctx.Done():
		return cost{}, ctx.Err()
	}
	return m.read(ctx)
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's times.
const clockTicks = 100

// procCPU is a process's user and system CPU time so far.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The fields after the command (which may hold spaces) start after its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// selfCPU is the bench process's own CPU time so far (its client, and in
// the alerts section the receiver of the alerts).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
