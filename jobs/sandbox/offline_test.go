package sandbox

import (
	"bytes"
	"testing"
)

// The hint goes on a line of its own right before the first line that
// reads like a failed lookup — after it when that line began in an
// earlier write — once, whatever the writes' boundaries.
func TestOfflineHint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		writes []string
		want   string
	}{
		{"whole lines", []string{"installing\n", "npm error getaddrinfo ENOTFOUND registry.npmjs.org\nnpm error again ENOTFOUND\n"},
			"installing\nHINT\nnpm error getaddrinfo ENOTFOUND registry.npmjs.org\nnpm error again ENOTFOUND\n"},
		{"one write", []string{"a\ncurl: (6) Could not resolve host: x\nb\n"}, "a\nHINT\ncurl: (6) Could not resolve host: x\nb\n"},
		{"split line", []string{"fatal: unable to access: Could not res", "olve host: github.com\nnext\n"},
			"fatal: unable to access: Could not resolve host: github.com\nHINT\nnext\n"},
		{"begins here", []string{"x Temporary failure in name resolution", " …", "\nafter"},
			"HINT\nx Temporary failure in name resolution …\nafter"},
		{"begun before, ends later", []string{"x: ", "Temporary failure in name resolution", " …", "\nafter"},
			"x: Temporary failure in name resolution …\nHINT\nafter"},
		{"nothing", []string{"ok\n", "all good\n"}, "ok\nall good\n"},
	} {
		var out bytes.Buffer
		w := OfflineHint(&out, "HINT")
		for _, s := range tc.writes {
			if n, err := w.Write([]byte(s)); err != nil || n != len(s) {
				t.Fatalf("%s: %d %v", tc.name, n, err)
			}
		}
		if out.String() != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, out.String(), tc.want)
		}
	}
}

// A sandbox looks host names up in /etc/hosts only; the rest of the
// host's switch stays.
func TestSandboxNSSwitch(t *testing.T) {
	t.Parallel()
	got := string(sandboxNSSwitch())
	if !bytes.HasSuffix([]byte(got), []byte("hosts: files\n")) || bytes.Count([]byte(got), []byte("hosts")) != 1 {
		t.Fatalf("%q", got)
	}
}
