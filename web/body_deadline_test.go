package web_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A body that trickles is cut off at the body deadline, while a live stream
// (a request without a body) stays open past it.
func TestRequestBodyHasADeadline(t *testing.T) {
	t.Parallel()
	opts := testOptions()
	opts.BodyTimeout = 300 * time.Millisecond
	b := setupWith(t, opts)
	_, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("trickle"))
	pid := p["id"].(string)
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", b.srv.URL+"/events?project="+pid, nil)
	res, err := br.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	events := make(chan sseEvent, 16)
	go parseSSE(bufio.NewReader(res.Body), events)

	// Announce 1,000 bytes and send one every 50 ms: 50 s in all.
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/private/projects HTTP/1.1\r\nHost: anvil.test\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n", b.owner.Token)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	closed := make(chan string, 1)
	go func() {
		answer, _ := io.ReadAll(conn) // until the server closes the connection
		closed <- string(answer)
	}()
	select {
	case answer := <-closed:
		t.Logf("the server answered %q and closed the connection", firstLine(answer))
	case <-time.After(10 * time.Second):
		t.Fatal("a body trickling one byte every 50 ms was still being read after 10 s (body deadline 300 ms)")
	}

	// The stream opened before the trickle began is older than the deadline
	// now, and still delivers.
	status, _ := b.api(t, b.owner.Token, "POST", "/api/private/projects/"+pid+"/runs", map[string]any{})
	if status != http.StatusAccepted && status != http.StatusCreated {
		t.Fatalf("run now: %d", status)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the live stream ended")
			}
			if ev.name == "run" {
				return
			}
		case <-deadline:
			t.Fatal("no run event on the live stream within 10 s")
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\r\n")
	return line
}
