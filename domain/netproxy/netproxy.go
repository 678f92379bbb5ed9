// Package netproxy is a run's egress proxy: the one way a run reaches the
// network (docs/network.md). Each run that has a network list gets its own
// [Server], started before its sandbox and closed when the run ends; the
// sandbox reaches it through a Unix socket (the bwrap executor's bridge) or
// a loopback port (the process executor).
//
// It speaks HTTP proxying as clients expect it: plain HTTP requests in
// absolute form (GET http://host/path) are forwarded, and CONNECT opens a
// tunnel for TLS, which the proxy never looks into. Every request is judged
// by the run's [netpolicy.List] before anything is dialled; the proxy then
// resolves the name itself, refuses a private address unless the operator
// allows them (netpolicy.CheckAddr), and dials through the confined dialer
// every request anvil makes for a user goes through (domain/internal/egress),
// which checks the address it connects to once more. A refusal is answered at
// once with 403 and a body naming the rule.
//
// Everything a client can send is bounded: the request line and headers
// (MaxHeaderBytes), the time they may take (HeaderTimeout), the
// connections open at once (MaxConns, beyond which a connection is answered
// 503), a tunnel or request that moves nothing for IdleTimeout, and the
// whole of it by the run: Close ends every connection.
//
// Each connection (a tunnel, or one forwarded request) is reported to
// Options.OnConn when it ends, with its verdict, bytes each way and
// duration; the caller records it (package network).
package netproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"

	"anvil/domain/internal/egress"
	"anvil/domain/netpolicy"
)

// Verdicts of a connection.
const (
	Allowed = "allowed" // on the list and connected
	Refused = "refused" // refused by the policy (not listed, private address)
	Failed  = "failed"  // allowed, but the request was malformed, the name did not resolve or the dial failed
)

// Defaults of [Options].
const (
	DefaultMaxConns       = 64
	DefaultMaxHeaderBytes = 32 << 10
	DefaultHeaderTimeout  = 30 * time.Second
	DefaultIdleTimeout    = 5 * time.Minute
	dialTimeout           = 15 * time.Second
)

// Conn is one connection through the proxy, as reported when it ends.
type Conn struct {
	Host      string
	Port      int
	Method    string // CONNECT, or the forwarded request's method
	Verdict   string // Allowed, Refused or Failed
	Reason    string // why it was refused or failed; "" when allowed
	BytesUp   int64  // from the run: the tunnel's bytes, or a forwarded request's body
	BytesDown int64  // to the run: the tunnel's bytes, or a forwarded answer's body
	Started   time.Time
	Duration  time.Duration
}

// Resolver looks host names up; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options shape a proxy.
type Options struct {
	// List is what the run may reach (required; an empty list refuses
	// everything).
	List *netpolicy.List
	// AllowPrivate lets the proxy reach private addresses (the operator's
	// ANVIL_RUNS_ALLOW_PRIVATE); never the worker's own loopback or
	// link-local addresses, which only AllowLoopback opens
	// (netpolicy.Reach).
	AllowPrivate bool
	// AllowLoopback lets the proxy reach the worker's own loopback and
	// link-local addresses, a cloud's metadata endpoint among them (the
	// operator's ANVIL_RUNS_ALLOW_LOOPBACK).
	AllowLoopback bool
	// Resolver resolves names; nil is net.DefaultResolver. Tests give
	// names of their own to local servers.
	Resolver Resolver
	// OnConn receives every connection when it ends. It must not block
	// for long: it runs on the connection's goroutine.
	OnConn func(Conn)
	// Bounds; zero means the default.
	MaxConns       int
	MaxHeaderBytes int
	HeaderTimeout  time.Duration
	IdleTimeout    time.Duration
}

// Server is one run's proxy.
type Server struct {
	o      Options
	reach  netpolicy.Reach
	dialer *net.Dialer
	rp     *httputil.ReverseProxy
	tr     *http.Transport
	hs     *http.Server

	mu      sync.Mutex
	closed  bool
	tunnels map[*tunnel]struct{}
	open    atomic.Int64 // client connections
	wg      sync.WaitGroup
	done    chan struct{}
}

// errPrivateDial is the confined dialer's refusal inside the proxy.
var errPrivateDial = errors.New("netproxy: private address")

// New builds a proxy; Serve starts it.
func New(o Options) *Server {
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if o.HeaderTimeout <= 0 {
		o.HeaderTimeout = DefaultHeaderTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	s := &Server{o: o, reach: netpolicy.Reach{Private: o.AllowPrivate, Loopback: o.AllowLoopback}, tunnels: map[*tunnel]struct{}{}, done: make(chan struct{})}
	s.dialer = egress.NewDialer(egress.Options{IsPrivate: s.reach.Refuses, Refused: errPrivateDial})
	s.tr = &http.Transport{
		Proxy:                  nil,
		DialContext:            s.dialForward,
		MaxIdleConns:           16,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        30 * time.Second,
		ResponseHeaderTimeout:  o.IdleTimeout,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 1 << 20,
	}
	s.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = pr.In.URL
			pr.Out.Host = pr.In.URL.Host
			pr.Out.RequestURI = ""
		},
		Transport:     s.tr,
		FlushInterval: -1, // stream answers as they come: a registry's tarball, a model's tokens
		ErrorHandler:  s.forwardError,
		ErrorLog:      discardLog,
	}
	s.hs = &http.Server{
		Handler:           s,
		MaxHeaderBytes:    o.MaxHeaderBytes,
		ReadHeaderTimeout: o.HeaderTimeout,
		IdleTimeout:       o.IdleTimeout,
		ErrorLog:          discardLog,
	}
	go s.reapIdle()
	return s
}

// Serve accepts connections on l until Close; it returns nil after Close.
func (s *Server) Serve(l net.Listener) error {
	err := s.hs.Serve(&limitListener{Listener: l, s: s})
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops the proxy: the listener, every connection and tunnel, and
// waits until every connection has been reported. Close twice is no error.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	for t := range s.tunnels {
		t.close()
	}
	s.mu.Unlock()
	err := s.hs.Close()
	s.tr.CloseIdleConnections()
	s.wg.Wait()
	return err
}

// Open is the number of client connections open now.
func (s *Server) Open() int { return int(s.open.Load()) }

// ServeHTTP judges and serves one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	start := time.Now()
	host, port, err := Target(r)
	if err != nil {
		c := Conn{Host: clip(host, 253), Port: port, Method: clip(r.Method, 16), Verdict: Failed, Reason: err.Error(), Started: start}
		s.answer(w, http.StatusBadRequest, c)
		return
	}
	c := Conn{Host: host, Port: port, Method: r.Method, Started: start}
	if err := s.o.List.Allow(host, port); err != nil {
		c.Verdict, c.Reason = Refused, err.Error()
		s.answer(w, http.StatusForbidden, c)
		return
	}
	if r.Method == http.MethodConnect {
		s.connect(w, r, c)
		return
	}
	s.forward(w, r, c)
}

// answer refuses a request with status and the reason as its body, and
// reports it.
func (s *Server) answer(w http.ResponseWriter, status int, c Conn) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.Header().Set("X-Anvil-Proxy", c.Verdict)
	w.WriteHeader(status)
	body := "anvil: " + c.Reason + "\n"
	_, _ = io.WriteString(w, body)
	c.BytesDown = int64(len(body))
	c.Duration = time.Since(c.Started)
	s.report(c)
}

func (s *Server) report(c Conn) {
	if s.o.OnConn != nil {
		s.o.OnConn(c)
	}
}

// Target reads where a proxy request goes: a CONNECT's authority
// (host:port, required), or an absolute http:// URL's host and port (80
// when none). Anything else — an origin-form request, another scheme, a
// malformed authority — is an error saying what to send instead. The host
// comes back normalized (netpolicy.NormalizeHost), bounded to a DNS name.
func Target(r *http.Request) (string, int, error) {
	var hostport, scheme string
	if r.Method == http.MethodConnect {
		// The authority-form: r.Host holds it (r.URL.Host too).
		hostport = r.Host
		if hostport == "" || strings.ContainsAny(hostport, "/?#@") {
			return "", 0, errors.New("a CONNECT request names host:port")
		}
		scheme = "connect"
	} else {
		u := r.URL
		if u == nil || !u.IsAbs() {
			return "", 0, errors.New("this is anvil's egress proxy: send requests in absolute form (http://host/path), as clients do with HTTP_PROXY set")
		}
		if !strings.EqualFold(u.Scheme, "http") {
			return "", 0, fmt.Errorf("%s:// goes through CONNECT, not as a forwarded request", clip(strings.ToLower(u.Scheme), 16))
		}
		if u.User != nil {
			return "", 0, errors.New("a forwarded request must not carry a user in its URL")
		}
		hostport, scheme = u.Host, "http"
	}
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		if scheme == "connect" {
			return clip(hostport, 253), 0, errors.New("a CONNECT request names host:port")
		}
		host, ps = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), "80"
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 || len(ps) > 5 {
		return clip(host, 253), 0, fmt.Errorf("the port %q is not a number between 1 and 65535", clip(ps, 16))
	}
	h, err := netpolicy.NormalizeHost(host)
	if err != nil {
		return clip(host, 253), port, fmt.Errorf("%q: %w", clip(host, 80), err)
	}
	return h, port, nil
}

func clip(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "?")
}

// resolve returns the addresses to dial for host, or why not: a *Refusal
// when any of them is private (a name that resolves to a public and a
// private address is refused whole), an error when it does not resolve.
func (s *Server) resolve(ctx context.Context, host string, port int) ([]netip.Addr, error) {
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		// Fully qualified: "registry" must never become
		// "registry.corp.internal" through the worker's search list, a
		// host the list did not name (docs/network.md).
		addrs, err = s.o.Resolver.LookupNetIP(rctx, "ip", host+".")
		if err != nil || len(addrs) == 0 {
			return nil, fmt.Errorf("%s does not resolve", host)
		}
	}
	for _, a := range addrs {
		if err := netpolicy.CheckAddr(host, port, a, s.reach); err != nil {
			return nil, err
		}
	}
	return addrs, nil
}

// dial resolves host and connects to the first of its addresses that
// answers, through the confined dialer.
func (s *Server) dial(ctx context.Context, host string, port int) (net.Conn, error) {
	addrs, err := s.resolve(ctx, host, port)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	var first error
	for _, a := range addrs {
		conn, err := s.dialer.DialContext(ctx, "tcp", netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		var re *egress.RefusedError
		if errors.As(err, &re) {
			return nil, &netpolicy.Refusal{Kind: netpolicy.ErrPrivate, Host: host, Port: port, Addr: re.Addr}
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("connecting to %s failed: %s", netpolicy.HostPort(host, port), dialReason(first))
}

// dialReason is a dial error in a few words (no addresses of the worker).
func dialReason(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return "no address"
	case errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	case strings.Contains(err.Error(), "connection refused"):
		return "connection refused"
	case strings.Contains(err.Error(), "network is unreachable"), strings.Contains(err.Error(), "no route to host"):
		return "unreachable"
	}
	return "connection failed"
}

// verdictOf sorts a dial error into refused (the policy) or failed.
func verdictOf(err error) (int, string) {
	var rf *netpolicy.Refusal
	if errors.As(err, &rf) {
		return http.StatusForbidden, Refused
	}
	return http.StatusBadGateway, Failed
}

// connect opens a tunnel.
func (s *Server) connect(w http.ResponseWriter, r *http.Request, c Conn) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		c.Verdict, c.Reason = Failed, "the connection cannot be tunnelled"
		s.answer(w, http.StatusInternalServerError, c)
		return
	}
	up, err := s.dial(r.Context(), c.Host, c.Port)
	if err != nil {
		status, verdict := verdictOf(err)
		c.Verdict, c.Reason = verdict, err.Error()
		s.answer(w, status, c)
		return
	}
	client, brw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	_ = client.SetDeadline(time.Time{})
	c.Verdict = Allowed
	s.splice(&tunnel{client: client, up: up}, brw.Reader, up, []byte("HTTP/1.1 200 Connection established\r\n\r\n"), c)
}

// splice joins a client and its destination for as long as either sends
// — a CONNECT's tunnel, or a connection upgraded by a 101 answer — after
// writing greeting to the client. The tunnel is tracked from the start:
// counted, closed by the idle reaper when it moves nothing for
// IdleTimeout, and by Close; it is reported when it ends, with its bytes.
// fromClient and fromUp read what each side sends, including what was
// read ahead into a buffer before the switch.
func (s *Server) splice(t *tunnel, fromClient, fromUp io.Reader, greeting []byte, c Conn) {
	t.touch()
	if !s.track(t) {
		t.close()
		return
	}
	defer s.untrack(t)
	if _, err := t.client.Write(greeting); err != nil {
		t.close()
		c.Duration = time.Since(c.Started)
		s.report(c)
		return
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// The client may have sent its first bytes (a TLS hello) right
		// behind the request: they wait in fromClient's buffer.
		t.pipe(t.up, fromClient, &t.upBytes)
		closeWrite(t.up)
	}()
	t.pipe(t.client, fromUp, &t.downBytes)
	closeWrite(t.client)
	wg.Wait()
	t.close()
	c.BytesUp += t.upBytes.Load()
	c.BytesDown += t.downBytes.Load()
	c.Duration = time.Since(c.Started)
	s.report(c)
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// forward serves one plain HTTP request.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, c Conn) {
	if isUpgrade(r) {
		s.upgrade(w, r, c)
		return
	}
	body := &countReader{r: r.Body}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = body
	}
	cw := &countWriter{ResponseWriter: w}
	ctx := context.WithValue(r.Context(), connKey{}, &c)
	s.rp.ServeHTTP(cw, r.WithContext(ctx))
	if c.Verdict == "" {
		c.Verdict = Allowed
	}
	c.BytesUp, c.BytesDown = body.n.Load(), cw.n
	c.Duration = time.Since(c.Started)
	s.report(c)
}

type connKey struct{}

// isUpgrade reports a request that asks to switch protocols (a WebSocket,
// h2c): Connection names upgrade and Upgrade says to what.
func isUpgrade(r *http.Request) bool {
	return r.Header.Get("Upgrade") != "" && httpguts.HeaderValuesContainsToken(r.Header["Connection"], "upgrade")
}

// hopHeaders are a connection's own headers, never passed on (but for the
// upgrade's Connection and Upgrade, which upgrade sets itself).
var hopHeaders = []string{"Connection", "Proxy-Connection", "Proxy-Authorization", "Proxy-Authenticate", "Keep-Alive", "Te",
	"Trailer", "Transfer-Encoding"}

// upgrade serves a request that asks to switch protocols: it is sent to
// the destination on a connection of its own and, when the answer is 101,
// the two connections are joined like a CONNECT's tunnel (splice) —
// counted, reaped when idle, closed by Close and reported with their
// bytes — rather than left to a copy nothing tracks. Another answer is
// passed on and the connection ends.
func (s *Server) upgrade(w http.ResponseWriter, r *http.Request, c Conn) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		c.Verdict, c.Reason = Failed, "the connection cannot be upgraded"
		s.answer(w, http.StatusInternalServerError, c)
		return
	}
	up, err := s.dial(r.Context(), c.Host, c.Port)
	if err != nil {
		status, verdict := verdictOf(err)
		c.Verdict, c.Reason = verdict, err.Error()
		s.answer(w, status, c)
		return
	}
	proto := r.Header.Get("Upgrade")
	out := r.Clone(r.Context())
	out.RequestURI, out.Host = "", r.URL.Host
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	out.Header.Set("Connection", "Upgrade")
	out.Header.Set("Upgrade", proto)
	body := &countReader{r: io.NopCloser(r.Body)}
	if r.Body != nil && r.Body != http.NoBody {
		out.Body = body
	}
	_ = up.SetDeadline(time.Now().Add(s.o.IdleTimeout))
	fromUp := bufio.NewReader(up)
	var res *http.Response
	if err = out.Write(up); err == nil {
		res, err = http.ReadResponse(fromUp, out)
	}
	if err != nil {
		up.Close()
		c.Verdict, c.Reason = Failed, "the request failed: "+dialReason(err)
		s.answer(w, http.StatusBadGateway, c)
		return
	}
	c.BytesUp = body.n.Load()
	if res.StatusCode != http.StatusSwitchingProtocols {
		defer up.Close()
		defer res.Body.Close()
		for k, vs := range res.Header {
			w.Header()[k] = vs
		}
		for _, h := range hopHeaders {
			w.Header().Del(h)
		}
		w.Header().Set("Connection", "close")
		w.WriteHeader(res.StatusCode)
		cw := &countWriter{ResponseWriter: w}
		_, _ = io.Copy(cw, &idleConnReader{r: res.Body, c: up, idle: s.o.IdleTimeout})
		c.Verdict, c.BytesDown, c.Duration = Allowed, cw.n, time.Since(c.Started)
		s.report(c)
		return
	}
	client, brw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	_ = client.SetDeadline(time.Time{})
	_ = up.SetDeadline(time.Time{})
	var greeting strings.Builder
	fmt.Fprintf(&greeting, "HTTP/1.1 %s\r\n", res.Status)
	_ = res.Header.Write(&greeting)
	greeting.WriteString("\r\n")
	c.Verdict = Allowed
	s.splice(&tunnel{client: client, up: up}, brw.Reader, fromUp, []byte(greeting.String()), c)
}

// idleConnReader reads r, failing when c's peer sends nothing for idle.
type idleConnReader struct {
	r    io.Reader
	c    net.Conn
	idle time.Duration
}

func (i *idleConnReader) Read(p []byte) (int, error) {
	_ = i.c.SetReadDeadline(time.Now().Add(i.idle))
	return i.r.Read(p)
}

// dialForward is the forwarding transport's dialer: the request's own
// host and port, resolved and checked.
func (s *Server) dialForward(ctx context.Context, _, addr string) (net.Conn, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, _ := strconv.Atoi(ps)
	h, err := netpolicy.NormalizeHost(host)
	if err != nil {
		return nil, err
	}
	// The list was checked on the request; check again what is dialled.
	if err := s.o.List.Allow(h, port); err != nil {
		return nil, err
	}
	conn, err := s.dial(ctx, h, port)
	if err != nil {
		return nil, err
	}
	return &idleConn{Conn: conn, idle: s.o.IdleTimeout}, nil
}

// forwardError answers a forwarded request that could not be served.
func (s *Server) forwardError(w http.ResponseWriter, r *http.Request, err error) {
	c, _ := r.Context().Value(connKey{}).(*Conn)
	status, verdict := verdictOf(err)
	reason := err.Error()
	if verdict == Failed {
		var rf *netpolicy.Refusal
		if !errors.As(err, &rf) && !strings.Contains(reason, "does not resolve") && !strings.HasPrefix(reason, "connecting to ") {
			reason = "the request failed: " + dialReason(err)
		}
	}
	if c != nil {
		c.Verdict, c.Reason = verdict, reason
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Anvil-Proxy", verdict)
	w.WriteHeader(status)
	_, _ = io.WriteString(w, "anvil: "+reason+"\n")
}

// tunnel is an open CONNECT.
type tunnel struct {
	client, up net.Conn
	last       atomic.Int64 // unix nanos of the last byte either way
	upBytes    atomic.Int64
	downBytes  atomic.Int64
	once       sync.Once
}

func (t *tunnel) touch() { t.last.Store(time.Now().UnixNano()) }

func (t *tunnel) close() {
	t.once.Do(func() {
		t.client.Close()
		t.up.Close()
	})
}

// pipe copies src to dst, marking activity and counting into n.
func (t *tunnel) pipe(dst io.Writer, src io.Reader, n *atomic.Int64) {
	buf := make([]byte, 64<<10)
	for {
		k, err := src.Read(buf)
		if k > 0 {
			t.touch()
			if _, werr := dst.Write(buf[:k]); werr != nil {
				return
			}
			n.Add(int64(k))
		}
		if err != nil {
			return
		}
	}
}

func (s *Server) track(t *tunnel) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.tunnels[t] = struct{}{}
	return true
}

func (s *Server) untrack(t *tunnel) {
	s.mu.Lock()
	delete(s.tunnels, t)
	s.mu.Unlock()
}

// reapIdle closes tunnels that moved nothing for IdleTimeout.
func (s *Server) reapIdle() {
	every := s.o.IdleTimeout / 4
	if every > 10*time.Second {
		every = 10 * time.Second
	}
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		select {
		case <-s.done:
			return
		case now := <-tk.C:
			s.mu.Lock()
			for t := range s.tunnels {
				if now.Sub(time.Unix(0, t.last.Load())) > s.o.IdleTimeout {
					t.close()
				}
			}
			s.mu.Unlock()
		}
	}
}

// limitListener answers a connection beyond MaxConns with 503 at once.
type limitListener struct {
	net.Listener
	s *Server
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.s.open.Add(1) > int64(l.s.o.MaxConns) {
			l.s.open.Add(-1)
			l.s.report(Conn{Verdict: Refused, Reason: fmt.Sprintf("more than %d connections open at once", l.s.o.MaxConns), Started: time.Now()})
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: 52\r\n\r\nanvil: too many connections open through the proxy\n\n")
			c.Close()
			continue
		}
		return &countedConn{Conn: c, s: l.s}, nil
	}
}

type countedConn struct {
	net.Conn
	s    *Server
	once sync.Once
}

// CloseWrite half-closes the connection when it can (a tunnel passes an
// end of stream on without ending the other direction).
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.s.open.Add(-1) })
	return c.Conn.Close()
}

// idleConn is a forwarded request's connection to its origin: a read or
// write that waits longer than idle fails.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c *idleConn) Read(p []byte) (int, error) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	return c.Conn.Read(p)
}

func (c *idleConn) Write(p []byte) (int, error) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.idle))
	return c.Conn.Write(p)
}

type countReader struct {
	r io.ReadCloser
	n atomic.Int64
}

func (c *countReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n.Add(int64(k))
	return k, err
}

func (c *countReader) Close() error { return c.r.Close() }

type countWriter struct {
	http.ResponseWriter
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	k, err := c.ResponseWriter.Write(p)
	c.n += int64(k)
	return k, err
}

func (c *countWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (c *countWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// URL builds the proxy URL clients are given for addr (host:port).
func URL(addr string) string { return (&url.URL{Scheme: "http", Host: addr}).String() }

// discardLog swallows net/http's own complaints (a client that hung up):
// what matters about a connection is its record.
var discardLog = log.New(io.Discard, "", 0)
