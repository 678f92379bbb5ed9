// Package netpolicy is anvil's network policy for runs: which hosts and
// ports a project's runs may reach (its network list, network_allow) and
// which its repair runs may reach (repair_network_allow), and which
// addresses no run reaches at all.
//
// A run has no network of its own: it reaches the outside only through
// anvil's egress proxy (package netproxy, docs/network.md), which asks this
// package about every request. The policy guards two things. A run must
// reach only what its project listed, so that a build script, a compromised
// dependency or a coding agent cannot send the code, the run's secrets or
// anything else to a host nobody chose. And, as every request anvil makes on
// a user's behalf, it must not become a probe of what only the worker can
// reach — loopback, the private network, a cloud's metadata endpoint — so
// an address of those classes (repourl.IsLocalAddr) is refused after name
// resolution unless the operator allows it (ANVIL_RUNS_ALLOW_PRIVATE=true).
//
// The same [Compile] reads a list when a project is saved (a bad entry is
// refused there, naming it) and again when a run starts, so a list that was
// accepted is the list that is enforced. Refusals wrap one of the sentinel
// kinds below.
//
// An entry is one of
//
//   - host — a host name; ports 80 and 443 only;
//   - host:port — that port only;
//   - *.suffix — every host under suffix (not suffix itself), ports 80 and
//     443; *.suffix:port that port only;
//   - an IP literal, with or without a port ([v6]:port for IPv6), matched
//     only by requests naming that literal;
//   - a preset, @npm @pypi @go @crates @maven @rubygems @github @gitlab
//     @dockerhub @ghcr @quay @gcr: the hosts of [Presets], ports 80 and 443.
//
// Host names are compared in their ASCII form: an international name is
// stored as its punycode (IDNA), every name in lower case.
package netpolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"

	"anvil/domain/repourl"
)

// Bounds of a list.
const (
	// MaxEntries is the most entries one list holds.
	MaxEntries = 100
	// MaxEntryBytes bounds one entry (a DNS name's own bound).
	MaxEntryBytes = 253
)

// EnvAllowPrivate is the operator's switch that lets runs reach private
// addresses.
const EnvAllowPrivate = "ANVIL_RUNS_ALLOW_PRIVATE"

// EnvAllowLoopback is the operator's switch that lets runs reach the
// worker's own loopback and link-local addresses ([Reach]).
const EnvAllowLoopback = "ANVIL_RUNS_ALLOW_LOOPBACK"

// Refusal kinds. Errors about an entry are *EntryError, errors about a
// request are *Refusal; both wrap one of these.
var (
	// ErrSyntax is an entry that is not a host, host:port, *.suffix, IP
	// literal or preset.
	ErrSyntax = errors.New("not a network list entry")
	// ErrUnknownPreset is an @name that is not one of [Presets].
	ErrUnknownPreset = errors.New("unknown preset")
	// ErrTooMany is a list longer than [MaxEntries].
	ErrTooMany = errors.New("too many entries")
	// ErrNotListed is a destination the list does not allow.
	ErrNotListed = errors.New("not in this project's network list")
	// ErrPrivate is a destination whose address is loopback, private,
	// link-local or otherwise local (repourl.IsLocalAddr).
	ErrPrivate = errors.New("resolves to a private address")
)

// EntryError is an entry refused when a list is read: it names the entry.
type EntryError struct {
	Entry  string // as written (clipped)
	Kind   error  // ErrSyntax, ErrUnknownPreset or ErrTooMany
	Detail string // what is wrong, in words
}

func (e *EntryError) Error() string {
	if e.Entry == "" {
		return e.Detail
	}
	return fmt.Sprintf("%q: %s", e.Entry, e.Detail)
}

// Unwrap returns the kind.
func (e *EntryError) Unwrap() error { return e.Kind }

func entryErr(entry string, kind error, format string, args ...any) error {
	if len(entry) > 80 {
		entry = entry[:80] + "…"
	}
	return &EntryError{Entry: entry, Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

// Refusal is a request the policy refuses.
type Refusal struct {
	Kind error // ErrNotListed or ErrPrivate
	Host string
	Port int
	// Addr is the private address a host resolved to (ErrPrivate).
	Addr netip.Addr
}

// Error reads "not in this project's network list: example.org:443" or
// "example.org resolves to a private address: 10.0.0.5".
func (r *Refusal) Error() string {
	if errors.Is(r.Kind, ErrPrivate) && IsWorkerLocal(r.Addr) {
		what := "the worker's own address (loopback, link-local or a cloud's metadata endpoint)"
		if r.Host == r.Addr.String() {
			return fmt.Sprintf("%s is %s; the operator allows such addresses with %s=true", r.Host, what, EnvAllowLoopback)
		}
		return fmt.Sprintf("%s resolves to %s: %s; the operator allows such addresses with %s=true", r.Host, what, r.Addr, EnvAllowLoopback)
	}
	if errors.Is(r.Kind, ErrPrivate) {
		if r.Host == r.Addr.String() {
			return fmt.Sprintf("%s is a private address (private, unique-local or reserved); the operator allows such addresses with %s=true", r.Host, EnvAllowPrivate)
		}
		return fmt.Sprintf("%s %s: %s; the operator allows such addresses with %s=true", r.Host, ErrPrivate, r.Addr, EnvAllowPrivate)
	}
	return fmt.Sprintf("%s: %s", r.Kind, HostPort(r.Host, r.Port))
}

// Unwrap returns the kind.
func (r *Refusal) Unwrap() error { return r.Kind }

// HostPort joins host and port, bracketing an IPv6 literal.
func HostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}

// Preset is a named set of hosts a kind of tool really uses.
type Preset struct {
	Name  string   // "@npm"
	Hosts []string // reached on ports 80 and 443
	// Tools says what the preset is for, as the docs' table shows it.
	Tools string
}

// Presets are the named sets of hosts, one table: docs/network.md shows
// it (a test holds the page to it). Each lists the hosts the tools contact
// with their default configuration, checked against their documentation
// and their traffic, and nothing else.
var Presets = []Preset{
	{"@npm", []string{"registry.npmjs.org", "registry.yarnpkg.com"},
		"npm, pnpm and Yarn: the registry serves both metadata and tarballs; registry.yarnpkg.com is Yarn 1's name for the same registry"},
	{"@pypi", []string{"pypi.org", "files.pythonhosted.org"},
		"pip, uv and Poetry: the index (pypi.org/simple) and the files it links to"},
	{"@go", []string{"proxy.golang.org", "sum.golang.org"},
		"go mod download with the default GOPROXY and GOSUMDB: modules and their checksum database (the proxy serves the zips itself)"},
	{"@crates", []string{"index.crates.io", "static.crates.io", "crates.io"},
		"cargo: the sparse index, the crate downloads, and crates.io's API (its download links redirect to static.crates.io)"},
	{"@maven", []string{"repo.maven.apache.org", "repo1.maven.org"},
		"Maven and Gradle: Maven Central under both of its names"},
	{"@rubygems", []string{"rubygems.org", "index.rubygems.org"},
		"gem and Bundler: the gems and the compact index"},
	{"@github", []string{"github.com", "api.github.com", "codeload.github.com", "objects.githubusercontent.com",
		"raw.githubusercontent.com", "release-assets.githubusercontent.com"},
		"git over HTTPS, the REST API, archives, release assets and raw files"},
	{"@gitlab", []string{"gitlab.com"},
		"git over HTTPS, the API and GitLab's package registries (all served by gitlab.com)"},
	// The registries' presets are what a worker's pull of an image reaches
	// (docs/images.md): the registry, its token service, and the CDN its
	// blob downloads redirect to (Docker's published allow list).
	{"@dockerhub", []string{"index.docker.io", "registry-1.docker.io", "auth.docker.io", "production.cloudflare.docker.com",
		"production.cloudfront.docker.com", "docker-images-prod.6aa30f8b08e16409b46e0173d6de2f56.r2.cloudflarestorage.com"},
		"images of Docker Hub (node:22, postgres:16): the registry under both of its names, its token service and the CDNs its blobs redirect to"},
	{"@ghcr", []string{"ghcr.io", "pkg-containers.githubusercontent.com"},
		"images of GitHub's container registry: the registry and the host its blobs redirect to"},
	{"@quay", []string{"quay.io", "cdn.quay.io", "cdn01.quay.io", "cdn02.quay.io", "cdn03.quay.io"},
		"images of Quay: the registry and its CDNs"},
	{"@gcr", []string{"gcr.io", "us.gcr.io", "eu.gcr.io", "asia.gcr.io", "mirror.gcr.io", "storage.googleapis.com"},
		"images of Google's Container Registry and its mirror, and the storage their blobs redirect to (Artifact Registry's REGION-docker.pkg.dev is a host to list)"},
}

// PresetNames lists the presets' names.
func PresetNames() []string {
	out := make([]string, len(Presets))
	for i, p := range Presets {
		out[i] = p.Name
	}
	return out
}

func presetByName(name string) (Preset, bool) {
	for _, p := range Presets {
		if p.Name == name {
			return p, true
		}
	}
	return Preset{}, false
}

var (
	hostRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$`)
	// numericLabelRE is a last label that would make a name an IPv4 number
	// in a form resolvers read differently (127.1, 0x7f.1, 2130706433).
	numericLabelRE = regexp.MustCompile(`^(0x[0-9a-f]*|[0-9]+)$`)
	idnaProfile    = idna.New(idna.MapForLookup(), idna.Transitional(false), idna.StrictDomainName(true), idna.ValidateLabels(true), idna.BidiRule())
)

// loopbackOnly are destinations a run's clients never send to the proxy:
// NO_PROXY names them, because inside the sandbox they are the sandbox's
// own loopback (docs/network.md, "The run's environment").
var loopbackOnly = map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}

// Entry is one entry of a list, read.
type Entry struct {
	Preset   string     // "@npm", or ""
	Host     string     // ASCII, lower case; the suffix of a wildcard; "" for a preset
	Addr     netip.Addr // an IP literal entry
	Wildcard bool       // *.suffix
	Port     int        // 0: ports 80 and 443
}

// String is the entry's canonical form, the one stored.
func (e Entry) String() string {
	switch {
	case e.Preset != "":
		return e.Preset
	case e.Addr.IsValid():
		if e.Port == 0 {
			return e.Addr.String()
		}
		return HostPort(e.Addr.String(), e.Port)
	}
	h := e.Host
	if e.Wildcard {
		h = "*." + h
	}
	if e.Port == 0 {
		return h
	}
	return h + ":" + strconv.Itoa(e.Port)
}

// NormalizeHost returns a host name in the form lists compare: ASCII
// (punycode), lower case, without a trailing dot; an IP literal in its
// canonical form. It refuses what is neither a host name nor an IP.
func NormalizeHost(h string) (string, error) {
	h = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), ".")
	if h == "" {
		return "", errors.New("names no host")
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return "", errors.New("an IP address with a zone is not a destination")
		}
		return a.Unmap().String(), nil
	}
	if len(h) > MaxEntryBytes {
		return "", fmt.Errorf("a host name is at most %d bytes", MaxEntryBytes)
	}
	if !utf8.ValidString(h) {
		return "", errors.New("a host name must be UTF-8 text")
	}
	ascii, err := idnaProfile.ToASCII(h)
	if err == nil {
		// The ASCII form must read as itself: it is what is stored and
		// read again at every run.
		again, err2 := idnaProfile.ToASCII(strings.ToLower(ascii))
		if err2 != nil || again != strings.ToLower(ascii) {
			err = errors.New("not stable")
		}
	}
	if err != nil || ascii == "" {
		return "", fmt.Errorf("%q is not a valid host name", h)
	}
	ascii = strings.ToLower(ascii)
	if len(ascii) > MaxEntryBytes || !hostRE.MatchString(ascii) {
		return "", fmt.Errorf("%q is not a valid host name (letters, digits, hyphens and dots)", h)
	}
	labels := strings.Split(ascii, ".")
	for _, l := range labels {
		if len(l) > 63 {
			return "", fmt.Errorf("%q has a label longer than 63 characters", h)
		}
	}
	if numericLabelRE.MatchString(labels[len(labels)-1]) {
		return "", fmt.Errorf("%q is neither a host name nor an IP address written in full", h)
	}
	return ascii, nil
}

// ParseEntry reads one entry (already trimmed and not empty).
func ParseEntry(raw string) (Entry, error) {
	if len(raw) > MaxEntryBytes {
		return Entry{}, entryErr(raw, ErrSyntax, "is longer than %d bytes", MaxEntryBytes)
	}
	for _, r := range raw {
		if r <= ' ' || r == 0x7f {
			return Entry{}, entryErr(raw, ErrSyntax, "must not contain spaces or control characters")
		}
	}
	if strings.HasPrefix(raw, "@") {
		name := strings.ToLower(raw)
		if _, ok := presetByName(name); !ok {
			return Entry{}, entryErr(raw, ErrUnknownPreset, "is not a preset; the presets are %s", strings.Join(PresetNames(), " "))
		}
		return Entry{Preset: name}, nil
	}
	if strings.Contains(raw, "://") || strings.ContainsAny(raw, "/?#@\\") {
		return Entry{}, entryErr(raw, ErrSyntax, "must be a host name, host:port or *.suffix, without a scheme, a path or a user")
	}
	host, port := raw, 0
	switch {
	case strings.HasPrefix(raw, "["):
		end := strings.Index(raw, "]")
		if end < 0 {
			return Entry{}, entryErr(raw, ErrSyntax, "has no closing ]")
		}
		host = raw[1:end]
		rest := raw[end+1:]
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return Entry{}, entryErr(raw, ErrSyntax, "must be [IPv6]:port")
			}
			p, err := parsePort(rest[1:])
			if err != nil {
				return Entry{}, entryErr(raw, ErrSyntax, "%s", err)
			}
			port = p
		}
		if _, err := netip.ParseAddr(host); err != nil || !strings.Contains(host, ":") {
			return Entry{}, entryErr(raw, ErrSyntax, "brackets hold an IPv6 address only")
		}
	case strings.Count(raw, ":") > 1:
		// A bare IPv6 literal; a port needs brackets.
	case strings.Contains(raw, ":"):
		h, ps, _ := strings.Cut(raw, ":")
		p, err := parsePort(ps)
		if err != nil {
			return Entry{}, entryErr(raw, ErrSyntax, "%s", err)
		}
		host, port = h, p
	}
	e := Entry{Port: port}
	if host == "*" {
		return Entry{}, entryErr(raw, ErrSyntax, "would allow every host; list the hosts, a *.suffix or a preset")
	}
	if suffix, ok := strings.CutPrefix(host, "*."); ok {
		e.Wildcard, host = true, suffix
	}
	if strings.Contains(host, "*") {
		return Entry{}, entryErr(raw, ErrSyntax, "may hold * only as its first label (*.example.com)")
	}
	h, err := NormalizeHost(host)
	if err != nil {
		return Entry{}, entryErr(raw, ErrSyntax, "%s", err)
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if e.Wildcard {
			return Entry{}, entryErr(raw, ErrSyntax, "*. goes before a host name, not an IP address")
		}
		e.Addr = a
	} else {
		e.Host = h
		if e.Wildcard && !strings.Contains(h, ".") {
			return Entry{}, entryErr(raw, ErrSyntax, "would allow a whole top-level domain; name a domain under it")
		}
	}
	if loopbackOnly[h] && !e.Wildcard {
		return Entry{}, entryErr(raw, ErrSyntax, "is the sandbox's own loopback: runs reach it directly, never through the network list")
	}
	return e, nil
}

func parsePort(s string) (int, error) {
	if s == "" || len(s) > 5 || strings.TrimLeft(s, "0123456789") != "" || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("port %q must be a number between 1 and 65535", s)
	}
	p, _ := strconv.Atoi(s)
	if p < 1 || p > 65535 {
		return 0, fmt.Errorf("port %q must be a number between 1 and 65535", s)
	}
	return p, nil
}

// Normalize reads a list as a person or client gave it and returns its
// canonical form, the one stored: entries trimmed, blank ones dropped (a
// form's empty lines), each in canonical form (lower case, punycode,
// presets by name), duplicates removed, the order kept. The first bad
// entry is the error (an *EntryError); a list longer than [MaxEntries]
// after that is ErrTooMany.
func Normalize(in []string) ([]string, error) {
	out := []string{}
	seen := map[string]bool{}
	for _, raw := range in {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		e, err := ParseEntry(raw)
		if err != nil {
			return nil, err
		}
		s := e.String()
		if seen[s] {
			continue
		}
		seen[s] = true
		out = append(out, s)
		if len(out) > MaxEntries {
			return nil, &EntryError{Kind: ErrTooMany, Detail: fmt.Sprintf("a network list holds at most %d entries", MaxEntries)}
		}
	}
	return out, nil
}

// List is a compiled network list.
type List struct {
	hosts    map[string]ports // exact host names and IP literals
	suffixes []suffixRule
	entries  []string
}

type suffixRule struct {
	suffix string // ".example.com"
	ports  ports
}

// ports is a set of ports; 0 in it stands for 80 and 443.
type ports []int

func (p ports) has(port int) bool {
	for _, q := range p {
		if q == port || (q == 0 && (port == 80 || port == 443)) {
			return true
		}
	}
	return false
}

// Compile reads a list (as [Normalize] does) for matching.
func Compile(in []string) (*List, error) {
	norm, err := Normalize(in)
	if err != nil {
		return nil, err
	}
	l := &List{hosts: map[string]ports{}, entries: norm}
	suffixes := map[string]ports{}
	for _, s := range norm {
		e, err := ParseEntry(s)
		if err != nil {
			return nil, err
		}
		switch {
		case e.Preset != "":
			p, _ := presetByName(e.Preset)
			for _, h := range p.Hosts {
				l.hosts[h] = append(l.hosts[h], 0)
			}
		case e.Addr.IsValid():
			l.hosts[e.Addr.String()] = append(l.hosts[e.Addr.String()], e.Port)
		case e.Wildcard:
			suffixes["."+e.Host] = append(suffixes["."+e.Host], e.Port)
		default:
			l.hosts[e.Host] = append(l.hosts[e.Host], e.Port)
		}
	}
	for s, p := range suffixes {
		l.suffixes = append(l.suffixes, suffixRule{s, p})
	}
	sort.Slice(l.suffixes, func(i, j int) bool { return l.suffixes[i].suffix < l.suffixes[j].suffix })
	return l, nil
}

// Empty reports whether the list allows nothing: the run stays offline.
func (l *List) Empty() bool { return l == nil || len(l.entries) == 0 }

// Entries returns the list's canonical entries.
func (l *List) Entries() []string {
	if l == nil {
		return nil
	}
	return slices.Clone(l.entries)
}

// Allow reports whether a request to host:port is on the list: nil, or a
// *Refusal of kind ErrNotListed (also for a host that is not a host name).
// host is normalized first ([NormalizeHost]).
func (l *List) Allow(host string, port int) error {
	h, err := NormalizeHost(host)
	if err != nil {
		h = host
	}
	refused := &Refusal{Kind: ErrNotListed, Host: h, Port: port}
	if l.Empty() || err != nil || port < 1 || port > 65535 {
		return refused
	}
	if p, ok := l.hosts[h]; ok && p.has(port) {
		return nil
	}
	if _, isIP := netip.ParseAddr(h); isIP == nil {
		return refused
	}
	for _, s := range l.suffixes {
		if strings.HasSuffix(h, s.suffix) && s.ports.has(port) {
			return nil
		}
	}
	return refused
}

// Reach is what the operator lets runs reach beyond public addresses.
// The two switches are apart on purpose: a registry mirror on the office
// network is a reason to open the private ranges, never the worker's own
// loopback (its database, its metrics, anything bound to 127.0.0.1) or a
// cloud's metadata endpoint (169.254.169.254, the machine's credentials),
// which need a switch of their own (docs/network.md, "Private addresses").
type Reach struct {
	// Private opens private, unique-local, shared and reserved addresses
	// (ANVIL_RUNS_ALLOW_PRIVATE).
	Private bool
	// Loopback opens the worker's own addresses: loopback, unspecified,
	// link-local and the clouds' metadata endpoints
	// (ANVIL_RUNS_ALLOW_LOOPBACK).
	Loopback bool
}

// Refuses reports whether a connection to addr is refused under r.
func (r Reach) Refuses(addr netip.Addr) bool {
	addr = addr.WithZone("").Unmap()
	if IsWorkerLocal(addr) {
		return !r.Loopback
	}
	return !r.Private && repourl.IsLocalAddr(addr)
}

// metadata are the clouds' instance metadata endpoints that do not sit in
// the link-local range: AWS's IPv6 one and Alibaba's.
var metadata = []netip.Addr{netip.MustParseAddr("fd00:ec2::254"), netip.MustParseAddr("100.100.100.200")}

// nat64WellKnown embeds an IPv4 address in its last four bytes.
var nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")

// IsWorkerLocal reports whether addr is the worker's own: loopback,
// unspecified or "this network" (which Linux routes to loopback),
// link-local (a cloud's metadata endpoint is 169.254.169.254), or one of
// the metadata endpoints elsewhere — also when embedded in an IPv4-mapped
// or NAT64 address.
func IsWorkerLocal(addr netip.Addr) bool {
	addr = addr.WithZone("").Unmap()
	if nat64WellKnown.Contains(addr) {
		b := addr.As16()
		addr = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	if !addr.IsValid() || addr.IsLoopback() || addr.IsUnspecified() || addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast() ||
		addr.IsInterfaceLocalMulticast() || (addr.Is4() && addr.As4()[0] == 0) {
		return true
	}
	for _, m := range metadata {
		if addr == m {
			return true
		}
	}
	return false
}

// CheckAddr refuses addr, which host resolved to (or is), when reach does
// not open it: a *Refusal of kind ErrPrivate.
func CheckAddr(host string, port int, addr netip.Addr, reach Reach) error {
	addr = addr.WithZone("").Unmap()
	if reach.Refuses(addr) {
		return &Refusal{Kind: ErrPrivate, Host: host, Port: port, Addr: addr}
	}
	return nil
}
