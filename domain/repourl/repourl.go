// Package repourl is anvil's checkout policy: which repository addresses a
// project may name and which network addresses git may then connect to.
//
// A checkout runs git on anvil's worker, so a repository URL is a request
// for the worker to read something. Local repositories (file://, plain
// paths, git's <transport>::<address> helpers such as ext:: and fd::) would
// read the worker's own files; an address that is loopback, private,
// link-local or unique-local would reach services on the worker's private
// network. Both are refused unless the operator allows local checkouts
// (ANVIL_CHECKOUT_ALLOW_LOCAL=true). The same [Policy] is applied when a
// project is saved and again at every checkout, when the host name is
// resolved once more and git is pinned to the checked addresses.
//
// The package is pure but for name resolution, which goes through an
// injectable [Resolver].
package repourl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
)

// EnvAllowLocal is the operator's switch that lifts the policy.
const EnvAllowLocal = "ANVIL_CHECKOUT_ALLOW_LOCAL"

// Refusal kinds; the errors returned wrap one of them.
var (
	// ErrLocal is a local repository or an address on the worker's own or
	// private network, refused while local checkouts are not allowed.
	ErrLocal = errors.New("local checkouts are refused")
	// ErrSyntax is an address git would not read as a remote repository, or
	// one anvil does not support (other schemes, transport helpers).
	ErrSyntax = errors.New("unsupported repository address")
	// ErrUnresolved is a host name that does not resolve.
	ErrUnresolved = errors.New("repository host does not resolve")
)

// localHint ends every ErrLocal message: what the operator can do.
const localHint = "the operator allows local checkouts with " + EnvAllowLocal + "=true"

// Kind is how git reaches a repository.
type Kind int

// Kinds of [Target].
const (
	KindHTTP  Kind = iota // http:// or https://
	KindSSH               // ssh:// or scp-like user@host:path
	KindLocal             // file:// or a plain path
)

// Target is a parsed repository address.
type Target struct {
	Kind   Kind
	Scheme string // "http", "https", "ssh" or "file"
	Host   string // lower-case host name or IP literal, without brackets; "" for KindLocal
	Port   string // the explicit port or the scheme's default
	Path   string // the local path for KindLocal
}

var (
	// transportRE is git's "<transport>::<address>" remote-helper syntax.
	transportRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9+.-]*::`)
	hostRE      = regexp.MustCompile(`^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\.?$`)
	// numericLabelRE is a last label that makes a host an IPv4 number in a
	// form resolvers and curl read differently (127.1, 0x7f.1, 2130706433).
	numericLabelRE = regexp.MustCompile(`^(0x[0-9a-f]*|[0-9]+)$`)
	scpUserRE      = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
)

func syntaxErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSyntax, fmt.Sprintf(format, args...))
}

// Parse reads raw as git would and returns its target. It accepts https://,
// http://, ssh:// (and git+ssh://), scp-like [user@]host:path, file:// and
// plain paths (as KindLocal; refusing those is [Policy]'s job), and refuses
// everything else: other schemes (git://, ftp://), transport helpers
// (ext::, fd::), control characters, options.
func Parse(raw string) (Target, error) {
	if raw == "" {
		return Target{}, syntaxErr("empty address")
	}
	if strings.HasPrefix(raw, "-") {
		return Target{}, syntaxErr("an address must not start with '-'")
	}
	if transportRE.MatchString(raw) {
		return Target{}, syntaxErr("git transport helpers (%s…) are not supported", raw[:strings.Index(raw, "::")+2])
	}
	for _, r := range raw {
		if r < 0x20 || r == 0x7f || r == ' ' {
			return Target{}, syntaxErr("an address must not contain spaces or control characters")
		}
	}
	if strings.Contains(raw, "://") {
		return parseURL(raw)
	}
	colon, slash := strings.Index(raw, ":"), strings.Index(raw, "/")
	if colon > 0 && (slash < 0 || colon < slash) {
		return parseSCP(raw, colon)
	}
	if colon == 0 {
		return Target{}, syntaxErr("%q is not a repository address", raw)
	}
	return Target{Kind: KindLocal, Scheme: "file", Path: raw}, nil
}

func parseURL(raw string) (Target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Target{}, syntaxErr("not a valid URL")
	}
	scheme := strings.ToLower(u.Scheme)
	t := Target{Scheme: scheme}
	switch scheme {
	case "https":
		t.Kind, t.Port = KindHTTP, "443"
	case "http":
		t.Kind, t.Port = KindHTTP, "80"
	case "ssh", "git+ssh", "ssh+git":
		t.Kind, t.Port, t.Scheme = KindSSH, "22", "ssh"
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return Target{}, syntaxErr("a file URL must not name a host")
		}
		return Target{Kind: KindLocal, Scheme: "file", Path: u.Path}, nil
	default:
		return Target{}, syntaxErr("%s:// is not supported (use https://, http:// or ssh://)", scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return Target{}, syntaxErr("the URL must name a host")
	}
	if p := u.Port(); p != "" {
		t.Port = p
	}
	host, err := checkHost(u.Hostname())
	if err != nil {
		return Target{}, err
	}
	t.Host = host
	return t, nil
}

func parseSCP(raw string, colon int) (Target, error) {
	hostPart := raw[:colon]
	if user, h, ok := strings.Cut(hostPart, "@"); ok {
		if !scpUserRE.MatchString(user) {
			return Target{}, syntaxErr("invalid user in %q", hostPart)
		}
		hostPart = h
	}
	hostPart = strings.TrimSuffix(strings.TrimPrefix(hostPart, "["), "]")
	if raw[colon+1:] == "" {
		return Target{}, syntaxErr("the address names no repository path")
	}
	host, err := checkHost(hostPart)
	if err != nil {
		return Target{}, err
	}
	return Target{Kind: KindSSH, Scheme: "ssh", Host: host, Port: "22"}, nil
}

// checkHost returns host lower-cased when it is an IP literal or a DNS name
// whose last label is not numeric.
func checkHost(host string) (string, error) {
	host = strings.ToLower(host)
	if host == "" {
		return "", syntaxErr("the address must name a host")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return a.WithZone("").String(), nil
	}
	if !hostRE.MatchString(host) {
		return "", syntaxErr("%q is not a host name (use ASCII; punycode for international names)", host)
	}
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	if numericLabelRE.MatchString(labels[len(labels)-1]) {
		return "", syntaxErr("%q is neither a host name nor an IP address written in full", host)
	}
	return host, nil
}

// Resolver looks host names up; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Policy decides which repositories may be checked out.
type Policy struct {
	// AllowLocal lifts every restriction but the syntax (the operator's
	// ANVIL_CHECKOUT_ALLOW_LOCAL=true).
	AllowLocal bool
	// Resolver resolves host names; nil means net.DefaultResolver.
	Resolver Resolver
	// IsLocal says which addresses are local; nil means [IsLocalAddr].
	// Tests narrow it to serve "public" repositories from 127.0.0.2.
	IsLocal func(netip.Addr) bool
}

// Checked is a target the policy accepted, with the addresses git must be
// pinned to (none for KindLocal, or when local checkouts are allowed).
type Checked struct {
	Target
	Addrs []netip.Addr
}

// Check parses raw, resolves its host and refuses it when it is local (see
// the package comment). Errors wrap [ErrSyntax], [ErrLocal] or
// [ErrUnresolved] and are fit to show to the person who entered raw.
func (p Policy) Check(ctx context.Context, raw string) (Checked, error) {
	t, err := Parse(raw)
	if err != nil {
		return Checked{}, err
	}
	if p.AllowLocal {
		return Checked{Target: t}, nil
	}
	if t.Kind == KindLocal {
		return Checked{}, fmt.Errorf("%w: a file:// or path repository would read the server's own files; %s", ErrLocal, localHint)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(t.Host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		r := p.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		addrs, err = r.LookupNetIP(ctx, "ip", t.Host)
		if err != nil || len(addrs) == 0 {
			return Checked{}, fmt.Errorf("%w: %s", ErrUnresolved, t.Host)
		}
	}
	isLocal := p.IsLocal
	if isLocal == nil {
		isLocal = IsLocalAddr
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		a = a.WithZone("").Unmap()
		if isLocal(a) {
			if t.Host == a.String() {
				return Checked{}, fmt.Errorf("%w: %s is a loopback, private, link-local or unique-local address; %s", ErrLocal, a, localHint)
			}
			return Checked{}, fmt.Errorf("%w: %s resolves to %s, a loopback, private, link-local or unique-local address; %s", ErrLocal, t.Host, a, localHint)
		}
		out = append(out, a)
	}
	return Checked{Target: t, Addrs: out}, nil
}

// prefixes holds the IPv4 and IPv6 networks that netip's predicates do not
// cover and that no public repository lives on.
var prefixes = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",       // "this network"
		"100.64.0.0/10",   // carrier-grade NAT, shared address space
		"192.0.0.0/24",    // IETF protocol assignments
		"198.18.0.0/15",   // benchmarking
		"240.0.0.0/4",     // reserved, and the broadcast address
		"fec0::/10",       // deprecated site-local
		"::/128",          // unspecified
		"64:ff9b:1::/48",  // local-use IPv4/IPv6 translation
		"2001:db8::/32",   // documentation
		"100::/64",        // discard-only
		"2001::/32",       // Teredo: tunnels to an embedded IPv4 address
		"2002::/16",       // 6to4: tunnels to an embedded IPv4 address
		"::/96",           // IPv4-compatible (deprecated)
		"192.0.2.0/24",    // documentation
		"198.51.100.0/24", // documentation
		"203.0.113.0/24",  // documentation
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// IsLocalAddr reports whether a is an address a checkout must not reach:
// unspecified, loopback, private (RFC 1918, unique-local fc00::/7),
// link-local, multicast, carrier-grade NAT, reserved and documentation
// ranges, IPv4-compatible and tunnel forms; IPv4-mapped and NAT64
// addresses whose embedded IPv4 address is one of those.
func IsLocalAddr(a netip.Addr) bool {
	a = a.WithZone("")
	if a.Is4In6() {
		return IsLocalAddr(a.Unmap())
	}
	if !a.IsValid() || a.IsUnspecified() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() ||
		a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() || a.IsMulticast() {
		return true
	}
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	if nat64.Contains(a) {
		b := a.As16()
		return IsLocalAddr(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	}
	return false
}

// Detail returns the message of a policy error without its kind's prefix.
func Detail(err error) string {
	msg := err.Error()
	for _, k := range []error{ErrSyntax, ErrLocal, ErrUnresolved} {
		if errors.Is(err, k) {
			return strings.TrimPrefix(msg, k.Error()+": ")
		}
	}
	return msg
}
