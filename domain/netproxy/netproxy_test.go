package netproxy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"anvil/domain/netpolicy"
	"anvil/domain/netproxy"
)

// names is a resolver of the test's own names. It answers fully
// qualified names only (a trailing dot), as the proxy must ask: a name
// without one would go through the resolver's search list.
type names map[string]string

func (n names) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := n[strings.TrimSuffix(host, ".")]; ok && strings.HasSuffix(host, ".") {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

type recorder struct {
	mu    sync.Mutex
	conns []netproxy.Conn
	got   chan netproxy.Conn
}

func newRecorder() *recorder { return &recorder{got: make(chan netproxy.Conn, 100)} }

func (r *recorder) record(c netproxy.Conn) {
	r.mu.Lock()
	r.conns = append(r.conns, c)
	r.mu.Unlock()
	r.got <- c
}

func (r *recorder) next(t *testing.T) netproxy.Conn {
	t.Helper()
	select {
	case c := <-r.got:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no connection was reported")
	}
	return netproxy.Conn{}
}

// origin is a local server that counts the connections it accepted.
type origin struct {
	*httptest.Server
	accepts atomic.Int32
	port    int
}

func newOrigin(t *testing.T, h http.HandlerFunc) *origin {
	o := &origin{}
	o.Server = httptest.NewUnstartedServer(h)
	o.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			o.accepts.Add(1)
		}
	}
	o.Start()
	t.Cleanup(o.Close)
	o.port = o.Listener.Addr().(*net.TCPAddr).Port
	return o
}

func startProxy(t *testing.T, o netproxy.Options) (*netproxy.Server, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	px := netproxy.New(o)
	go func() { _ = px.Serve(l) }()
	t.Cleanup(func() { _ = px.Close() })
	return px, l.Addr().String()
}

func mustList(t *testing.T, entries ...string) *netpolicy.List {
	t.Helper()
	l, err := netpolicy.Compile(entries)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func client(proxy string) *http.Client {
	u, _ := url.Parse("http://" + proxy)
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u), DisableKeepAlives: true}, Timeout: 10 * time.Second}
}

// A listed host is reached by a forwarded request and through a CONNECT
// tunnel (TLS, which the proxy never opens); both are reported with their
// bytes.
func TestAllowedRequestAndTunnel(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("x", 100_000)
	org := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		in, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s got %d bytes: %s", r.Method, len(in), body)
	})
	tlsOrg := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "over tls") }))
	t.Cleanup(tlsOrg.Close)
	tlsPort := tlsOrg.Listener.Addr().(*net.TCPAddr).Port
	rec := newRecorder()
	_, addr := startProxy(t, netproxy.Options{List: mustList(t, fmt.Sprintf("registry.test:%d", org.port), fmt.Sprintf("secure.test:%d", tlsPort)),
		AllowPrivate: true, AllowLoopback: true, Resolver: names{"registry.test": "127.0.0.1", "secure.test": "127.0.0.1"}, OnConn: rec.record})

	res, err := client(addr).Post(fmt.Sprintf("http://registry.test:%d/pkg", org.port), "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.HasPrefix(string(got), "POST got 5 bytes: xxx") {
		t.Fatalf("forwarded: %d %.60s", res.StatusCode, got)
	}
	c := rec.next(t)
	if c.Verdict != netproxy.Allowed || c.Host != "registry.test" || c.Port != org.port || c.Method != "POST" || c.BytesUp != 5 || c.BytesDown != int64(len(got)) {
		t.Fatalf("forwarded request reported as %+v", c)
	}

	tc := client(addr)
	tc.Transport.(*http.Transport).TLSClientConfig = tlsOrg.Client().Transport.(*http.Transport).TLSClientConfig
	// The certificate names 127.0.0.1 and example.com: ask for the
	// tunnel by name, check the certificate against the address.
	tc.Transport.(*http.Transport).TLSClientConfig.ServerName = "example.com"
	res, err = tc.Get(fmt.Sprintf("https://secure.test:%d/", tlsPort))
	if err != nil {
		t.Fatal(err)
	}
	got, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if string(got) != "over tls" {
		t.Fatalf("tunnelled: %q", got)
	}
	c = rec.next(t)
	if c.Verdict != netproxy.Allowed || c.Method != "CONNECT" || c.Host != "secure.test" || c.BytesUp < 100 || c.BytesDown < 100 {
		t.Fatalf("tunnel reported as %+v", c)
	}
}

// Refusals answer 403 at once, with a body naming the rule, and the
// destination is never contacted.
func TestRefusals(t *testing.T) {
	t.Parallel()
	org := newOrigin(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "reached") })
	rec := newRecorder()
	_, addr := startProxy(t, netproxy.Options{List: mustList(t, fmt.Sprintf("private.test:%d", org.port), "nowhere.test"),
		Resolver: names{"private.test": "127.0.0.1", "other.test": "127.0.0.1"}, OnConn: rec.record})
	for _, tc := range []struct {
		url, says, verdict string
		status             int
	}{
		{fmt.Sprintf("http://other.test:%d/", org.port), fmt.Sprintf("not in this project's network list: other.test:%d", org.port), netproxy.Refused, 403},
		{fmt.Sprintf("http://private.test:%d/", org.port), "private.test resolves to the worker's own address (loopback, link-local or a cloud's metadata endpoint): 127.0.0.1", netproxy.Refused, 403},
		{"http://nowhere.test/", "nowhere.test does not resolve", netproxy.Failed, 502},
	} {
		res, err := client(addr).Get(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tc.status || !strings.Contains(string(got), tc.says) {
			t.Errorf("%s: %d %q, want %d saying %q", tc.url, res.StatusCode, got, tc.status, tc.says)
		}
		if c := rec.next(t); c.Verdict != tc.verdict || !strings.Contains(c.Reason, tc.says) {
			t.Errorf("%s reported as %+v", tc.url, c)
		}
	}
	// CONNECT is judged alike.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || res.StatusCode != 403 {
		t.Fatalf("CONNECT not listed: %v %v", res, err)
	}
	rec.next(t)
	if n := org.accepts.Load(); n != 0 {
		t.Fatalf("the origin was contacted %d times", n)
	}
}

// What is not a proxy request is answered 400 and says what to send.
func TestMalformedRequests(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	_, addr := startProxy(t, netproxy.Options{List: mustList(t, "example.org"), OnConn: rec.record, MaxHeaderBytes: 4096})
	for _, tc := range []struct{ raw, status, says string }{
		{"GET /path HTTP/1.1\r\nHost: example.org\r\n\r\n", "400", "absolute form"},
		{"GET https://example.org/ HTTP/1.1\r\nHost: example.org\r\n\r\n", "400", "through CONNECT"},
		{"CONNECT example.org HTTP/1.1\r\nHost: example.org\r\n\r\n", "400", "host:port"},
		{"CONNECT example.org:99999 HTTP/1.1\r\nHost: example.org:99999\r\n\r\n", "400", "between 1 and 65535"},
		{"GET http://exa_mple.org/ HTTP/1.1\r\nHost: exa_mple.org\r\n\r\n", "400", "not a valid host name"},
		{"GET http://example.org/ HTTP/1.1\r\nHost: example.org\r\nX-Big: " + strings.Repeat("a", 10000) + "\r\n\r\n", "431", ""},
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(conn, tc.raw)
		got, _ := io.ReadAll(io.LimitReader(conn, 64<<10))
		conn.Close()
		if !strings.HasPrefix(string(got), "HTTP/1.1 "+tc.status) || !strings.Contains(string(got), tc.says) {
			t.Errorf("%.60q: answered %.200q", tc.raw, got)
		}
	}
}

// The proxy bounds the connections open at once, and Close ends every
// tunnel and leaves nothing listening.
func TestBoundsAndClose(t *testing.T) {
	t.Parallel()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	port := echo.Addr().(*net.TCPAddr).Port
	rec := newRecorder()
	px, addr := startProxy(t, netproxy.Options{List: mustList(t, fmt.Sprintf("echo.test:%d", port)), AllowPrivate: true, AllowLoopback: true,
		Resolver: names{"echo.test": "127.0.0.1"}, OnConn: rec.record, MaxConns: 2})
	var tunnels []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT echo.test:%d HTTP/1.1\r\nHost: echo.test\r\n\r\n", port)
		br := bufio.NewReader(c)
		res, err := http.ReadResponse(br, nil)
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("tunnel: %v %v", res, err)
		}
		io.WriteString(c, "ping")
		buf := make([]byte, 4)
		if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("echo through the tunnel: %q %v", buf, err)
		}
		tunnels = append(tunnels, c)
	}
	third, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = third.SetDeadline(time.Now().Add(10 * time.Second))
	got, _ := io.ReadAll(third)
	if !strings.HasPrefix(string(got), "HTTP/1.1 503") {
		t.Fatalf("a third connection: %q", got)
	}
	if c := rec.next(t); c.Verdict != netproxy.Refused || !strings.Contains(c.Reason, "more than 2 connections") {
		t.Fatalf("the third connection reported as %+v", c)
	}
	if err := px.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range tunnels {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
			t.Fatalf("a tunnel outlived Close: %v", err)
		}
	}
	for range 2 {
		if c := rec.next(t); c.Verdict != netproxy.Allowed || c.BytesUp != 4 || c.BytesDown != 4 {
			t.Fatalf("a closed tunnel reported as %+v", c)
		}
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("something still listens after Close")
	}
}

func isReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "reset") || strings.Contains(err.Error(), "closed"))
}

// FuzzTarget: whatever a request line says, Target either refuses it or
// names a normalized host no longer than a DNS name and a port in range.
func FuzzTarget(f *testing.F) {
	for _, s := range []string{"CONNECT example.org:443", "GET http://example.org/", "GET http://[::1]:80/", "GET /x",
		"CONNECT [2001:db8::1]:8443", "GET http://bücher.example/", "GET http://a:b@c/", "CONNECT :0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		raw := line + " HTTP/1.1\r\nHost: h.example\r\n\r\n"
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			return
		}
		host, port, err := netproxy.Target(r)
		if len(host) > 253 {
			t.Fatalf("%q: host of %d bytes", line, len(host))
		}
		if err == nil {
			if port < 1 || port > 65535 || host == "" {
				t.Fatalf("%q: %q:%d accepted", line, host, port)
			}
			if n, nerr := netpolicy.NormalizeHost(host); nerr != nil || n != host {
				t.Fatalf("%q: host %q is not normalized", line, host)
			}
		}
	})
}

// FuzzProxyRequest sends arbitrary bytes to a live proxy whose list allows
// one host that does not resolve: every answer is one bounded HTTP status
// line, and nothing but the listed host is ever looked up.
func FuzzProxyRequest(f *testing.F) {
	for _, s := range []string{"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		"CONNECT allowed.test:443 HTTP/1.1\r\n\r\n", "CONNECT x HTTP/1.0\r\n\r\n", "\r\n\r\n", "GET http://other.test/ HTTP/1.1\r\n\r\n"} {
		f.Add([]byte(s))
	}
	var dialled atomic.Int32
	px := netproxy.New(netproxy.Options{List: mustListF(f), Resolver: countingResolver{&dialled}, MaxHeaderBytes: 4096, HeaderTimeout: time.Second})
	f.Cleanup(func() { _ = px.Close() })
	l := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	go func() { _ = px.Serve(l) }()
	f.Fuzz(func(t *testing.T, in []byte) {
		c, s := net.Pipe()
		l.conns <- s
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		go func() { _, _ = c.Write(in); _ = c.Close() }()
		out, _ := io.ReadAll(io.LimitReader(c, 1<<20))
		c.Close()
		// net/http answers an HTTP/1.0 request in HTTP/1.0.
		if len(out) > 0 && !strings.HasPrefix(string(out), "HTTP/1.1 ") && !strings.HasPrefix(string(out), "HTTP/1.0 ") {
			t.Fatalf("answer %.80q", out)
		}
		if dialled.Load() != 0 {
			t.Fatal("the proxy looked up a host that is not on its list")
		}
	})
}

func mustListF(f *testing.F) *netpolicy.List {
	l, err := netpolicy.Compile([]string{"allowed.test:9"})
	if err != nil {
		f.Fatal(err)
	}
	return l
}

type countingResolver struct{ n *atomic.Int32 }

func (r countingResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if host != "allowed.test" {
		r.n.Add(1)
	}
	return nil, errors.New("no")
}

type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{} }

// upgradeOrigin answers a request asking to upgrade with 101 and then
// echoes what it receives.
func upgradeOrigin(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				r, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				if r.Header.Get("Upgrade") != "echo" || r.RequestURI != "/chat" {
					io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 3\r\nConnection: close\r\n\r\nno\n")
					return
				}
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
				_, _ = io.Copy(c, br)
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// upgradeThrough asks the proxy at addr to upgrade a request to the echo
// origin, and says hello through the upgraded connection.
func upgradeThrough(t *testing.T, addr string, port int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET http://ws.test:%d/chat HTTP/1.1\r\nHost: ws.test:%d\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n", port, port)
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols || res.Header.Get("Upgrade") != "echo" {
		t.Fatalf("upgrade: %v %v", res, err)
	}
	io.WriteString(c, "hello")
	buf := make([]byte, 5)
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("echo through the upgraded connection: %q %v", buf, err)
	}
	return c
}

// A connection upgraded by a 101 answer (a WebSocket) is a tunnel like a
// CONNECT's: its bytes are counted in its record, it is reaped when it
// moves nothing for the idle timeout, and Close ends it.
func TestUpgradedConnectionIsCountedAndReaped(t *testing.T) {
	t.Parallel()
	port := upgradeOrigin(t)
	list := fmt.Sprintf("ws.test:%d", port)
	rec := newRecorder()
	_, addr := startProxy(t, netproxy.Options{List: mustList(t, list), AllowLoopback: true,
		Resolver: names{"ws.test": "127.0.0.1"}, OnConn: rec.record, IdleTimeout: 200 * time.Millisecond})
	c := upgradeThrough(t, addr, port)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("an idle upgraded connection was not reaped: %v", err)
	}
	if got := rec.next(t); got.Verdict != netproxy.Allowed || got.Method != "GET" || got.Host != "ws.test" || got.BytesUp != 5 || got.BytesDown != 5 {
		t.Fatalf("the upgraded connection reported as %+v", got)
	}

	rec = newRecorder()
	px, addr := startProxy(t, netproxy.Options{List: mustList(t, list), AllowLoopback: true,
		Resolver: names{"ws.test": "127.0.0.1"}, OnConn: rec.record})
	c = upgradeThrough(t, addr, port)
	closed := make(chan error, 1)
	go func() { closed <- px.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close waits for an upgraded connection")
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("an upgraded connection outlived Close: %v", err)
	}
	if got := rec.next(t); got.BytesUp != 5 || got.BytesDown != 5 {
		t.Fatalf("the upgraded connection reported as %+v", got)
	}
}

// The private switch never opens the worker's own loopback or a cloud's
// metadata endpoint: those have a switch of their own.
func TestAllowPrivateKeepsLoopbackClosed(t *testing.T) {
	t.Parallel()
	org := newOrigin(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "reached") })
	rec := newRecorder()
	_, addr := startProxy(t, netproxy.Options{List: mustList(t, fmt.Sprintf("local.test:%d", org.port), "meta.test"), AllowPrivate: true,
		Resolver: names{"local.test": "127.0.0.1", "meta.test": "169.254.169.254"}, OnConn: rec.record})
	for _, u := range []string{fmt.Sprintf("http://local.test:%d/", org.port), "http://meta.test/latest/meta-data/"} {
		res, err := client(addr).Get(u)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden || !strings.Contains(string(got), "ANVIL_RUNS_ALLOW_LOOPBACK=true") {
			t.Errorf("%s with ANVIL_RUNS_ALLOW_PRIVATE: %d %q", u, res.StatusCode, got)
		}
		if c := rec.next(t); c.Verdict != netproxy.Refused {
			t.Errorf("%s reported as %+v", u, c)
		}
	}
	if n := org.accepts.Load(); n != 0 {
		t.Fatalf("the worker's loopback was reached %d times", n)
	}
}
