package netpolicy_test

import (
	"errors"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"anvil/domain/netpolicy"
)

func TestNormalize(t *testing.T) {
	t.Parallel()
	got, err := netpolicy.Normalize([]string{" Registry.NPMjs.org ", "", "@NPM", "bücher.example:8443", "*.Example.com",
		"registry.npmjs.org", "10.0.0.5", "[2001:DB8::1]:8080", "2001:db8::2", "127.0.0.2:4873"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"registry.npmjs.org", "@npm", "xn--bcher-kva.example:8443", "*.example.com", "10.0.0.5",
		"[2001:db8::1]:8080", "2001:db8::2", "127.0.0.2:4873"}
	if !slices.Equal(got, want) {
		t.Fatalf("normalized to %q, want %q", got, want)
	}
	if empty, err := netpolicy.Normalize(nil); err != nil || empty == nil || len(empty) != 0 {
		t.Fatalf("an empty list: %v %v", empty, err)
	}
}

func TestRefusedEntries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		entry string
		kind  error
		says  string
	}{
		{"https://registry.npmjs.org", netpolicy.ErrSyntax, "without a scheme"},
		{"registry.npmjs.org/path", netpolicy.ErrSyntax, "without a scheme"},
		{"user@example.com", netpolicy.ErrSyntax, "a user"},
		{"example.com:0", netpolicy.ErrSyntax, "between 1 and 65535"},
		{"example.com:65536", netpolicy.ErrSyntax, "between 1 and 65535"},
		{"example.com:08", netpolicy.ErrSyntax, "between 1 and 65535"},
		{"example.com:", netpolicy.ErrSyntax, "between 1 and 65535"},
		{"*", netpolicy.ErrSyntax, "every host"},
		{"*.com", netpolicy.ErrSyntax, "top-level domain"},
		{"a.*.example.com", netpolicy.ErrSyntax, "first label"},
		{"*.10.0.0.1", netpolicy.ErrSyntax, "not an IP address"},
		{"exa mple.com", netpolicy.ErrSyntax, "spaces"},
		{"under_score.example", netpolicy.ErrSyntax, "not a valid host name"},
		{"127.1", netpolicy.ErrSyntax, "written in full"},
		{"localhost", netpolicy.ErrSyntax, "loopback"},
		{"127.0.0.1:8080", netpolicy.ErrSyntax, "loopback"},
		{"[::1]:80", netpolicy.ErrSyntax, "loopback"},
		{"[example.com]:80", netpolicy.ErrSyntax, "IPv6"},
		{"@npmjs", netpolicy.ErrUnknownPreset, "@npm @pypi @go"},
		{strings.Repeat("a", 254), netpolicy.ErrSyntax, "longer than 253"},
		{strings.Repeat("a", 64) + ".example", netpolicy.ErrSyntax, "63"},
	} {
		_, err := netpolicy.Normalize([]string{"ok.example", tc.entry})
		var ee *netpolicy.EntryError
		if !errors.Is(err, tc.kind) || !errors.As(err, &ee) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%q: %v, want %v saying %q", tc.entry, err, tc.kind, tc.says)
			continue
		}
		if !strings.HasPrefix(tc.entry, strings.TrimSuffix(ee.Entry, "…")) {
			t.Errorf("%q: the error names %q", tc.entry, ee.Entry)
		}
	}
	long := make([]string, netpolicy.MaxEntries+1)
	for i := range long {
		long[i] = "h" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + ".example" + strings.Repeat("e", i/26)
	}
	if _, err := netpolicy.Normalize(long); !errors.Is(err, netpolicy.ErrTooMany) {
		t.Fatalf("%d entries: %v", len(long), err)
	}
	if _, err := netpolicy.Normalize(long[:netpolicy.MaxEntries]); err != nil {
		t.Fatalf("%d entries: %v", netpolicy.MaxEntries, err)
	}
}

func TestAllow(t *testing.T) {
	t.Parallel()
	l, err := netpolicy.Compile([]string{"@npm", "example.org", "api.example.net:8443", "*.cdn.example", "*.mirror.example:8080",
		"198.51.100.7:9000", "2001:db8::9"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		port int
		ok   bool
	}{
		{"registry.npmjs.org", 443, true},
		{"REGISTRY.NPMJS.ORG.", 443, true},
		{"registry.npmjs.org", 80, true},
		{"registry.npmjs.org", 8443, false},
		{"evil.registry.npmjs.org", 443, false},
		{"example.org", 443, true},
		{"example.org", 22, false},
		{"www.example.org", 443, false},
		{"api.example.net", 8443, true},
		{"api.example.net", 443, false},
		{"a.cdn.example", 443, true},
		{"a.b.cdn.example", 80, true},
		{"cdn.example", 443, false},
		{"xcdn.example", 443, false},
		{"a.mirror.example", 8080, true},
		{"a.mirror.example", 443, false},
		{"198.51.100.7", 9000, true},
		{"198.51.100.7", 443, false},
		{"[2001:db8::9]", 443, true},
		{"2001:db8::9", 80, true},
		{"example.com", 443, false},
		{"", 443, false},
		{"example.org", 0, false},
	} {
		err := l.Allow(tc.host, tc.port)
		if (err == nil) != tc.ok {
			t.Errorf("%s:%d: %v, want allowed=%v", tc.host, tc.port, err, tc.ok)
		}
		if err != nil && !errors.Is(err, netpolicy.ErrNotListed) {
			t.Errorf("%s:%d: %v is not ErrNotListed", tc.host, tc.port, err)
		}
	}
	if err := l.Allow("example.com", 443); err.Error() != "not in this project's network list: example.com:443" {
		t.Errorf("the refusal reads %q", err)
	}
	var empty *netpolicy.List
	if !empty.Empty() || empty.Allow("example.org", 443) == nil {
		t.Fatal("a nil list allows something")
	}
}

func TestCheckAddr(t *testing.T) {
	t.Parallel()
	err := netpolicy.CheckAddr("example.org", 443, netip.MustParseAddr("10.0.0.5"), netpolicy.Reach{})
	if !errors.Is(err, netpolicy.ErrPrivate) || !strings.HasPrefix(err.Error(), "example.org resolves to a private address: 10.0.0.5") ||
		!strings.Contains(err.Error(), "ANVIL_RUNS_ALLOW_PRIVATE=true") {
		t.Fatalf("private: %v", err)
	}
	for _, a := range []string{"::ffff:10.1.2.3", "fd00::1", "100.64.0.1", "192.168.1.1"} {
		if netpolicy.CheckAddr("h.example", 443, netip.MustParseAddr(a), netpolicy.Reach{}) == nil {
			t.Errorf("%s is not refused", a)
		}
		if netpolicy.CheckAddr("h.example", 443, netip.MustParseAddr(a), netpolicy.Reach{Private: true}) != nil {
			t.Errorf("%s is refused with the switch on", a)
		}
	}
	// The private switch never opens the worker's own addresses: they have
	// a switch of their own.
	for _, a := range []string{"127.0.0.1", "127.9.9.9", "::1", "0.0.0.0", "0.1.2.3", "::", "169.254.169.254", "fe80::1",
		"::ffff:127.0.0.1", "64:ff9b::7f00:1", "fd00:ec2::254", "100.100.100.200"} {
		err := netpolicy.CheckAddr("h.example", 443, netip.MustParseAddr(a), netpolicy.Reach{Private: true})
		if !errors.Is(err, netpolicy.ErrPrivate) || !strings.Contains(err.Error(), "ANVIL_RUNS_ALLOW_LOOPBACK=true") {
			t.Errorf("%s with ANVIL_RUNS_ALLOW_PRIVATE: %v", a, err)
		}
		if netpolicy.CheckAddr("h.example", 443, netip.MustParseAddr(a), netpolicy.Reach{Loopback: true}) != nil {
			t.Errorf("%s is refused with ANVIL_RUNS_ALLOW_LOOPBACK", a)
		}
	}
	if err := netpolicy.CheckAddr("h.example", 443, netip.MustParseAddr("93.184.215.14"), netpolicy.Reach{}); err != nil {
		t.Fatal(err)
	}
}

// The presets' table in docs/network.md is the code's table: every preset
// row names exactly its hosts, and the page has no preset the code lacks.
func TestPresetsTableMatchesTheDocs(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../../docs/network.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(@[a-z]+)` \\| ([^|]*) \\|")
	rows := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(string(page), -1) {
		var hosts []string
		for _, h := range strings.Split(m[2], ",") {
			hosts = append(hosts, strings.Trim(strings.TrimSpace(h), "`"))
		}
		rows[m[1]] = hosts
	}
	if len(rows) != len(netpolicy.Presets) {
		t.Errorf("docs/network.md lists %d presets, the code %d", len(rows), len(netpolicy.Presets))
	}
	for _, p := range netpolicy.Presets {
		if !slices.Equal(rows[p.Name], p.Hosts) {
			t.Errorf("docs/network.md: %s lists %q, the code %q", p.Name, rows[p.Name], p.Hosts)
		}
		for _, h := range p.Hosts {
			if n, err := netpolicy.NormalizeHost(h); err != nil || n != h {
				t.Errorf("%s: host %q is not canonical (%q, %v)", p.Name, h, n, err)
			}
		}
	}
}

// FuzzNormalize: whatever the input, Normalize either refuses it with one
// of its kinds or returns a list within the bounds whose entries are each
// their own canonical form (reading the output again changes nothing) and
// compile.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"@npm", "example.org:443", "*.example.com", "[2001:db8::1]:80", "bücher.example", "https://x",
		"a:b:c", "[", "*.", "@", "10.0.0.1:65535", "xn--", "ａ.example"} {
		f.Add(s, "registry.npmjs.org")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		out, err := netpolicy.Normalize([]string{a, b, a})
		if err != nil {
			if !errors.Is(err, netpolicy.ErrSyntax) && !errors.Is(err, netpolicy.ErrUnknownPreset) && !errors.Is(err, netpolicy.ErrTooMany) {
				t.Fatalf("%q %q: an error of no kind: %v", a, b, err)
			}
			return
		}
		if len(out) > 2 {
			t.Fatalf("%q %q: %d entries from two", a, b, len(out))
		}
		for _, e := range out {
			if len(e) > netpolicy.MaxEntryBytes+8 || !utf8.ValidString(e) || strings.ContainsAny(e, " /\x00") {
				t.Fatalf("entry %q out of bounds", e)
			}
		}
		again, err := netpolicy.Normalize(out)
		if err != nil || !slices.Equal(again, out) {
			t.Fatalf("%q is not canonical: %q %v", out, again, err)
		}
		l, err := netpolicy.Compile(out)
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Allow(a, 443)
	})
}
