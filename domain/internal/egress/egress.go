// Package egress builds the one kind of HTTP client anvil uses for a request
// it makes on a user's behalf to an address the user chose: an alert
// destination, a forge's API (docs/forgeapi.md). Such a request must not
// become a probe of what only the server can reach — loopback, the private
// network, a cloud's metadata endpoint (169.254.169.254) — so the client
//
//   - checks every address it dials, after name resolution (a name that
//     resolved to a public address when it was saved and to a private one
//     now — DNS rebinding — is refused too);
//   - connects directly: no proxy from the environment (HTTP_PROXY would
//     make the checked address the proxy's, not the destination's);
//   - follows no redirect: a 3xx could point anywhere, and is returned as
//     the answer.
//
// The address classes are the checkout's (repourl.IsLocalAddr); which
// switch lifts the rule is the caller's (ANVIL_ALERTS_ALLOW_PRIVATE for
// alerts, ANVIL_CHECKOUT_ALLOW_LOCAL for forges).
package egress

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"anvil/domain/repourl"
)

// ErrPrivate is a connection refused because the address it would reach is
// private (the default of [Options.Refused]).
var ErrPrivate = errors.New("egress: the address is private")

// Options shape a confined client.
type Options struct {
	// Timeout bounds one request, answer included.
	Timeout time.Duration
	// MaxIdleConnsPerHost, when set, replaces Go's default of two.
	MaxIdleConnsPerHost int
	// AllowPrivate, when set and true at dial time, lets the client reach
	// private addresses (the operator's switch; read at every dial, so a
	// test may flip it).
	AllowPrivate func() bool
	// IsPrivate says which addresses are refused; nil means
	// repourl.IsLocalAddr. Tests narrow it to serve a "public" forge from
	// 127.0.0.2 beside a private one on 127.0.0.1.
	IsPrivate func(netip.Addr) bool
	// Refused is the error a refused dial wraps (errors.Is finds it
	// through the client's *url.Error); nil means [ErrPrivate].
	Refused error
}

// NewClient returns a client confined as the package comment says.
func NewClient(o Options) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	if o.MaxIdleConnsPerHost > 0 {
		t.MaxIdleConnsPerHost = o.MaxIdleConnsPerHost
	}
	t.DialContext = NewDialer(o).DialContext
	return &http.Client{Timeout: o.Timeout, Transport: t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// NewDialer returns the dialer of a confined client, for callers that
// speak something else than one HTTP request on the connection (a run's
// egress proxy tunnels whatever its command sends, docs/network.md): it
// checks every address it dials as the client does, and its refusal is
// a *RefusedError naming the address.
func NewDialer(o Options) *net.Dialer {
	return &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: o.dialControl}
}

// RefusedError is a dial refused because its address is private; it reads
// as (and errors.Is finds) the caller's Refused error.
type RefusedError struct {
	Addr netip.Addr
	Err  error
}

func (e *RefusedError) Error() string { return e.Err.Error() }

// Unwrap returns the caller's Refused error.
func (e *RefusedError) Unwrap() error { return e.Err }

// dialControl runs on the address actually dialled, after resolution.
func (o Options) dialControl(_, address string, _ syscall.RawConn) error {
	if o.AllowPrivate != nil && o.AllowPrivate() {
		return nil
	}
	refused := o.Refused
	if refused == nil {
		refused = ErrPrivate
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot read the address %q", refused, address)
	}
	isPrivate := o.IsPrivate
	if isPrivate == nil {
		isPrivate = repourl.IsLocalAddr
	}
	if isPrivate(ap.Addr().Unmap()) {
		return &RefusedError{Addr: ap.Addr().Unmap(), Err: refused}
	}
	return nil
}
