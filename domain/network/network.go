// Package network is what runs do on the network (docs/network.md): it
// starts each run's egress proxy (package netproxy) under the project's
// network list (package netpolicy) and keeps the record of every
// connection the run made through it — host, port, allowed or refused and
// why, bytes each way, duration — for the run's page and API, live through
// the run's stream. A refused connection is also a line in the run's log,
// so that "First error" finds it.
//
// The record is bounded per run: the first [MaxRows] connections are one
// row each — but a refused or failed connection to a destination already
// refused (or failed) folds into that row at once; after that, a connection is folded into the row of the same
// destination and verdict (its count, bytes and time added up), and when
// that destination has no row either, into one row per verdict for the
// rest ([OtherHost]). Rows are written off the connections' own path, once
// per flush interval: what arrived since the last flush is folded in memory
// first — one pending sum per row, however many connections repeat it — so
// a flush is at most one INSERT and one UPDATE statement, and a run that
// retries a refused destination thousands of times a second costs the
// database what one that retries it once does. The pending state is bounded
// by the number of rows a run may have (MaxRows + MaxFoldedRows + one
// OtherHost row per verdict). Rows are erased with the run (domain/erasure)
// and with its log (domain/retention).
package network

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"anvil/domain"
	"anvil/domain/netpolicy"
	"anvil/domain/netproxy"
)

// Bounds of a run's record.
const (
	// MaxRows is how many connections a run records one row each.
	MaxRows = 200
	// MaxFoldedRows is how many further rows repeats may open, one per
	// destination and verdict, before the rest fold into OtherHost.
	MaxFoldedRows = 50
	// MaxLogLines is how many refused or failed destinations a run's log
	// names, one line each (a destination's repeats are not named again).
	MaxLogLines = 50
	// OtherHost is the host of the row the rest folds into.
	OtherHost  = "(other destinations)"
	flushEvery = 250 * time.Millisecond
)

// LiveKind is the live event a run's new connections publish.
const LiveKind = "connection"

// Connection is one row of a run's record, as the API shows it.
type Connection struct {
	Seq        int       `bun:"seq" json:"seq"`
	Host       string    `bun:"host" json:"host"`
	Port       int       `bun:"port" json:"port"`
	Method     string    `bun:"method" json:"method"`
	Verdict    string    `bun:"verdict" json:"verdict"`
	Reason     string    `bun:"reason" json:"reason"`
	BytesUp    int64     `bun:"bytes_up" json:"bytes_up"`
	BytesDown  int64     `bun:"bytes_down" json:"bytes_down"`
	DurationMS int64     `bun:"duration_ms" json:"duration_ms"`
	Count      int       `bun:"count" json:"count"`
	StartedAt  time.Time `bun:"started_at" json:"started_at"`
}

// Service starts runs' proxies and reads their records.
type Service struct {
	s *domain.Store
	// AllowPrivate lets runs reach private addresses (the operator's
	// ANVIL_RUNS_ALLOW_PRIVATE).
	AllowPrivate bool
	// AllowLoopback lets runs reach the worker's own loopback and
	// link-local addresses, a cloud's metadata endpoint among them (the
	// operator's ANVIL_RUNS_ALLOW_LOOPBACK; docs/network.md).
	AllowLoopback bool
	// Resolver resolves the names runs ask for; nil is the system's.
	// Tests give their local servers names.
	Resolver netproxy.Resolver
	// FlushEvery is how often a run's record is written; 0 is every
	// 250 ms.
	FlushEvery time.Duration
}

// New builds the service.
func New(s *domain.Store) *Service { return &Service{s: s} }

// Connections returns the record of a run of the organisation, in order
// (a run of another organisation, or of a deleted project, is not found).
func (sv *Service) Connections(ctx context.Context, orgID, runID uuid.UUID) ([]Connection, error) {
	var ok bool
	if err := sv.s.DB.NewRaw(`SELECT EXISTS (SELECT 1 FROM project_runs r JOIN `+domain.LiveProjects+` p ON p.id = r.project_id
		WHERE r.id = ? AND r.org_id = ?)`, runID, orgID).Scan(ctx, &ok); err != nil {
		return nil, err
	}
	if !ok {
		return nil, domain.NotFound("run")
	}
	out := []Connection{}
	err := sv.s.DB.NewRaw(`SELECT seq, host, port, method, verdict, reason, bytes_up, bytes_down, duration_ms, count, started_at
		FROM run_connections WHERE run_id = ? ORDER BY seq`, runID).Scan(ctx, &out)
	return out, err
}

// RunRef is what a proxy needs to know of its run.
type RunRef struct {
	ID, OrgID, ProjectID uuid.UUID
}

// Printer writes a line of anvil's own into the run's log.
type Printer interface {
	Printf(format string, args ...any)
}

// Masker is a Printer that also masks the run's secrets in a string (the
// run's LogWriter): a host or reason a command sent — a malformed name
// above all, which may be anything it had at hand — is masked in the
// record as it is in the log.
type Masker interface {
	MaskString(string) string
}

// Proxy is a run's running proxy.
type Proxy struct {
	srv  *netproxy.Server
	rec  *recorder
	done chan struct{}
}

// Start serves the run's proxy on l under entries (a network list as
// stored; an empty one refuses everything), recording every connection.
// Close it when the run ends.
func (sv *Service) Start(ctx context.Context, r RunRef, entries []string, l net.Listener, log Printer) (*Proxy, error) {
	list, err := netpolicy.Compile(entries)
	if err != nil {
		return nil, fmt.Errorf("the project's network list: %w", err)
	}
	every := sv.FlushEvery
	if every <= 0 {
		every = flushEvery
	}
	rec := &recorder{s: sv.s, run: r, log: log, ctx: context.WithoutCancel(ctx), rows: map[foldKey]int{}, loggedDest: map[foldKey]bool{},
		folds: map[int]*foldSum{}, stop: make(chan struct{}), stopped: make(chan struct{})}
	go rec.loop(every)
	srv := netproxy.New(netproxy.Options{List: list, AllowPrivate: sv.AllowPrivate, AllowLoopback: sv.AllowLoopback,
		Resolver: sv.Resolver, OnConn: rec.add})
	p := &Proxy{srv: srv, rec: rec, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		_ = srv.Serve(l)
	}()
	return p, nil
}

// Close stops the proxy — every connection ends, nothing listens any
// more — and stores the rest of the record.
func (p *Proxy) Close() error {
	err := p.srv.Close()
	<-p.done
	p.rec.close()
	return err
}

// foldKey is a destination and verdict, the unit repeats fold by.
type foldKey struct {
	host    string
	port    int
	verdict string
}

// recorder turns a proxy's reports into rows and log lines.
type recorder struct {
	s   *domain.Store
	run RunRef
	log Printer
	ctx context.Context

	mu     sync.Mutex
	seq    int
	rows   map[foldKey]int // the row a destination folds into, once past MaxRows
	folded int             // rows opened past MaxRows
	logged int
	// loggedDest: the destinations the log has named (each once).
	loggedDest map[foldKey]bool
	inserts    []Connection     // new rows since the last flush
	folds      map[int]*foldSum // what repeats added to each row since the last flush
	stop       chan struct{}
	stopped    chan struct{}
	stopOnce   sync.Once
}

// foldSum is what connections folded into one row added since the last
// flush.
type foldSum struct {
	count                     int
	bytesUp, bytesDown, durMS int64
}

// foldLocked adds a repeat to row seq's pending sum.
func (r *recorder) foldLocked(seq int, row Connection) {
	f := r.folds[seq]
	if f == nil {
		f = &foldSum{}
		r.folds[seq] = f
	}
	f.count++
	f.bytesUp += row.BytesUp
	f.bytesDown += row.BytesDown
	f.durMS += row.DurationMS
}

// add records one connection (netproxy's OnConn).
func (r *recorder) add(c netproxy.Conn) {
	row := Connection{Host: c.Host, Port: c.Port, Method: c.Method, Verdict: c.Verdict, Reason: c.Reason,
		BytesUp: c.BytesUp, BytesDown: c.BytesDown, DurationMS: c.Duration.Milliseconds(), Count: 1, StartedAt: c.Started.UTC()}
	if row.Host == "" {
		row.Host = "(proxy)"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.Verdict != netproxy.Allowed {
		r.logLocked(c)
	}
	k := foldKey{row.Host, row.Port, row.Verdict}
	// A refused or failed destination is one row from its first repeat
	// on: a client's retry storm against a host off the list is one line
	// with its count, not a page of the same refusal.
	if seq, ok := r.rows[k]; ok && c.Verdict != netproxy.Allowed {
		r.foldLocked(seq, row)
		return
	}
	if r.seq < MaxRows {
		r.seq++
		row.Seq = r.seq
		r.rows[k] = row.Seq
		r.insertLocked(row)
		return
	}
	if seq, ok := r.rows[k]; ok {
		r.foldLocked(seq, row)
		return
	}
	if r.folded >= MaxFoldedRows {
		k = foldKey{OtherHost, 0, row.Verdict}
		row.Host, row.Port, row.Method, row.Reason = OtherHost, 0, "", ""
		if seq, ok := r.rows[k]; ok {
			r.foldLocked(seq, row)
			return
		}
	}
	r.folded++
	r.seq++
	row.Seq = r.seq
	r.rows[k] = row.Seq
	r.insertLocked(row)
}

// insertLocked queues a new row, its host, reason and method masked with
// the run's secrets (only new rows carry them: a repeat adds figures).
func (r *recorder) insertLocked(row Connection) {
	if m, ok := r.log.(Masker); ok {
		row.Host, row.Reason, row.Method = m.MaskString(row.Host), m.MaskString(row.Reason), m.MaskString(row.Method)
	}
	r.inserts = append(r.inserts, row)
}

// logLocked names a refused or failed connection in the run's log.
func (r *recorder) logLocked(c netproxy.Conn) {
	if r.log == nil {
		return
	}
	dest := netpolicy.HostPort(c.Host, c.Port)
	k := foldKey{c.Host, c.Port, c.Verdict}
	if r.loggedDest[k] {
		return // named once; its repeats are counted in the Network section
	}
	r.loggedDest[k] = true
	r.logged++
	switch {
	case r.logged > MaxLogLines+1:
		return
	case r.logged == MaxLogLines+1:
		r.log.Printf("further refused or failed connections are only counted in the run's Network section")
		return
	}
	reason := strings.TrimSuffix(c.Reason, ": "+dest)
	if c.Host == "" {
		r.log.Printf("refused a connection — %s", reason)
		return
	}
	verb := "refused"
	if c.Verdict == netproxy.Failed {
		verb = "could not reach"
	}
	r.log.Printf("%s %s — %s", verb, dest, reason)
}

func (r *recorder) loop(every time.Duration) {
	defer close(r.stopped)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			r.flush()
			return
		case <-t.C:
			r.flush()
		}
	}
}

func (r *recorder) close() {
	r.stopOnce.Do(func() { close(r.stop) })
	<-r.stopped
}

// flush stores what is pending in one transaction — the new rows in one
// INSERT, the repeats folded into rows in one UPDATE — with one live event.
func (r *recorder) flush() {
	r.mu.Lock()
	rows, folds := r.inserts, r.folds
	r.inserts, r.folds = nil, map[int]*foldSum{}
	r.mu.Unlock()
	if len(rows) == 0 && len(folds) == 0 {
		return
	}
	err := r.s.InTx(r.ctx, func(ctx context.Context, tx bun.Tx) error {
		if len(rows) > 0 {
			n := len(rows)
			seq, port, up, down, ms := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
			host, verdict, reason, method := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
			started := make([]time.Time, n)
			for i, row := range rows {
				seq[i], port[i], up[i], down[i], ms[i] = int64(row.Seq), int64(row.Port), row.BytesUp, row.BytesDown, row.DurationMS
				host[i], verdict[i], reason[i], method[i] = row.Host, row.Verdict, clip(row.Reason, 500), clip(row.Method, 16)
				started[i] = row.StartedAt
			}
			if _, err := tx.NewRaw(`INSERT INTO run_connections (run_id, seq, host, port, verdict, reason, method, bytes_up, bytes_down, duration_ms, count, started_at)
				SELECT ?, v.seq, v.host, v.port, v.verdict, v.reason, v.method, v.up, v.down, v.ms, 1, v.started
				FROM unnest(?::int[], ?::text[], ?::int[], ?::text[], ?::text[], ?::text[], ?::bigint[], ?::bigint[], ?::bigint[], ?::timestamptz[])
					AS v(seq, host, port, verdict, reason, method, up, down, ms, started)`,
				r.run.ID, pgdialect.Array(seq), pgdialect.Array(host), pgdialect.Array(port), pgdialect.Array(verdict),
				pgdialect.Array(reason), pgdialect.Array(method), pgdialect.Array(up), pgdialect.Array(down), pgdialect.Array(ms),
				pgdialect.Array(started)).Exec(ctx); err != nil {
				return err
			}
		}
		if len(folds) > 0 {
			seq, count, up, down, ms := make([]int64, 0, len(folds)), make([]int64, 0, len(folds)), make([]int64, 0, len(folds)),
				make([]int64, 0, len(folds)), make([]int64, 0, len(folds))
			for s, f := range folds {
				seq, count, up, down, ms = append(seq, int64(s)), append(count, int64(f.count)), append(up, f.bytesUp),
					append(down, f.bytesDown), append(ms, f.durMS)
			}
			if _, err := tx.NewRaw(`UPDATE run_connections c SET count = c.count + v.n, bytes_up = c.bytes_up + v.up,
				bytes_down = c.bytes_down + v.down, duration_ms = c.duration_ms + v.ms
				FROM unnest(?::int[], ?::bigint[], ?::bigint[], ?::bigint[], ?::bigint[]) AS v(seq, n, up, down, ms)
				WHERE c.run_id = ? AND c.seq = v.seq`,
				pgdialect.Array(seq), pgdialect.Array(count), pgdialect.Array(up), pgdialect.Array(down), pgdialect.Array(ms),
				r.run.ID).Exec(ctx); err != nil {
				return err
			}
		}
		ev, _ := json.Marshal(domain.LiveEvent{Kind: LiveKind, OrgID: r.run.OrgID, ProjectID: r.run.ProjectID, RunID: r.run.ID})
		return domain.Notify(ctx, tx, string(ev))
	})
	if err != nil {
		// The record is the run's page, not its result: a lost batch is
		// said in the worker's log and the run goes on.
		r.s.Log.Warn("store a run's connections", "run_id", r.run.ID, "rows", len(rows), "folded", len(folds), "error", err)
	}
}

func clip(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "?")
}
