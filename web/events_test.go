package web_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	runs "anvil/domain/run"
)

// sseReader reads named events from a live stream.
type sseReader struct {
	t   *testing.T
	res *http.Response
	sc  *bufio.Scanner
}

func (b *testBundle) stream(t *testing.T, br *browser, query string) *sseReader {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", b.srv.URL+"/events?"+query, nil)
	res, err := br.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	t.Cleanup(func() { res.Body.Close() })
	return &sseReader{t: t, res: res, sc: bufio.NewScanner(res.Body)}
}

// next returns the next event's name and data, failing after a deadline.
func (r *sseReader) next(within time.Duration) (string, string) {
	r.t.Helper()
	type ev struct{ name, data string }
	ch := make(chan ev, 1)
	go func() {
		var name string
		var data []string
		for r.sc.Scan() {
			line := r.sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = append(data, strings.TrimPrefix(line, "data: "))
			case line == "" && name != "":
				ch <- ev{name, strings.Join(data, "\n")}
				return
			}
		}
		ch <- ev{"eof", ""}
	}()
	select {
	case e := <-ch:
		return e.name, e.data
	case <-time.After(within):
		r.t.Fatalf("no event within %s", within)
		return "", ""
	}
}

// until reads events until one named name whose data contains want.
func (r *sseReader) until(name, want string) string {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		n, d := r.next(10 * time.Second)
		if n == "eof" {
			r.t.Fatal("stream ended")
		}
		if n == name && strings.Contains(d, want) {
			return d
		}
	}
	r.t.Fatalf("no %s event with %q", name, want)
	return ""
}

func TestEventsStreamRunChangesAndLogs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("live"))
	pid := uuid.MustParse(p["id"].(string))
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	owner, _ := b.accounts.Authenticate(context.Background(), b.owner.Token)

	proj := b.stream(t, br, "project="+pid.String())
	r, err := b.queue.AcceptManual(context.Background(), owner, pid, "")
	if err != nil {
		t.Fatal(err)
	}
	proj.until("run", `"status":"queued"`)

	// A log written before the viewer joins, then lines written after it.
	w := b.logs.Writer(context.Background(), r)
	w.Write([]byte("before <joining>\n"))
	w.Flush(context.Background())
	run := b.stream(t, br, "run="+r.ID.String()+"&after=0")
	if d := run.until("log", "before"); !strings.Contains(d, "&lt;joining&gt;") {
		t.Fatalf("log data not escaped: %q", d)
	}
	w.Write([]byte("after joining\n"))
	w.Flush(context.Background())
	run.until("log", "after joining")
	w.Close(context.Background())

	if _, err := b.queue.RequestCancel(context.Background(), owner, r.ID); err != nil {
		t.Fatal(err)
	}
	run.until("run", `"status":"canceled"`)
	proj.until("run", `"status":"canceled"`)

	// Another organisation cannot listen.
	other, _ := b.accounts.Bootstrap(context.Background(), "globex", "x@globex.test", testPassword)
	_ = other
	br2 := b.browser(t)
	br2.login("x@globex.test", testPassword)
	for _, q := range []string{"project=" + pid.String(), "run=" + r.ID.String(), "run=nope"} {
		res, _ := br2.get("/events?" + q)
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("events?%s by another org: %d", q, res.StatusCode)
		}
	}
	_ = runs.StatusCanceled
}

// TestRunStreamOpensWithARunEvent: a run page is rendered before its stream
// connects, and a change of the run in between (it started, it passed) was
// never streamed — the page stayed "queued" for good. The stream now opens
// with one empty "run" event, which makes the page fetch the run again.
func TestRunStreamOpensWithARunEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("resync"))
	pid := uuid.MustParse(p["id"].(string))
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	owner, _ := b.accounts.Authenticate(context.Background(), b.owner.Token)
	r, err := b.queue.AcceptManual(context.Background(), owner, pid, "")
	if err != nil {
		t.Fatal(err)
	}
	// Nothing changes after the subscription: the only event is the resync.
	run := b.stream(t, br, "run="+r.ID.String()+"&after=0")
	if name, data := run.next(10 * time.Second); name != "run" || data != "" {
		t.Fatalf("first event of a run stream: %s %q, want an empty run event", name, data)
	}
	// A project's stream does not get one (its pages hold forms a refetch
	// would reset); its first event is the next change.
	proj := b.stream(t, br, "project="+pid.String())
	if _, err := b.queue.RequestCancel(context.Background(), owner, r.ID); err != nil {
		t.Fatal(err)
	}
	// The accept's own notification may reach the hub after the
	// subscription (NOTIFY is asynchronous; under load it does): a
	// "queued" event of the run is an earlier change, not a resync.
	name, data := proj.next(10 * time.Second)
	if name == "run" && strings.Contains(data, `"status":"queued"`) {
		name, data = proj.next(10 * time.Second)
	}
	if name != "run" || !strings.Contains(data, `"status":"canceled"`) {
		t.Fatalf("first event of a project stream: %s %q", name, data)
	}
}
