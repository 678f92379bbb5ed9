package repourl

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// mapResolver resolves from a table; anything else does not resolve.
type mapResolver map[string][]netip.Addr

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := m[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestParse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		raw        string
		kind       Kind
		host, port string
		err        error
	}{
		{"https://github.com/o/r.git", KindHTTP, "github.com", "443", nil},
		{"HTTPS://GitHub.com:8443/o/r", KindHTTP, "github.com", "8443", nil},
		{"http://git.example.com/r", KindHTTP, "git.example.com", "80", nil},
		{"http://[2606:4700::1111]/r", KindHTTP, "2606:4700::1111", "80", nil},
		{"ssh://git@github.com/o/r.git", KindSSH, "github.com", "22", nil},
		{"git+ssh://git@host.example:2222/o/r", KindSSH, "host.example", "2222", nil},
		{"git@github.com:o/r.git", KindSSH, "github.com", "22", nil},
		{"github.com:o/r.git", KindSSH, "github.com", "22", nil},
		{"file:///srv/repo.git", KindLocal, "", "", nil},
		{"/srv/repo.git", KindLocal, "", "", nil},
		{"./repo", KindLocal, "", "", nil},
		{"repo", KindLocal, "", "", nil},
		{"ext::sh -c touch% /tmp/pwned", 0, "", "", ErrSyntax},
		{"ext::sh", 0, "", "", ErrSyntax},
		{"fd::3", 0, "", "", ErrSyntax},
		{"file::/srv/x", 0, "", "", ErrSyntax},
		{"git://github.com/o/r", 0, "", "", ErrSyntax},
		{"ftp://example.com/r", 0, "", "", ErrSyntax},
		{"file://otherhost/srv/r", 0, "", "", ErrSyntax},
		{"-uevil", 0, "", "", ErrSyntax},
		{"https://", 0, "", "", ErrSyntax},
		{"https://exa mple.com/r", 0, "", "", ErrSyntax},
		{"https://example.com/r\n", 0, "", "", ErrSyntax},
		{"http://2130706433/r", 0, "", "", ErrSyntax},
		{"http://0x7f.1/r", 0, "", "", ErrSyntax},
		{"http://127.1/r", 0, "", "", ErrSyntax},
		{"http://0177.0.0.1/r", 0, "", "", ErrSyntax},
		{"http://127.0.0.1./r", 0, "", "", ErrSyntax},
		{"https://bücher.example/r", 0, "", "", ErrSyntax},
		{"git@:o/r", 0, "", "", ErrSyntax},
		{"git@host:", 0, "", "", ErrSyntax},
		{"", 0, "", "", ErrSyntax},
	}
	for _, c := range cases {
		got, err := Parse(c.raw)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("Parse(%q) = %+v, %v; want %v", c.raw, got, err, c.err)
			}
			continue
		}
		if err != nil || got.Kind != c.kind || got.Host != c.host || got.Port != c.port {
			t.Errorf("Parse(%q) = %+v, %v; want kind %d host %q port %q", c.raw, got, err, c.kind, c.host, c.port)
		}
	}
}

func TestIsLocalAddr(t *testing.T) {
	t.Parallel()
	local := []string{
		"127.0.0.1", "127.8.9.10", "0.0.0.0", "0.1.2.3", "10.0.0.1", "172.16.5.4", "172.31.255.255", "192.168.1.1",
		"169.254.169.254", "100.64.0.1", "100.127.255.254", "224.0.0.1", "255.255.255.255", "240.0.0.1", "198.18.0.1",
		"::", "::1", "fe80::1", "fc00::1", "fd12:3456::1", "fec0::1", "ff02::1",
		"::ffff:127.0.0.1", "::ffff:10.1.2.3", "::ffff:169.254.169.254", "64:ff9b::7f00:1", "64:ff9b::a00:1", "::127.0.0.1",
		"2002:7f00:1::", "2001:db8::1",
	}
	public := []string{"140.82.121.4", "8.8.8.8", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "2a00:1450:4001::200e",
		"::ffff:140.82.121.4", "64:ff9b::8c52:7904"}
	for _, s := range local {
		if !IsLocalAddr(netip.MustParseAddr(s)) {
			t.Errorf("IsLocalAddr(%s) = false, want true", s)
		}
	}
	for _, s := range public {
		if IsLocalAddr(netip.MustParseAddr(s)) {
			t.Errorf("IsLocalAddr(%s) = true, want false", s)
		}
	}
}

func TestPolicyCheck(t *testing.T) {
	t.Parallel()
	res := mapResolver{
		"github.com":        addrs("140.82.121.4"),
		"dual.example":      addrs("140.82.121.4", "2606:4700::1111"),
		"rebind.example":    addrs("140.82.121.4", "127.0.0.1"),
		"internal.example":  addrs("10.0.0.5"),
		"localhost":         addrs("127.0.0.1", "::1"),
		"mapped.example":    addrs("::ffff:192.168.0.1"),
		"metadata.internal": addrs("169.254.169.254"),
	}
	strict := Policy{Resolver: res}
	open := Policy{AllowLocal: true, Resolver: res}
	cases := []struct {
		raw   string
		err   error
		addrs []netip.Addr
	}{
		{"https://github.com/o/r.git", nil, addrs("140.82.121.4")},
		{"git@github.com:o/r.git", nil, addrs("140.82.121.4")},
		{"https://dual.example/r", nil, addrs("140.82.121.4", "2606:4700::1111")},
		{"https://140.82.121.4/r", nil, addrs("140.82.121.4")},
		{"file:///srv/anvil", ErrLocal, nil},
		{"/srv/anvil", ErrLocal, nil},
		{"../other-org/repo", ErrLocal, nil},
		{"http://127.0.0.1:8080/r", ErrLocal, nil},
		{"http://[::1]:8080/r", ErrLocal, nil},
		{"http://[::ffff:127.0.0.1]/r", ErrLocal, nil},
		{"http://localhost:5432/r", ErrLocal, nil},
		{"https://rebind.example/r", ErrLocal, nil},
		{"https://internal.example/r", ErrLocal, nil},
		{"https://mapped.example/r", ErrLocal, nil},
		{"http://metadata.internal/latest", ErrLocal, nil},
		{"ssh://git@10.1.1.1/r", ErrLocal, nil},
		{"git@192.168.1.2:r.git", ErrLocal, nil},
		{"https://nowhere.example/r", ErrUnresolved, nil},
		{"ext::sh -c id", ErrSyntax, nil},
	}
	for _, c := range cases {
		got, err := strict.Check(context.Background(), c.raw)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("Check(%q) = %+v, %v; want %v", c.raw, got, err, c.err)
			}
			if errors.Is(err, ErrLocal) && !strings.Contains(err.Error(), EnvAllowLocal+"=true") {
				t.Errorf("Check(%q): the refusal does not name %s: %v", c.raw, EnvAllowLocal, err)
			}
			continue
		}
		if err != nil || len(got.Addrs) != len(c.addrs) {
			t.Errorf("Check(%q) = %+v, %v; want addresses %v", c.raw, got, err, c.addrs)
			continue
		}
		for i := range got.Addrs {
			if got.Addrs[i] != c.addrs[i] {
				t.Errorf("Check(%q) addresses %v, want %v", c.raw, got.Addrs, c.addrs)
			}
		}
	}
	// Allowed: everything but bad syntax passes, unpinned.
	for _, raw := range []string{"file:///srv/anvil", "/srv/anvil", "http://127.0.0.1:8080/r", "https://nowhere.example/r"} {
		if got, err := open.Check(context.Background(), raw); err != nil || len(got.Addrs) != 0 {
			t.Errorf("allowed Check(%q) = %+v, %v", raw, got, err)
		}
	}
	if _, err := open.Check(context.Background(), "ext::sh"); !errors.Is(err, ErrSyntax) {
		t.Errorf("allowed Check(ext::sh) = %v, want ErrSyntax", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"https://github.com/o/r", "git@h:o/r", "ext::sh", "file:///x", "http://[::1]/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := Parse(raw)
		if err == nil && got.Kind != KindLocal && (got.Host == "" || strings.Contains(raw, "::") && transportRE.MatchString(raw)) {
			t.Fatalf("Parse(%q) = %+v", raw, got)
		}
	})
}
