package network_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"anvil/db/testdb"
	"anvil/domain/internal/domaintest"
	"anvil/domain/network"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// lines is the run's log as the recorder writes it.
type lines struct {
	mu sync.Mutex
	l  []string
}

func (p *lines) Printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.l = append(p.l, fmt.Sprintf(format, args...))
}

// A run that hammers the network keeps a bounded record that still counts
// everything: the first rows one each, repeats folded into their
// destination's row, new destinations beyond the bound into one row; the
// log names the first refusals and then says it stops; Close leaves
// nothing listening and everything stored.
func TestRecordIsBoundedAndCountsEverything(t *testing.T) {
	t.Parallel()
	b := domaintest.Setup(t)
	ctx := context.Background()
	p := b.Project(t, "busy")
	r, err := b.Queue.AcceptManual(ctx, b.Owner, p.ID, "main")
	if err != nil {
		t.Fatal(err)
	}
	sv := network.New(b.Store)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := &lines{}
	px, err := sv.Start(ctx, network.RunRef{ID: r.ID, OrgID: r.OrgID, ProjectID: r.ProjectID}, []string{"listed.example"}, l, log)
	if err != nil {
		t.Fatal(err)
	}
	proxy, _ := url.Parse("http://" + l.Addr().String())
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
	get := func(host string) {
		res, err := c.Get("http://" + host + "/")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Fatalf("%s: %d", host, res.StatusCode)
		}
	}
	total := 0
	for range network.MaxRows + 100 {
		get("again.example")
		total++
	}
	for i := range network.MaxRows - 1 + network.MaxFoldedRows + 10 {
		get(fmt.Sprintf("h%d.example", i))
		total++
	}
	if err := px.Close(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
		c.Close()
		t.Fatal("the proxy still listens after Close")
	}
	conns, err := sv.Connections(ctx, b.Owner.OrgID, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	sum, other := 0, 0
	for i, c := range conns {
		sum += c.Count
		if c.Seq != i+1 || c.Verdict != "refused" {
			t.Fatalf("row %d: %+v", i, c)
		}
		if c.Host == network.OtherHost {
			other = c.Count
		}
	}
	if len(conns) != network.MaxRows+network.MaxFoldedRows+1 || sum != total || other != 10 {
		t.Fatalf("%d rows counting %d connections (%d folded into the rest), want %d rows counting %d",
			len(conns), sum, other, network.MaxRows+network.MaxFoldedRows+1, total)
	}
	if conns[0].Count != network.MaxRows+100 || conns[0].Host != "again.example" {
		t.Fatalf("a refused destination's repeats were not folded into its one row: %+v", conns[0])
	}
	for _, l := range log.l[1:] {
		if strings.Contains(l, "again.example") {
			t.Fatalf("the log names a refused destination twice: %q", l)
		}
	}
	if len(log.l) != network.MaxLogLines+1 || !strings.HasPrefix(log.l[0], "refused again.example:80 — not in this project's network list") ||
		!strings.Contains(log.l[network.MaxLogLines], "only counted") {
		t.Fatalf("%d log lines: %q … %q", len(log.l), log.l[0], log.l[len(log.l)-1])
	}
	other2, err := b.Accounts.Bootstrap(ctx, "globex", "boss@globex.test", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sv.Connections(ctx, other2.OrgID, r.ID); err == nil {
		t.Fatal("another organisation reads the run's connections")
	}
}

// A run that retries a refused destination in a loop — npm does, without
// end — costs the database a bounded number of row updates: repeats fold
// in memory and a flush writes each row once, however many connections it
// carries. A trigger counts the rows Postgres really updates.
func TestRefusedStormMakesBoundedUpdates(t *testing.T) {
	t.Parallel()
	b := domaintest.Setup(t)
	ctx := context.Background()
	p := b.Project(t, "storm")
	r, err := b.Queue.AcceptManual(ctx, b.Owner, p.ID, "main")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE storm_updates (n bigint NOT NULL)`,
		`INSERT INTO storm_updates VALUES (0)`,
		`CREATE FUNCTION storm_count() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN UPDATE storm_updates SET n = n + 1; RETURN NEW; END $$`,
		`CREATE TRIGGER storm_count AFTER UPDATE ON run_connections FOR EACH ROW EXECUTE FUNCTION storm_count()`,
	} {
		if _, err := b.DB.Bun.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	sv := network.New(b.Store)
	// One flush, at Close: what the loop costs does not depend on how fast
	// this machine runs it.
	sv.FlushEvery = time.Hour
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	px, err := sv.Start(ctx, network.RunRef{ID: r.ID, OrgID: r.OrgID, ProjectID: r.ProjectID}, nil, l, &lines{})
	if err != nil {
		t.Fatal(err)
	}
	const storm = network.MaxRows + 1000
	for range storm {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, "CONNECT registry.npmjs.org:443 HTTP/1.1\r\nHost: registry.npmjs.org:443\r\n\r\n")
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || res.StatusCode != http.StatusForbidden {
			t.Fatalf("%v %v", res, err)
		}
		c.Close()
	}
	if err := px.Close(); err != nil {
		t.Fatal(err)
	}
	var updates int
	if err := b.DB.Bun.NewRaw(`SELECT n FROM storm_updates`).Scan(ctx, &updates); err != nil {
		t.Fatal(err)
	}
	conns, err := sv.Connections(ctx, b.Owner.OrgID, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0
	for _, c := range conns {
		sum += c.Count
	}
	// A refused destination is one row from its first repeat on.
	if sum != storm || len(conns) != 1 {
		t.Fatalf("%d rows counting %d connections, want 1 counting %d", len(conns), sum, storm)
	}
	if updates != 1 {
		t.Fatalf("%d connections folded into one row cost %d row updates, want 1", storm-1, updates)
	}
}
