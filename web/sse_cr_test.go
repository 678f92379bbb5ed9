package web_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// sseEvent is one dispatched Server-Sent Event.
type sseEvent struct{ name, data string }

// parseSSE reads events as a browser's EventSource does (the WHATWG
// algorithm): a line ends at CR LF, LF or a lone CR; "event" names the
// message, each "data" line adds one line to it, a blank line dispatches
// it, a line starting with ":" is a comment.
func parseSSE(r *bufio.Reader, out chan<- sseEvent) {
	defer close(out)
	var name string
	var data []string
	var have bool
	var line strings.Builder
	handle := func(l string) {
		if l == "" {
			if have {
				if name == "" {
					name = "message"
				}
				out <- sseEvent{name, strings.Join(data, "\n")}
			}
			name, data, have = "", nil, false
			return
		}
		if strings.HasPrefix(l, ":") {
			return
		}
		field, value, _ := strings.Cut(l, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			name = value
		case "data":
			data = append(data, value)
			have = true
		}
	}
	for {
		c, err := r.ReadByte()
		if err != nil {
			return
		}
		switch c {
		case '\r':
			if next, err := r.Peek(1); err == nil && next[0] == '\n' {
				_, _ = r.ReadByte()
			}
			handle(line.String())
			line.Reset()
		case '\n':
			handle(line.String())
			line.Reset()
		default:
			line.WriteByte(c)
		}
	}
}

// A log line carrying bare CRs reaches the live stream as one log event
// whose data holds the whole line; it cannot start fields of its own.
func TestEventsLogLineCannotForgeFields(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("crlf"))
	pid := uuid.MustParse(p["id"].(string))
	owner, _ := b.accounts.Authenticate(context.Background(), b.owner.Token)
	r, err := b.queue.AcceptManual(context.Background(), owner, pid, "")
	if err != nil {
		t.Fatal(err)
	}
	w := b.logs.Writer(context.Background(), r)
	w.Write([]byte("x\revent: incident\rdata: forged\r\nnext line\n"))
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}

	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", b.srv.URL+"/events?run="+r.ID.String()+"&after=0", nil)
	res, err := br.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	events := make(chan sseEvent, 16)
	go parseSSE(bufio.NewReader(res.Body), events)
	select {
	case ev := <-events:
		// The log arrives rendered (views.LogHTML): the redrawn line folded
		// to its last state, as text inside its line's span.
		if ev.name != "log" || strings.Contains(ev.data, "\r") || !strings.Contains(ev.data, ">data: forged</span>") ||
			!strings.Contains(ev.data, ">next line</span>") {
			t.Fatalf("first event %q with data %q, want one log event holding both lines", ev.name, ev.data)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
	}
}
