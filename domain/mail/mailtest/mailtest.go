// Package mailtest is a real SMTP server on loopback for tests (emersion's
// go-smtp): it keeps what it receives, may demand STARTTLS or TLS with its
// own certificate authority, a user and password, refuse recipients with a
// 5xx, or accept connections and never answer. Tests of every package that
// sends mail drive domain/mail through it — no mock of the protocol.
package mailtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"io"
	"math/big"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	netmail "net/mail"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"anvil/domain/mail"
)

// Options shape a server.
type Options struct {
	// TLS offers STARTTLS with a certificate for 127.0.0.1 (Implicit: TLS
	// from the first byte, as smtps://).
	TLS      bool
	Implicit bool
	// User and Password, when set, are required (AUTH PLAIN).
	User, Password string
	// RefuseRcpt answers every RCPT TO with this 5xx or 4xx code (0: accept).
	RefuseRcpt int
	// Hang accepts connections and never says a word.
	Hang bool
	// HangFirst hangs only the first n connections; the later ones are
	// served (a server that recovers: the retry gets through).
	HangFirst int
	// From is the sender the configuration names (default anvil@example.com).
	From string
}

// Received is one message the server accepted.
type Received struct {
	From string
	To   []string
	Data string
}

// Server is a running SMTP server.
type Server struct {
	Host string
	Port int
	opts Options
	ca   *x509.CertPool

	mu   sync.Mutex
	msgs []Received
	// Connections counts the connections accepted.
	conns int
	held  []net.Conn // the hung ones (HangFirst)
}

// Start runs a server until the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	s := &Server{Host: "127.0.0.1", Port: addr.Port, opts: o}
	if o.Hang {
		var held []net.Conn
		var mu sync.Mutex
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				held = append(held, c)
				s.mu.Lock()
				s.conns++
				s.mu.Unlock()
				mu.Unlock()
			}
		}()
		t.Cleanup(func() {
			ln.Close()
			mu.Lock()
			defer mu.Unlock()
			for _, c := range held {
				c.Close()
			}
		})
		return s
	}
	srv := smtp.NewServer(&backend{s})
	srv.Domain = "mailtest.local"
	srv.ReadTimeout, srv.WriteTimeout = 30*time.Second, 30*time.Second
	srv.MaxMessageBytes = 10 << 20
	srv.MaxRecipients = 50
	srv.ErrorLog = quiet{}
	if o.TLS || o.Implicit {
		cert, pool := selfSigned(t)
		s.ca = pool
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		if o.Implicit {
			ln = tls.NewListener(ln, srv.TLSConfig)
		}
	} else {
		// The server would take AUTH PLAIN without TLS: the tests show
		// that the client never offers it.
		srv.AllowInsecureAuth = true
	}
	go func() { _ = srv.Serve(&counting{Listener: ln, s: s}) }()
	t.Cleanup(func() {
		_ = srv.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.held {
			c.Close()
		}
	})
	return s
}

// URL is the server's ANVIL_SMTP_URL, with its user and password.
func (s *Server) URL() string {
	scheme := "smtp"
	if s.opts.Implicit {
		scheme = "smtps"
	}
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(s.Host, strconv.Itoa(s.Port))}
	if s.opts.User != "" {
		u.User = url.UserPassword(s.opts.User, s.opts.Password)
	}
	return u.String()
}

// Config is the mail configuration that reaches the server: its URL, a
// sender, its certificate authority trusted, and timeout as the bound of
// each step (0: the default).
func (s *Server) Config(t testing.TB, timeout time.Duration) *mail.Config {
	t.Helper()
	from := s.opts.From
	if from == "" {
		from = "Anvil <anvil@example.com>"
	}
	c, err := mail.ParseURL(s.URL(), from)
	if err != nil {
		t.Fatal(err)
	}
	c.Timeout = timeout
	if s.ca != nil {
		c.TLS = &tls.Config{RootCAs: s.ca, MinVersion: tls.VersionTLS12}
	}
	return c
}

// Messages returns what the server accepted so far.
func (s *Server) Messages() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.msgs...)
}

// Connections is how many connections the server accepted.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

type counting struct {
	net.Listener
	s *Server
}

func (c *counting) Accept() (net.Conn, error) {
	for {
		conn, err := c.Listener.Accept()
		if err != nil {
			return conn, err
		}
		c.s.mu.Lock()
		c.s.conns++
		hang := c.s.conns <= c.s.opts.HangFirst
		if hang {
			c.s.held = append(c.s.held, conn)
		}
		c.s.mu.Unlock()
		if !hang {
			return conn, nil
		}
	}
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}
func (quiet) Println(...any)        {}

type backend struct{ s *Server }

func (b *backend) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{s: b.s}, nil }

type session struct {
	s      *Server
	authed bool
	from   string
	to     []string
}

func (ss *session) AuthMechanisms() []string {
	if ss.s.opts.User == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (ss *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != ss.s.opts.User || pass != ss.s.opts.Password {
			return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "authentication failed"}
		}
		ss.authed = true
		return nil
	}), nil
}

func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	if ss.s.opts.User != "" && !ss.authed {
		return &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "authentication required"}
	}
	ss.from = from
	return nil
}

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if c := ss.s.opts.RefuseRcpt; c != 0 {
		return &smtp.SMTPError{Code: c, EnhancedCode: smtp.EnhancedCode{c / 100, 1, 1}, Message: "mailbox " + to + " unavailable"}
	}
	ss.to = append(ss.to, to)
	return nil
}

func (ss *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	ss.s.mu.Lock()
	ss.s.msgs = append(ss.s.msgs, Received{From: ss.from, To: ss.to, Data: string(b)})
	ss.s.mu.Unlock()
	return nil
}

func (ss *session) Reset()        { ss.from, ss.to = "", nil }
func (ss *session) Logout() error { return nil }

// selfSigned makes a certificate for 127.0.0.1 and localhost, and the pool
// that trusts it.
func selfSigned(t testing.TB) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mailtest"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// Header returns a header of a received message, decoded (RFC 2047).
func (r Received) Header(name string) string {
	m, err := netmail.ReadMessage(strings.NewReader(r.Data))
	if err != nil {
		return ""
	}
	v := m.Header.Get(name)
	if d, err := new(mime.WordDecoder).DecodeHeader(v); err == nil {
		return d
	}
	return v
}

// Body returns the decoded text of a received message's part of the given
// content type ("text/plain", "text/html").
func (r Received) Body(contentType string) (string, error) {
	m, err := netmail.ReadMessage(strings.NewReader(r.Data))
	if err != nil {
		return "", err
	}
	return findPart(textproto.MIMEHeader(m.Header), m.Body, contentType)
}

func findPart(h textproto.MIMEHeader, body io.Reader, want string) (string, error) {
	mt, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(mt, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if err != nil {
				return "", errors.New("mailtest: no " + want + " part")
			}
			if s, err := findPart(p.Header, p, want); err == nil {
				return s, nil
			}
		}
	}
	if mt != want {
		return "", errors.New("mailtest: no " + want + " part")
	}
	switch strings.ToLower(h.Get("Content-Transfer-Encoding")) {
	case "quoted-printable":
		body = quotedprintable.NewReader(body)
	case "base64":
		body = base64.NewDecoder(base64.StdEncoding, body)
	}
	b, err := io.ReadAll(body)
	return string(b), err
}
