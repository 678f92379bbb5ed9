package sandbox

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// A run with a network list reaches the outside only through its egress
// proxy (domain/netproxy, docs/network.md). The bwrap sandbox keeps its own
// network namespace, with nothing but loopback and no route out: the proxy's
// Unix socket is bound into it, and a bridge — anvil's own binary, bound
// read-only, run as the sandbox's first process — listens on the sandbox's
// loopback at [BridgeAddr] and relays each connection to the socket, then
// starts the command as its child and ends with it. The process executor
// has no namespace to keep: its command is pointed at the proxy's loopback
// port on the host, and nothing stops it from ignoring that (the run's log
// says so).

// BridgeAddr is where the bridge listens inside the sandbox.
const BridgeAddr = "127.0.0.1:3128"

// BridgeCommand is the hidden subcommand of anvil that runs the bridge.
const BridgeCommand = "sandbox-bridge"

// Paths inside the sandbox.
const (
	sandboxBridge = "/run/anvil/bridge"
	sandboxSocket = "/run/anvil/proxy.sock"
)

// Network is a run's way out, set on a [Spec]; nil keeps the run offline.
type Network struct {
	// Socket is the proxy's Unix socket on the host (bwrap executor),
	// reachable by the sandbox's uid.
	Socket string
	// Bridge is the bridge binary on the host (bwrap executor): the path
	// [InstallBridge] returned.
	Bridge string
	// Addr is the proxy's loopback address on the host, host:port
	// (process executor).
	Addr string
}

// NoProxy names the destinations that never go through the proxy: the
// sandbox's own loopback, where a command's own services listen.
const NoProxy = "localhost,127.0.0.1,::1"

// ProxyEnv is the environment that points a run's tools at the proxy at
// proxyURL: the conventional variables in both cases (curl, git, pip,
// Go, cargo, Ruby honour them), npm's and Yarn's own names, and Node's
// switch that makes its built-in fetch honour them.
func ProxyEnv(proxyURL string) map[string]string {
	env := map[string]string{"NO_PROXY": NoProxy, "no_proxy": NoProxy, "NODE_USE_ENV_PROXY": "1"}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy",
		"npm_config_proxy", "npm_config_https_proxy", "YARN_HTTP_PROXY", "YARN_HTTPS_PROXY"} {
		env[k] = proxyURL
	}
	return env
}

// withNetwork returns env with the proxy's variables set over it (a
// secret of the same name does not redirect the run's traffic), for the
// proxy at proxyURL; env unchanged when there is no network.
func withNetwork(env map[string]string, n *Network, proxyURL string) map[string]string {
	if n == nil {
		return env
	}
	out := make(map[string]string, len(env)+12)
	for k, v := range env {
		out[k] = v
	}
	for k, v := range ProxyEnv(proxyURL) {
		out[k] = v
	}
	return out
}

// validate checks a network before a sandbox is started.
func (n *Network) validate(sandboxed bool) error {
	if n == nil {
		return nil
	}
	if !sandboxed {
		if _, _, err := net.SplitHostPort(n.Addr); err != nil {
			return fmt.Errorf("sandbox: the proxy's address %q: %w", n.Addr, err)
		}
		return nil
	}
	for _, p := range []string{n.Socket, n.Bridge} {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("sandbox: network path %q is not absolute", p)
		}
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("sandbox: network: %w", err)
		}
	}
	return nil
}

// bwrapArgs binds the bridge and the socket into the sandbox.
func (n *Network) bwrapArgs() []string {
	if n == nil {
		return nil
	}
	return []string{"--ro-bind", n.Bridge, sandboxBridge, "--bind", n.Socket, sandboxSocket}
}

// bridgeArgv is the bridge's command line, which then runs argv.
func (n *Network) bridgeArgv(argv []string) []string {
	if n == nil {
		return argv
	}
	return append([]string{sandboxBridge, BridgeCommand, "--socket", sandboxSocket, "--listen", BridgeAddr, "--"}, argv...)
}

// InstallBridge copies this process's own binary to dir/anvil-bridge,
// readable and executable by the sandbox's uid (the binary itself may sit
// where that uid cannot reach, such as a build cache), and returns its
// path. A worker does it once at start.
func InstallBridge(dir string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("sandbox: find anvil's own binary: %w", err)
	}
	in, err := os.Open(self)
	if err != nil {
		return "", fmt.Errorf("sandbox: read anvil's own binary: %w", err)
	}
	defer in.Close()
	dst := filepath.Join(dir, "anvil-bridge")
	tmp, err := os.CreateTemp(dir, ".anvil-bridge-")
	if err != nil {
		return "", fmt.Errorf("sandbox: install the bridge: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return "", fmt.Errorf("sandbox: install the bridge: %w", err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return "", fmt.Errorf("sandbox: install the bridge: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("sandbox: install the bridge: %w", err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", fmt.Errorf("sandbox: install the bridge: %w", err)
	}
	return dst, nil
}

// ListenProxySocket creates the Unix socket of a run's proxy at path, for
// the sandbox's uid alone (when this process is root; otherwise for this
// uid, which is also the sandbox's).
func ListenProxySocket(path string) (net.Listener, error) {
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("sandbox: the proxy's socket: %w", err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(true)
	if os.Geteuid() == 0 {
		err = os.Chown(path, SandboxUID, SandboxGID)
	}
	if err == nil {
		err = os.Chmod(path, 0o600)
	}
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("sandbox: the proxy's socket: %w", err)
	}
	return l, nil
}

// BridgeMain is the bridge (anvil sandbox-bridge --socket S --listen A --
// COMMAND…), the sandbox's first process: it listens on A, relays every
// connection to the Unix socket S, runs COMMAND as its child with the same
// standard streams, and exits with its status (128+n when a signal n
// ended it). SIGTERM and SIGINT do not end the bridge — the executor sends
// them to every process of the sandbox, the command included, and the
// bridge waits for the command to end — but they are not ignored either,
// which the command would inherit.
func BridgeMain(args []string) int {
	fs := flag.NewFlagSet(BridgeCommand, flag.ContinueOnError)
	socket := fs.String("socket", "", "the proxy's Unix socket")
	listen := fs.String("listen", BridgeAddr, "where to listen")
	loopback := fs.Bool("loopback", false, "bring loopback up first (a pod's holder, pod.go)")
	if err := fs.Parse(args); err != nil {
		return 125
	}
	argv := fs.Args()
	if (*socket == "" && !*loopback) || len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "anvil: sandbox-bridge [--loopback] --socket PATH [--listen ADDR] -- COMMAND…")
		return 125
	}
	if *loopback {
		if err := loopbackUp(); err != nil {
			fmt.Fprintf(os.Stderr, "anvil: the pod cannot bring loopback up: %v\n", err)
			return 125
		}
	}
	if *socket != "" {
		l, err := net.Listen("tcp", *listen)
		if err != nil {
			fmt.Fprintf(os.Stderr, "anvil: the network bridge cannot listen on %s: %v\n", *listen, err)
			return 125
		}
		go relay(l, *socket)
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for range sigs {
		}
	}()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			fmt.Fprintf(os.Stderr, "anvil: the network bridge cannot start the command: %v\n", err)
			return 127
		}
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return 0
}

// relay accepts on l and joins each connection to the proxy's socket.
func relay(l net.Listener, socket string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			p, err := net.Dial("unix", socket)
			if err != nil {
				_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
				return
			}
			defer p.Close()
			join(c, p)
		}()
	}
}

// join copies a and b both ways, passing each end of stream on.
func join(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(b, a)
		halfClose(b)
	}()
	_, _ = io.Copy(a, b)
	halfClose(a)
	wg.Wait()
}

func halfClose(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// proxyURL is the proxy's address as the command sees it.
func proxyURL(addr string) string { return "http://" + addr }

// loopbackUp sets the loopback interface of this network namespace up.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
