package main

// A run's egress proxy (docs/network.md): what it adds to a request and how
// much it moves through CONNECT, on the path a sandboxed command's traffic
// takes — a loopback TCP connection to the bridge (anvil's own binary, as
// `anvil sandbox-bridge`), the proxy's Unix socket, the proxy, the origin —
// compared with the same client talking to the origin directly, in one run.
// The origin is a local server; the proxy judges every request by a
// network list and dials through the confined dialer, as in a run; its
// connection record is written off the connections' path (package
// network) and is left out here.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"anvil/domain/netpolicy"
	"anvil/domain/netproxy"
	"anvil/jobs/sandbox"
)

func init() {
	register("runs/proxy", benchProxy)
}

const (
	proxyRequests  = 2000     // sequential small requests, each way
	proxyDownloads = 8        // concurrent downloads, each way
	proxyDownload  = 64 << 20 // bytes each
)

type benchNames map[string]string

func (n benchNames) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := n[strings.TrimSuffix(host, ".")]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, errors.New("no such host")
}

func benchProxy(ctx context.Context, env *benchEnv) error {
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	origin := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/small" {
			_, _ = io.WriteString(w, "a small answer, like a registry's 304 or a packument's head\n")
			return
		}
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		for n > 0 {
			k := min(n, len(chunk))
			if _, err := w.Write(chunk[:k]); err != nil {
				return
			}
			n -= k
		}
	})}
	ol, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = origin.Serve(ol) }()
	defer origin.Close()
	port := ol.Addr().(*net.TCPAddr).Port

	dir, err := os.MkdirTemp("", "anvil-bench-proxy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "proxy.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	list, err := netpolicy.Compile([]string{fmt.Sprintf("origin.bench:%d", port)})
	if err != nil {
		return err
	}
	px := netproxy.New(netproxy.Options{List: list, AllowPrivate: true, AllowLoopback: true, Resolver: benchNames{"origin.bench": "127.0.0.1"},
		MaxConns: 256, OnConn: func(netproxy.Conn) {}})
	go func() { _ = px.Serve(ul) }()
	defer px.Close()

	bl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	bridgeAddr := bl.Addr().String()
	bl.Close()
	bctx, stop := context.WithCancel(ctx)
	defer stop()
	bridge := exec.CommandContext(bctx, env.Binary, sandbox.BridgeCommand, "--socket", sock, "--listen", bridgeAddr, "--", "sleep", "3600")
	if err := bridge.Start(); err != nil {
		return err
	}
	defer func() { stop(); _ = bridge.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", bridgeAddr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the bridge did not listen: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Latency: one client, keep-alive, a small answer each time.
	direct := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	viaURL := "http://" + bridgeAddr
	proxyURL, err := url.Parse(viaURL)
	if err != nil {
		return err
	}
	proxied := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, Proxy: http.ProxyURL(proxyURL)}}
	lat := func(c *http.Client, url string) ([]time.Duration, error) {
		out := make([]time.Duration, 0, proxyRequests)
		for i := 0; i < proxyRequests+50; i++ {
			t0 := time.Now()
			res, err := c.Get(url)
			if err != nil {
				return nil, err
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				return nil, fmt.Errorf("%s: %s", url, res.Status)
			}
			if i >= 50 { // warmed up
				out = append(out, time.Since(t0))
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
		return out, nil
	}
	d, err := lat(direct, fmt.Sprintf("http://127.0.0.1:%d/small", port))
	if err != nil {
		return err
	}
	v, err := lat(proxied, fmt.Sprintf("http://origin.bench:%d/small", port))
	if err != nil {
		return err
	}
	pct := func(s []time.Duration, p float64) float64 {
		return float64(s[int(p*float64(len(s)-1))].Microseconds()) / 1000
	}
	env.note("proxy", "request p50 direct (ms)", pct(d, 0.5))
	env.note("proxy", "request p99 direct (ms)", pct(d, 0.99))
	env.note("proxy", "request p50 through the proxy (ms)", pct(v, 0.5))
	env.note("proxy", "request p99 through the proxy (ms)", pct(v, 0.99))
	env.report("proxy", "p99 added per request (ms)", max(0, pct(v, 0.99)-pct(d, 0.99)), 2)

	// Throughput: 8 downloads at once, through CONNECT tunnels and directly.
	get := func(through bool) error {
		var c net.Conn
		var err error
		if through {
			if c, err = net.Dial("tcp", bridgeAddr); err != nil {
				return err
			}
		} else if c, err = net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
			return err
		}
		defer c.Close()
		br := bufio.NewReaderSize(c, 64<<10)
		if through {
			fmt.Fprintf(c, "CONNECT origin.bench:%d HTTP/1.1\r\nHost: origin.bench:%d\r\n\r\n", port, port)
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				return err
			}
			if res.StatusCode != 200 {
				return fmt.Errorf("CONNECT: %s", res.Status)
			}
		}
		fmt.Fprintf(c, "GET /big?n=%d HTTP/1.1\r\nHost: origin.bench\r\nConnection: close\r\n\r\n", proxyDownload)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		n, err := io.Copy(io.Discard, res.Body)
		if err == nil && n != proxyDownload {
			err = fmt.Errorf("downloaded %d bytes of %d", n, proxyDownload)
		}
		return err
	}
	rate := func(through bool) (float64, error) {
		t0 := time.Now()
		errs := make(chan error, proxyDownloads)
		var wg sync.WaitGroup
		for range proxyDownloads {
			wg.Add(1)
			go func() { defer wg.Done(); errs <- get(through) }()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				return 0, err
			}
		}
		return float64(proxyDownloads*proxyDownload) / (1 << 20) / time.Since(t0).Seconds(), nil
	}
	dr, err := rate(false)
	if err != nil {
		return err
	}
	vr, err := rate(true)
	if err != nil {
		return err
	}
	env.note("proxy", "8 downloads direct (MiB/s)", dr)
	env.reportAtLeast("proxy", "8 downloads through CONNECT (MiB/s)", vr, 200)
	return nil
}
