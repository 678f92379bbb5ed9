package sandbox

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"anvil/domain/netpolicy"
	"anvil/domain/netproxy"
)

// localOrigin serves hello on 127.0.0.2 (loopback, but not a name NO_PROXY
// keeps inside the sandbox) and counts its accepted connections.
func localOrigin(t *testing.T) (port int, accepts *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	accepts = new(atomic.Int32)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello from the host\n") }),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				accepts.Add(1)
			}
		}}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return l.Addr().(*net.TCPAddr).Port, accepts
}

// proxyFor starts a run's proxy for list on a socket beside ws and the
// bridge it needs.
func proxyFor(t *testing.T, ws string, entries ...string) (*Network, chan netproxy.Conn) {
	t.Helper()
	list, err := netpolicy.Compile(entries)
	if err != nil {
		t.Fatal(err)
	}
	bridge, err := InstallBridge(filepath.Dir(ws))
	if err != nil {
		t.Fatal(err)
	}
	l, err := ListenProxySocket(ws + ".proxy.sock")
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan netproxy.Conn, 16)
	px := netproxy.New(netproxy.Options{List: list, AllowPrivate: true, AllowLoopback: true, OnConn: func(c netproxy.Conn) { conns <- c }})
	go func() { _ = px.Serve(l) }()
	t.Cleanup(func() {
		_ = px.Close()
		if _, err := os.Stat(ws + ".proxy.sock"); err == nil {
			t.Error("the proxy's socket outlived the proxy")
		}
	})
	return &Network{Socket: ws + ".proxy.sock", Bridge: bridge}, conns
}

// A run with a network reaches a listed server through the bridge and the
// proxy with curl as it is, is refused what is not listed (before anything
// is dialled), and still has no DNS and no route of its own: a name lookup
// and a direct connection fail at once.
func TestBwrapNetworkThroughTheProxy(t *testing.T) {
	t.Parallel()
	e := bwrapExec(t)
	port, accepts := localOrigin(t)
	other, otherAccepts := localOrigin(t)
	ws := newWorkspace(t)
	network, conns := proxyFor(t, ws, fmt.Sprintf("127.0.0.2:%d", port))
	cmd := fmt.Sprintf(`set -u
curl -sS http://127.0.0.2:%[1]d/
echo "refused: $(curl -s -o /dev/null -w '%%{http_code}' http://127.0.0.2:%[2]d/)"
env | grep -i proxy | sort
timeout 2 getent hosts example.org; echo "getent: $?"
timeout 2 curl -sS --noproxy '*' http://example.org/ 2>&1; echo "direct name: $?"
timeout 2 curl -sS --noproxy '*' http://127.0.0.2:%[1]d/ 2>&1; echo "direct address: $?"`, port, other)
	var out syncBuffer
	res, err := e.Run(context.Background(), Spec{Workspace: ws, Command: cmd, Limits: DefaultLimits(), Network: network}, &out)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %+v %v\n%s", res, err, out.String())
	}
	log := out.String()
	for _, want := range []string{"hello from the host\n", "refused: 403\n", "HTTPS_PROXY=http://127.0.0.1:3128\n",
		"https_proxy=http://127.0.0.1:3128\n", "NO_PROXY=localhost,127.0.0.1,::1\n", "npm_config_https_proxy=http://127.0.0.1:3128\n",
		"getent: 2\n", "direct name: 6\n", "direct address: 7\n"} {
		if !strings.Contains(log, want) {
			t.Errorf("output lacks %q:\n%s", want, log)
		}
	}
	if accepts.Load() != 1 || otherAccepts.Load() != 0 {
		t.Errorf("the listed server accepted %d connections, the other %d", accepts.Load(), otherAccepts.Load())
	}
	got := map[string]netproxy.Conn{}
	for range 2 {
		c := <-conns
		got[c.Verdict] = c
	}
	if c := got[netproxy.Allowed]; c.Port != port || c.BytesDown == 0 {
		t.Errorf("allowed connection: %+v", c)
	}
	if c := got[netproxy.Refused]; c.Port != other || !strings.Contains(c.Reason, "not in this project's network list") {
		t.Errorf("refused connection: %+v", c)
	}
}

// A run without a network has no proxy variables and reaches nothing.
func TestBwrapOfflineHasNoProxy(t *testing.T) {
	t.Parallel()
	e := bwrapExec(t)
	port, accepts := localOrigin(t)
	res, out, _ := run(t, e, fmt.Sprintf(`env | grep -ci proxy; timeout 2 curl -sS http://127.0.0.2:%d/ 2>&1; echo "curl: $?"`, port))
	if res.ExitCode != 0 || !strings.HasPrefix(out, "0\n") || !strings.Contains(out, "curl: 7\n") || accepts.Load() != 0 {
		t.Fatalf("offline run: %+v %q (%d accepts)", res, out, accepts.Load())
	}
}

// The bridge passes the command's exit status on, and a signal's as
// 128+n, as the sandbox does without it.
func TestBridgeExitStatus(t *testing.T) {
	t.Parallel()
	e := bwrapExec(t)
	for cmd, want := range map[string]int{"exit 3": 3, "kill -TERM $$": 128 + 15, "true": 0} {
		ws := newWorkspace(t)
		network, _ := proxyFor(t, ws, "example.org")
		var out syncBuffer
		res, err := e.Run(context.Background(), Spec{Workspace: ws, Command: cmd, Limits: DefaultLimits(), Network: network}, &out)
		if err != nil || res.ExitCode != want {
			t.Errorf("%s: %+v %v, want exit %d\n%s", cmd, res, err, want, out.String())
		}
	}
}
