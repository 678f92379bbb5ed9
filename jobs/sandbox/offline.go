package sandbox

import (
	"bytes"
	"io"
	"os"
	"strings"
)

// A sandbox has no way to resolve a name: its network namespace has no
// route to any nameserver, and names are the proxy's to resolve
// (docs/network.md). The bwrap sandbox says so to the C library itself —
// its /etc/nsswitch.conf looks host names up in /etc/hosts only — so a
// lookup fails at once and for good (EAI_NONAME, Node's ENOTFOUND, curl's
// "Could not resolve host") rather than as a temporary failure a client
// retries. A run without a network list also gets the retries of the
// package managers that retry every failure with minutes of backoff set
// to none ([OfflineEnv]), and its output goes through [OfflineHint],
// which puts anvil's explanation in the log right before the first
// failed lookup, so that the log's first error says what to do.

// OfflineEnv are the variables of a run without a network: its package
// managers' retries are of no use when nothing can be reached. A
// variable the run sets itself wins.
var OfflineEnv = map[string]string{
	"npm_config_fetch_retries": "0", // npm and pnpm: 2 retries, 10 s then 60 s apart, by default
	"PIP_RETRIES":              "0", // pip: 5 by default
	"CARGO_NET_RETRY":          "0", // cargo: 3 by default
}

// withOffline returns env with OfflineEnv under it when n is nil.
func withOffline(env map[string]string, n *Network) map[string]string {
	if n != nil {
		return env
	}
	out := make(map[string]string, len(env)+len(OfflineEnv))
	for k, v := range OfflineEnv {
		out[k] = v
	}
	for k, v := range env {
		out[k] = v
	}
	return out
}

// sandboxNSSwitch returns the sandbox's /etc/nsswitch.conf: the host's,
// with host names looked up in files only.
func sandboxNSSwitch() []byte {
	host, _ := os.ReadFile("/etc/nsswitch.conf")
	var b bytes.Buffer
	for _, line := range strings.Split(string(host), "\n") {
		if f := strings.Fields(line); len(f) > 0 && (f[0] == "hosts:" || f[0] == "hosts") {
			continue
		}
		if strings.TrimSpace(line) != "" {
			b.WriteString(line + "\n")
		}
	}
	b.WriteString("hosts: files\n")
	return b.Bytes()
}

// lookupFailures are what a failed name lookup reads like in the output of
// the tools a run uses: the C library's words, Node's and Go's codes,
// curl, git, wget, pip, Java.
var lookupFailures = [][]byte{
	[]byte("EAI_AGAIN"), []byte("ENOTFOUND"), []byte("EAI_NONAME"),
	[]byte("Could not resolve host"), []byte("Couldn't resolve host"), []byte("Could not resolve hostname"),
	[]byte("Temporary failure in name resolution"), []byte("Name or service not known"),
	[]byte("No address associated with hostname"), []byte("nodename nor servname"),
	[]byte("Failed to resolve"), []byte("unable to resolve host"), []byte("no such host"),
	[]byte("UnknownHostException"), []byte("getaddrinfo"),
}

// maxHintLine bounds what OfflineHint keeps of the current line.
const maxHintLine = 4096

// OfflineHint returns a writer that passes everything to out, and writes
// line (one line, without its newline) once, on a line of its own, right
// before the first line of the output that reads like a failed name
// lookup (after it, when that line began in an earlier write).
func OfflineHint(out io.Writer, line string) io.Writer {
	return &offlineHint{out: out, line: []byte(line + "\n")}
}

type offlineHint struct {
	out     io.Writer
	line    []byte
	cur     []byte // the current line's last bytes, already written
	pending bool   // a lookup failed on a line that is not over: hint at its end
	done    bool
}

func (h *offlineHint) Write(p []byte) (int, error) {
	if h.done {
		return h.out.Write(p)
	}
	rest := p
	for len(rest) > 0 && !h.done {
		seg := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			seg = rest[:i+1]
		}
		ends := seg[len(seg)-1] == '\n'
		if !h.pending {
			h.cur = append(h.cur, seg...)
			if len(h.cur) > maxHintLine {
				h.cur = h.cur[len(h.cur)-maxHintLine:]
			}
			if lookupFailed(h.cur) {
				if len(h.cur) == len(seg) { // the line begins here
					if _, err := h.out.Write(h.line); err != nil {
						return 0, err
					}
					h.done = true
				} else {
					h.pending = true
				}
			}
		}
		if _, err := h.out.Write(seg); err != nil {
			return 0, err
		}
		if ends {
			h.cur = h.cur[:0]
			if h.pending {
				if _, err := h.out.Write(h.line); err != nil {
					return 0, err
				}
				h.done = true
			}
		}
		rest = rest[len(seg):]
	}
	if len(rest) > 0 {
		if _, err := h.out.Write(rest); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func lookupFailed(line []byte) bool {
	for _, s := range lookupFailures {
		if bytes.Contains(line, s) {
			return true
		}
	}
	return false
}
