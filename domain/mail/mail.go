// Package mail sends anvil's e-mail — alerts, invitations, password
// resets — over the SMTP server the operator configured (ANVIL_SMTP_URL,
// ANVIL_MAIL_FROM; docs/mail.md). It is machinery: it parses the
// configuration, checks addresses, builds a plain-text and HTML message and
// hands it to one server, reporting the server's answer. Who receives what,
// and when to try again, is its callers' (domain/alert, domain/account).
//
// The SMTP protocol is go-mail's; this package only shapes it:
//
//   - STARTTLS when the server offers it (smtp://), TLS from the first byte
//     with smtps://; certificates are verified. Credentials never cross an
//     unencrypted connection except to localhost (go-mail's PLAIN and LOGIN
//     refuse it).
//   - The server is the operator's, not a user's: unlike an alert webhook
//     (domain/internal/egress) it may be on loopback or the private network
//     (a local relay is the usual set-up). What a user chooses is only the
//     recipients, and those are checked addresses, never hosts to dial.
//   - Every attempt is bounded (Timeout, default 15 s, for the dial and for
//     each command), so a server that accepts and then hangs costs one
//     worker that long, and the caller retries later.
//   - The password is never shown or logged: Config.Masked is the URL
//     without it, and errors carry the server's answer, not the URL.
package mail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	netmail "net/mail"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	gomail "github.com/wneessen/go-mail"
)

// MaxRecipients bounds the recipients of one message (an alert
// destination's list).
const MaxRecipients = 20

// DefaultTimeout bounds the dial and each SMTP command of one attempt.
const DefaultTimeout = 15 * time.Second

// ErrNotConfigured is a send asked of a server without ANVIL_SMTP_URL.
var ErrNotConfigured = errors.New("mail: no SMTP server is configured (ANVIL_SMTP_URL)")

// Config is where mail goes and whom it is from.
type Config struct {
	Host     string
	Port     int
	Implicit bool // smtps://: TLS from the first byte
	User     string
	Password string
	From     string
	// TLS, when set, is the base of the TLS configuration (the tests'
	// own certificate authority in RootCAs).
	TLS *tls.Config
	// Timeout bounds the dial and each command (0: DefaultTimeout).
	Timeout time.Duration
	// HELO is the name anvil gives itself (default: go-mail's, the
	// machine's host name).
	HELO string
}

// ParseURL reads ANVIL_SMTP_URL and ANVIL_MAIL_FROM. An empty URL is no
// configuration (nil, nil): mail is optional.
func ParseURL(raw, from string) (*Config, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		if strings.TrimSpace(from) != "" {
			return nil, errors.New("ANVIL_MAIL_FROM is set but ANVIL_SMTP_URL is not")
		}
		return nil, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's error quotes the URL, password included.
		return nil, errors.New("ANVIL_SMTP_URL is not a URL: smtp://[user:password@]host:port or smtps://…")
	}
	c := &Config{Host: u.Hostname()}
	switch u.Scheme {
	case "smtp":
		c.Port = 587
	case "smtps":
		c.Port, c.Implicit = 465, true
	default:
		return nil, errors.New("ANVIL_SMTP_URL must start with smtp:// (STARTTLS when offered) or smtps:// (TLS)")
	}
	if c.Host == "" {
		return nil, errors.New("ANVIL_SMTP_URL has no host")
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return nil, errors.New("ANVIL_SMTP_URL has an invalid port")
		}
		c.Port = n
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("ANVIL_SMTP_URL takes no path or query: smtp://[user:password@]host:port")
	}
	if u.User != nil {
		c.User = u.User.Username()
		c.Password, _ = u.User.Password()
	}
	from = strings.TrimSpace(from)
	if from == "" {
		return nil, errors.New("ANVIL_MAIL_FROM is required with ANVIL_SMTP_URL (the sender, such as anvil@example.com or \"Anvil <anvil@example.com>\")")
	}
	a, err := netmail.ParseAddress(from)
	if err != nil || strings.ContainsAny(from, "\r\n") {
		return nil, errors.New("ANVIL_MAIL_FROM is not an e-mail address")
	}
	c.From = a.String()
	return c, nil
}

// Masked is the configuration as it may be shown: the URL without the
// password.
func (c *Config) Masked() string {
	if c == nil {
		return "(none)"
	}
	scheme := "smtp"
	if c.Implicit {
		scheme = "smtps"
	}
	user := ""
	if c.User != "" {
		user = url.User(c.User).String()
		if c.Password != "" {
			user += ":xxxxx"
		}
		user += "@"
	}
	return scheme + "://" + user + net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
}

// CheckAddresses validates a list of recipients: 1 to MaxRecipients bare
// addresses (no display name, no line breaks), at most 254 characters
// each; duplicates (ignoring case) are dropped, the order kept.
func CheckAddresses(list []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, raw := range list {
		s := strings.TrimSpace(raw)
		if s == "" {
			continue
		}
		if len(s) > 254 || strings.IndexFunc(s, unicode.IsControl) >= 0 {
			return nil, fmt.Errorf("%q is not an e-mail address", clip(s, 60))
		}
		a, err := netmail.ParseAddress(s)
		if err != nil || a.Name != "" || a.Address != s || !strings.Contains(s[strings.LastIndexByte(s, '@')+1:], ".") {
			return nil, fmt.Errorf("%q is not an e-mail address (name@example.com)", clip(s, 60))
		}
		if k := strings.ToLower(s); !seen[k] {
			seen[k] = true
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("at least one recipient is required")
	}
	if len(out) > MaxRecipients {
		return nil, fmt.Errorf("at most %d recipients", MaxRecipients)
	}
	return out, nil
}

// Message is one e-mail: the same words as plain text and as HTML.
type Message struct {
	To      []string
	Subject string
	Text    string
	HTML    string
}

// Reply is the server's answer to a message it accepted: Code is 250 (the
// one success reply to the end of DATA), Text what it said ("250 2.0.0 Ok:
// queued as 4F1…").
type Reply struct {
	Code int
	Text string
}

func accepted(said string) Reply {
	return Reply{Code: 250, Text: clean("250 " + said)}
}

// Error is an attempt that failed: Code is the server's reply code (0 when
// it never answered: a refused connection, a timeout, a TLS failure), Text
// what it said or what went wrong, Temporary whether trying again later may
// help (4xx, no answer), not for a 5xx refusal.
type Error struct {
	Code      int
	Text      string
	Temporary bool
}

func (e *Error) Error() string {
	if e.Code != 0 {
		return "SMTP " + e.Text
	}
	return "SMTP: " + e.Text
}

// Mailer sends messages with one configuration.
type Mailer struct {
	cfg Config
}

// New returns a mailer for cfg; nil cfg gives nil (no mail).
func New(cfg *Config) *Mailer {
	if cfg == nil {
		return nil
	}
	return &Mailer{cfg: *cfg}
}

// Config returns the mailer's configuration (Masked for display).
func (m *Mailer) Config() *Config {
	if m == nil {
		return nil
	}
	c := m.cfg
	return &c
}

func (m *Mailer) timeout() time.Duration {
	if m.cfg.Timeout > 0 {
		return m.cfg.Timeout
	}
	return DefaultTimeout
}

func (m *Mailer) tlsConfig() *tls.Config {
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	if m.cfg.TLS != nil {
		t = m.cfg.TLS.Clone()
	}
	t.ServerName = m.cfg.Host
	return t
}

// dial connects to the operator's server: directly (no proxy), bounded,
// and for smtps:// through TLS at once.
func (m *Mailer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: m.timeout()}
	if m.cfg.Implicit {
		return (&tls.Dialer{NetDialer: d, Config: m.tlsConfig()}).DialContext(ctx, network, addr)
	}
	return d.DialContext(ctx, network, addr)
}

// Send makes one attempt at msg. A nil Mailer refuses with
// ErrNotConfigured; any other failure is an *Error.
func (m *Mailer) Send(ctx context.Context, msg Message) (Reply, error) {
	if m == nil {
		return Reply{}, ErrNotConfigured
	}
	to, err := CheckAddresses(msg.To)
	if err != nil {
		return Reply{}, &Error{Text: err.Error()}
	}
	g := gomail.NewMsg(gomail.WithNoDefaultUserAgent())
	if err := g.From(m.cfg.From); err != nil {
		return Reply{}, &Error{Text: "the sender address cannot be used"}
	}
	if err := g.To(to...); err != nil {
		return Reply{}, &Error{Text: "a recipient address cannot be used"}
	}
	g.SetUserAgent("anvil")
	g.Subject(oneLine(msg.Subject))
	g.SetDate()
	g.SetMessageID()
	g.SetBodyString(gomail.TypeTextPlain, msg.Text)
	if msg.HTML != "" {
		g.AddAlternativeString(gomail.TypeTextHTML, msg.HTML)
	}
	opts := []gomail.Option{gomail.WithPort(m.cfg.Port), gomail.WithTimeout(m.timeout()),
		gomail.WithDialContextFunc(m.dial), gomail.WithTLSConfig(m.tlsConfig())}
	// STARTTLS when offered. With smtps:// the dialer speaks TLS already:
	// the server offers no STARTTLS then, and go-mail reads the finished
	// handshake as an encrypted session.
	opts = append(opts, gomail.WithTLSPolicy(gomail.TLSOpportunistic))
	if m.cfg.User != "" {
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover), gomail.WithUsername(m.cfg.User), gomail.WithPassword(m.cfg.Password))
	} else {
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthNoAuth))
	}
	if m.cfg.HELO != "" {
		opts = append(opts, gomail.WithHELO(m.cfg.HELO))
	}
	c, err := gomail.NewClient(m.cfg.Host, opts...)
	if err != nil {
		return Reply{}, &Error{Text: "the SMTP configuration cannot be used"}
	}
	ctx, cancel := context.WithTimeout(ctx, 4*m.timeout())
	defer cancel()
	if err := c.DialAndSendWithContext(ctx, g); err != nil {
		if g.IsDelivered() {
			// Accepted; only the goodbye failed.
			return accepted(g.ServerResponse()), nil
		}
		return Reply{}, classify(err)
	}
	return accepted(g.ServerResponse()), nil
}

// classify turns go-mail's error into an *Error: the server's code and
// words when it answered, "timed out" or the kind of failure when not.
func classify(err error) *Error {
	if errors.Is(err, gomail.ErrNoSupportedAuthDiscovered) {
		// Over a connection without TLS, go-mail offers only the
		// mechanisms that never send the password (SCRAM, CRAM-MD5).
		return &Error{Text: "no usable authentication: the password is sent only over TLS (smtps://, or a server that offers STARTTLS), " +
			"or with a mechanism that never sends it (SCRAM, CRAM-MD5)"}
	}
	var te *textproto.Error
	if errors.As(err, &te) {
		return &Error{Code: te.Code, Text: clean(fmt.Sprintf("%03d %s", te.Code, te.Msg)), Temporary: te.Code < 500}
	}
	var se *gomail.SendError
	if errors.As(err, &se) {
		code := se.ErrorCode()
		text := clean(se.Error())
		if code != 0 {
			// "sending SMTP RCPT TO command: 550 5.1.1 …": keep what the
			// server said, and at which step.
			return &Error{Code: code, Text: text, Temporary: code < 500}
		}
		err = errors.Join(errors.Unwrap(err), err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		return &Error{Text: "timed out", Temporary: true}
	}
	var ce *tls.CertificateVerificationError
	if errors.As(err, &ce) {
		return &Error{Text: "the server's TLS certificate is not trusted: " + clean(ce.Err.Error()), Temporary: true}
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return &Error{Text: "cannot connect: " + clean(oe.Err.Error()), Temporary: true}
	}
	return &Error{Text: clean(strings.TrimPrefix(err.Error(), "dial failed: ")), Temporary: true}
}

// oneLine keeps a header value on one line.
func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == '\r' || r == '\n' }), " ")
}

// clean makes a server's words safe to keep and show: one line, printable,
// at most 500 characters.
func clean(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return clip(strings.Join(strings.Fields(s), " "), 500)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8Start(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
