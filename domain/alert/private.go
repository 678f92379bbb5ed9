package alert

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"anvil/domain"
	"anvil/domain/internal/egress"
	"anvil/domain/repourl"
)

// Destinations may not reach the server's own network (docs/contracts/
// alerts.md, "Private addresses"): an alert is a POST that anvil makes on
// an admin's behalf, and a URL pointing at loopback, a private network or
// a cloud metadata endpoint (169.254.169.254) would turn it into a probe
// of what only the server can reach. The address classes are the
// checkout's (repourl.IsLocalAddr). The operator lifts the rule with
// ANVIL_ALERTS_ALLOW_PRIVATE=true.

// ErrPrivateDestination is a delivery refused because the address it
// would connect to is private.
var ErrPrivateDestination = errors.New("alerts: the destination's address is private")

// Resolver looks host names up; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// SetAllowPrivate lets destinations reach private addresses (the
// operator's ANVIL_ALERTS_ALLOW_PRIVATE=true; the tests' local receivers).
func (a *Service) SetAllowPrivate(allow bool) { a.allowPrivate.Store(allow) }

// allowHint is how a refusal tells the operator the way out.
const allowHint = "an operator may allow private destinations with ANVIL_ALERTS_ALLOW_PRIVATE=true"

// checkAddress refuses a destination whose host is, or resolves to, a
// private address — at create and change; the delivery checks again the
// address it connects to (a name may resolve elsewhere by then).
func (a *Service) checkAddress(ctx context.Context, u *url.URL) error {
	if a.allowPrivate.Load() {
		return nil
	}
	host := u.Hostname()
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		r := a.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		addrs, err = r.LookupNetIP(ctx, "ip", host)
		if err != nil || len(addrs) == 0 {
			return domain.Invalid("unresolved_destination", "the destination's host %s does not resolve", host)
		}
	}
	for _, ip := range addrs {
		if repourl.IsLocalAddr(ip.Unmap()) {
			if ip.String() == host {
				return domain.Invalid("private_destination", "%s is a loopback, private, link-local or unique-local address; %s", host, allowHint)
			}
			return domain.Invalid("private_destination", "%s resolves to %s, a loopback, private, link-local or unique-local address; %s", host, ip, allowHint)
		}
	}
	return nil
}

// newHTTPClient keeps a connection per concurrent delivery open to each
// destination (Go keeps two per host by default, so a burst would dial a
// new connection for most deliveries), and bounds an attempt to 10 s. The
// client is the confined one every request anvil makes for a user goes
// through (domain/internal/egress): it checks every address it dials (a
// name that resolved to a public address at create time and to a private
// one now — DNS rebinding — is refused too), takes no proxy from the
// environment and follows no redirect.
func (a *Service) newHTTPClient() *http.Client {
	return egress.NewClient(egress.Options{Timeout: 10 * time.Second, MaxIdleConnsPerHost: QueueConfig.MaxWorkers,
		AllowPrivate: a.allowPrivate.Load, Refused: ErrPrivateDestination})
}
