package feed

import (
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/idna"

	"anvil/domain"
)

// Browser connections (docs/contracts/feed.md, "Browser
// connections") admit a browser's request only from the origins their list
// names. This file is that policy: the same normalisation runs when an
// entry is saved (NormalizeOrigin, a 422 invalid_origin naming the entry)
// and when a request's Origin is judged (OriginAllowed), so an entry and
// the header a browser sends for the same site always compare equal.
//
// An origin is scheme://host[:port] — RFC 6454's serialisation, which is
// what browsers put in the Origin header. Scheme and host compare in lower
// case, a host's trailing dot is dropped, an internationalised host is
// compared in its ASCII (punycode) form and a scheme's default port is the
// same as no port. A list entry may begin with one wildcard label,
// https://*.shop.example, which stands for exactly one label: it admits
// https://www.shop.example but neither https://shop.example nor
// https://a.b.shop.example (list those separately), so an entry never
// admits more than its writer can see in it.

// MaxAllowedOrigins bounds a connection's list (the column's CHECK says
// the same).
const MaxAllowedOrigins = 100

// errInvalidOrigin is the code of a refused list entry (422).
const errInvalidOrigin = "invalid_origin"

// origin is a parsed, normalised origin.
type origin struct {
	scheme   string
	host     string // lower-case ASCII, no trailing dot; IPv6 in brackets
	port     string // "" for the scheme's default
	wildcard bool   // host is the part after "*."
}

func (o origin) String() string {
	h := o.host
	if o.wildcard {
		h = "*." + h
	}
	if o.port != "" {
		h += ":" + o.port
	}
	return o.scheme + "://" + h
}

var defaultPorts = map[string]string{"http": "80", "https": "443"}

// parseOrigin reads s as an origin; wildcardOK lets a list entry start its
// host with "*.". It returns a short reason when s is not one.
func parseOrigin(s string, wildcardOK bool) (origin, string) {
	if s == "" {
		return origin{}, "it is empty"
	}
	if s == "*" {
		return origin{}, "a bare * would admit every site; list the sites, or a wildcard label such as https://*.shop.example"
	}
	if strings.TrimSpace(s) != s {
		return origin{}, "it has spaces around it"
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return origin{}, "it is not scheme://host[:port]"
	}
	scheme = strings.ToLower(scheme)
	if !validScheme(scheme) {
		return origin{}, "its scheme is not a URL scheme"
	}
	if strings.ContainsAny(rest, "/?#@\\") {
		return origin{}, "an origin has no path, query, fragment or user; write only scheme://host[:port]"
	}
	o := origin{scheme: scheme}
	hostport := rest
	if strings.HasPrefix(hostport, "*.") {
		if !wildcardOK {
			return origin{}, "a request's origin cannot be a wildcard"
		}
		o.wildcard = true
		hostport = hostport[2:]
	}
	if strings.Contains(hostport, "*") {
		return origin{}, "a wildcard may only be the whole first label, as in https://*.shop.example"
	}
	host, port := hostport, ""
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return origin{}, "its IPv6 address has no closing ]"
		}
		host, port = hostport[:end+1], strings.TrimPrefix(hostport[end+1:], ":")
		if hostport[end+1:] != "" && !strings.HasPrefix(hostport[end+1:], ":") {
			return origin{}, "it is not scheme://host[:port]"
		}
	} else if h, p, found := strings.Cut(hostport, ":"); found {
		host, port = h, p
		if port == "" {
			return origin{}, "its port is empty"
		}
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return origin{}, "its port is not a number from 1 to 65535"
		}
	}
	if port == defaultPorts[scheme] {
		port = ""
	}
	o.port = port
	h, why := normalizeHost(host)
	if why != "" {
		return origin{}, why
	}
	if o.wildcard && (strings.HasPrefix(h, "[") || isIPv4(h)) {
		return origin{}, "a wildcard label needs a domain name after it, not an address"
	}
	o.host = h
	return o, ""
}

func validScheme(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func isIPv4(h string) bool {
	a, err := netip.ParseAddr(h)
	return err == nil && a.Is4()
}

// normalizeHost lower-cases a host, drops one trailing dot and spells an
// internationalised name in punycode; an IPv6 literal keeps its brackets
// in canonical form.
func normalizeHost(h string) (string, string) {
	if strings.HasPrefix(h, "[") {
		a, err := netip.ParseAddr(strings.Trim(h, "[]"))
		if err != nil || !a.Is6() {
			return "", "its host is not an IPv6 address"
		}
		return "[" + a.String() + "]", ""
	}
	h = strings.TrimSuffix(h, ".")
	if h == "" {
		return "", "its host is empty"
	}
	if a, err := netip.ParseAddr(h); err == nil && a.Is4() {
		return a.String(), ""
	}
	ascii, err := idna.Lookup.ToASCII(h)
	if err != nil || ascii == "" || net.ParseIP(ascii) != nil {
		return "", "its host is not a valid domain name"
	}
	return strings.ToLower(ascii), ""
}

// NormalizeOrigin checks one entry of a browser connection's
// allowed_origins and returns it in its normal spelling.
func NormalizeOrigin(entry string) (string, error) {
	o, why := parseOrigin(entry, true)
	if why != "" {
		return "", domain.Invalid(errInvalidOrigin, "allowed origin %q is refused: %s", domain.ClipString(entry, 120), why)
	}
	return o.String(), nil
}

// NormalizeOrigins checks a whole list: every entry normalised, duplicates
// dropped (in their first place), at most MaxAllowedOrigins.
func NormalizeOrigins(entries []string) ([]string, error) {
	if len(entries) > MaxAllowedOrigins {
		return nil, domain.Invalid(errInvalidOrigin, "at most %d allowed origins per connection; got %d", MaxAllowedOrigins, len(entries))
	}
	out := make([]string, 0, len(entries))
	seen := map[string]bool{}
	for _, e := range entries {
		n, err := NormalizeOrigin(e)
		if err != nil {
			return nil, err
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out, nil
}

// OriginAllowed reports whether a request's origin (the Origin header, or
// the origin of its Referer) is admitted by a normalised list. "null" — a
// sandboxed frame, a file: page, a redirect across origins — names no site
// and is admitted by no list.
func OriginAllowed(allowed []string, requestOrigin string) bool {
	if len(allowed) == 0 || requestOrigin == "" || requestOrigin == "null" {
		return false
	}
	o, why := parseOrigin(requestOrigin, false)
	if why != "" {
		return false
	}
	for _, a := range allowed {
		e, why := parseOrigin(a, true)
		if why != "" || e.scheme != o.scheme || e.port != o.port {
			continue
		}
		if !e.wildcard {
			if e.host == o.host {
				return true
			}
			continue
		}
		label, rest, ok := strings.Cut(o.host, ".")
		if ok && label != "" && rest == e.host {
			return true
		}
	}
	return false
}

// RefererOrigin is the origin of a Referer header's URL ("" when it has
// none), the stand-in for a missing Origin header.
func RefererOrigin(ref string) string {
	u, err := url.Parse(ref)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	return strings.ToLower(u.Scheme) + "://" + u.Host
}
