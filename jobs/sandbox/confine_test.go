package sandbox

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"anvil/domain/repourl"
)

// mapResolver resolves names from a table (a DNS the test controls).
type mapResolver map[string][]netip.Addr

func (m mapResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, ok := m[host]; ok {
		return a, nil
	}
	return net.DefaultResolver.LookupNetIP(ctx, network, host)
}

// public is the test's stand-in for a public address: 127.0.0.2 is on the
// loopback interface but the narrowed policy treats it as public, so that a
// "public" repository can be served without leaving the machine.
var public = netip.MustParseAddr("127.0.0.2")

// strictPolicy is the default policy, but for 127.0.0.2 (see public).
func strictPolicy(res repourl.Resolver) repourl.Policy {
	return repourl.Policy{Resolver: res, IsLocal: func(a netip.Addr) bool { return a != public && repourl.IsLocalAddr(a) }}
}

// strictGits runs f with a host and a confined git under strictPolicy.
func strictGits(t *testing.T, res repourl.Resolver, f func(t *testing.T, g *Git)) {
	gits(t, func(t *testing.T, g *Git) {
		g.Policy = strictPolicy(res)
		f(t, g)
	})
}

// listenLoopback returns a listener on 127.0.0.1 and a func that reports
// whether anything connected to it so far (without waiting).
func listenLoopback(t *testing.T) (net.Listener, func() bool) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, func() bool {
		// A connection git made is complete (in the backlog) by the time
		// Checkout has returned; a deadline in the past only drains it.
		_ = ln.(*net.TCPListener).SetDeadline(time.Now())
		c, err := ln.Accept()
		if err == nil {
			c.Close()
			return true
		}
		return false
	}
}

// gitServer serves the fixture's bare repository over git's smart HTTP on
// addr (git http-backend behind net/http/cgi), counting requests.
func gitServer(t *testing.T, addr string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	backend := filepath.Join(gitExecPath(t), "git-http-backend")
	h := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(fixture.bare), "GIT_HTTP_EXPORT_ALL=1"}}
	n := new(atomic.Int64)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h.ServeHTTP(w, r)
	}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, n
}

func gitExecPath(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func TestCheckoutRefusesLocalRepositories(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "pwned")
	strictGits(t, nil, func(t *testing.T, g *Git) {
		for _, u := range []string{fixture.url, fixture.bare, "ext::sh -c touch% " + marker, "fd::3"} {
			dir := newWorkspace(t)
			var log syncBuffer
			_, err := g.Checkout(context.Background(), u, "main", "", "", dir, &log)
			if err == nil {
				t.Fatalf("Checkout(%q) succeeded", u)
			}
			if !errors.Is(err, repourl.ErrLocal) && !errors.Is(err, repourl.ErrSyntax) {
				t.Fatalf("Checkout(%q): %v, want a policy refusal", u, err)
			}
			if errors.Is(err, repourl.ErrLocal) && !strings.Contains(err.Error(), "ANVIL_CHECKOUT_ALLOW_LOCAL=true") {
				t.Fatalf("Checkout(%q): the refusal does not name the variable: %v", u, err)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Fatalf("Checkout(%q) left %d entries", u, len(ents))
			}
			if err := g.Probe(context.Background(), u, ""); err == nil {
				t.Fatalf("Probe(%q) succeeded", u)
			}
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("ext:: ran a command")
		}
	})
}

func TestCheckoutLoopbackSeesNoConnection(t *testing.T) {
	t.Parallel()
	ln, connected := listenLoopback(t)
	port := ln.Addr().(*net.TCPAddr).Port
	res := mapResolver{"git.example.test": {netip.MustParseAddr("127.0.0.1")}}
	strictGits(t, res, func(t *testing.T, g *Git) {
		for _, u := range []string{
			"http://" + ln.Addr().String() + "/o/r.git",
			"https://[::ffff:127.0.0.1]:" + itoa(port) + "/o/r.git",
			"http://localhost:" + itoa(port) + "/o/r.git",        // the host's DNS answers loopback
			"http://git.example.test:" + itoa(port) + "/o/r.git", // a name that resolves to loopback
			"ssh://git@git.example.test:" + itoa(port) + "/o/r.git",
		} {
			_, err := g.Checkout(context.Background(), u, "main", "", "", newWorkspace(t), nil)
			if !errors.Is(err, repourl.ErrLocal) {
				t.Fatalf("Checkout(%q): %v, want ErrLocal", u, err)
			}
		}
	})
	// The subtests run in parallel, after this function has returned.
	t.Cleanup(func() {
		if connected() {
			t.Errorf("the loopback listener saw a connection")
		}
	})
}

func TestCheckoutRefusesRedirectToLoopback(t *testing.T) {
	t.Parallel()
	ln, connected := listenLoopback(t)
	// A "public" server (see public) that redirects to the loopback listener.
	redir := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+ln.Addr().String()+r.URL.RequestURI(), http.StatusMovedPermanently)
	}))
	l2, err := net.Listen("tcp", public.String()+":0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	redir.Listener = l2
	redir.Start()
	t.Cleanup(redir.Close)
	res := mapResolver{"moved.example.test": {public}}
	strictGits(t, res, func(t *testing.T, g *Git) {
		u := "http://moved.example.test:" + itoa(l2.Addr().(*net.TCPAddr).Port) + "/o/r.git"
		// Bounded: a git that followed the redirect would wait for the
		// listener's answer, which never comes.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := g.Checkout(ctx, u, "main", "", "", newWorkspace(t), nil); err == nil {
			t.Fatalf("Checkout through a redirect to loopback succeeded")
		}
	})
	t.Cleanup(func() {
		if connected() {
			t.Errorf("the loopback listener behind the redirect saw a connection")
		}
	})
}

func TestCheckoutPinsCheckedAddress(t *testing.T) {
	t.Parallel()
	// repo.example.test exists only in the policy's resolver: git reaches the
	// server only because it is pinned to the address the policy checked,
	// never asking DNS again (which could answer differently by then).
	srv, requests := gitServer(t, public.String()+":0")
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	res := mapResolver{"repo.example.test": {public}}
	strictGits(t, res, func(t *testing.T, g *Git) {
		u := "http://repo.example.test:" + itoa(port) + "/" + filepath.Base(fixture.bare)
		var log syncBuffer
		sha, err := g.Checkout(context.Background(), u, "main", "", "", newWorkspace(t), &log)
		if err != nil || sha != fixture.second {
			t.Fatalf("Checkout: %s, %v (log %q)", sha, err, log.String())
		}
		if err := g.Probe(context.Background(), u, ""); err != nil {
			t.Fatalf("Probe: %v", err)
		}
	})
	t.Cleanup(func() {
		if requests.Load() == 0 {
			t.Errorf("the server saw no request")
		}
	})
}

func TestCheckoutConfinedReadsNoHostFile(t *testing.T) {
	t.Parallel()
	g := confinedGit(t)
	ws := newWorkspace(t)
	// Beside the workspace (where a repair's incident file lives) and in a
	// host folder, both readable by anyone: only the namespace hides them.
	secrets := []string{filepath.Join(filepath.Dir(ws), filepath.Base(ws)+".secret"), filepath.Join(filepath.Dir(wsRoot), "host.secret")}
	for _, p := range secrets {
		if err := os.WriteFile(p, []byte("host secret\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(p) })
	}
	if _, err := g.Checkout(context.Background(), fixture.url, "main", "", "", ws, nil); err != nil {
		t.Fatalf("Checkout: %v", err)
	}
	r, err := g.newRun(context.Background(), fixture.url, "", ws, nil, nil)
	if err != nil {
		t.Fatalf("newRun: %v", err)
	}
	defer r.close()
	for _, p := range append(secrets, "/etc/shadow", filepath.Join(ws, "a.txt")) {
		_, err := r.git(context.Background(), false, "hash-object", "--", p)
		inside := strings.HasPrefix(p, ws+"/")
		if inside && err != nil {
			t.Fatalf("git could not read %s in its workspace: %v", p, err)
		}
		if !inside && err == nil {
			t.Fatalf("git inside the sandbox read the host file %s", p)
		}
	}
	// The same git on the host reads them: the test can tell.
	h := hostGit(t)
	hr, err := h.newRun(context.Background(), fixture.url, "", ws, nil, nil)
	if err != nil {
		t.Fatalf("newRun: %v", err)
	}
	defer hr.close()
	if _, err := hr.git(context.Background(), false, "hash-object", "--", secrets[0]); err != nil {
		t.Fatalf("host git could not read %s: %v", secrets[0], err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestTmpBounded(t *testing.T) {
	t.Parallel()
	e := bwrapExec(t)
	ws := newWorkspace(t)
	var out syncBuffer
	// 8 MiB into a /tmp bounded to 4 MiB: the write fails with ENOSPC, what
	// was written stays below the bound, and the workspace is not /tmp.
	limits := DefaultLimits()
	limits.TmpBytes = 4 << 20
	res, err := e.Run(context.Background(), Spec{Workspace: ws, Limits: limits,
		Command: "head -c 8388608 /dev/zero > /tmp/big; echo rc=$?; wc -c < /tmp/big; df -k /tmp | tail -n 1"}, &out)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: %+v, %v, %q", res, err, out.String())
	}
	o := out.String()
	if !strings.Contains(o, "No space left on device") || !strings.Contains(o, "rc=1") {
		t.Fatalf("writing past the bound did not fail with ENOSPC: %q", o)
	}
	lines := strings.Split(o, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "rc=") && i+1 < len(lines) {
			n, err := strconv.Atoi(strings.TrimSpace(lines[i+1]))
			if err != nil || n > 4<<20 {
				t.Fatalf("/tmp holds %q bytes, bound 4 MiB", lines[i+1])
			}
		}
	}
	if _, err := os.Stat("/tmp/big"); err == nil {
		t.Fatalf("the sandbox's /tmp is the host's")
	}
}

func TestDefaultTmpBound(t *testing.T) {
	t.Parallel()
	e := bwrapExec(t)
	res, o, _ := run(t, e, "df -k /tmp | tail -n 1")
	if res.ExitCode != 0 || !strings.Contains(o, " 524288 ") {
		t.Fatalf("the default /tmp is not 512 MiB (524288 KiB): %+v %q", res, o)
	}
}
