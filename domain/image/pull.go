package image

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"anvil/domain/internal/egress"
	"anvil/domain/netpolicy"
)

// EnvInsecure names the registries (host:port, comma-separated) the worker
// may reach over plain HTTP.
const EnvInsecure = "ANVIL_REGISTRIES_INSECURE"

// MaxRefBytes bounds an image reference.
const MaxRefBytes = 512

// ErrRefused is a pull refused before any byte left the worker: the
// registry (or a host it redirects to) is not in the project's network
// list, is a private address, or speaks plain HTTP without the operator's
// leave. [RefusedError] names the host and the preset to add.
var ErrRefused = errors.New("image: registry refused by the network list")

// ErrBadRef is a reference that does not parse.
var ErrBadRef = errors.New("image: not an image reference")

// RefusedError is a refused pull.
type RefusedError struct {
	Host   string // host:port
	Preset string // the preset that lists the host, when one does
	Why    string
}

func (e *RefusedError) Error() string {
	msg := fmt.Sprintf("image: pulling from %s is refused: %s", e.Host, e.Why)
	entry := strings.TrimSuffix(e.Host, ":443")
	if e.Preset != "" {
		msg += fmt.Sprintf("; add %s (or %s) to the project's network list", e.Preset, entry)
	} else if strings.Contains(e.Why, "network list") {
		msg += fmt.Sprintf("; add %s to the project's network list", entry)
	}
	return msg
}

// Unwrap returns ErrRefused.
func (e *RefusedError) Unwrap() error { return ErrRefused }

// Puller resolves references and opens images over the network list of
// one project: every request (the registry's own, its token service's, the
// CDN its blobs redirect to) must be to a host:port of List, is dialled
// through the confined dialer (no private address unless AllowPrivate,
// never the worker's own loopback, link-local or metadata addresses unless
// AllowLoopback: the runs' proxy's two switches, docs/network.md), and
// uses plain HTTP only for a host:port of Insecure.
type Puller struct {
	List          *netpolicy.List
	AllowPrivate  bool
	AllowLoopback bool
	Insecure      []string
	// Auth, when set, signs requests to Registry (the host of the
	// reference a run named its pull secret for).
	Auth authn.Authenticator
	// Timeout bounds a request's wait for an answer; 0 is 30 s.
	Timeout time.Duration
}

// ParseInsecure reads ANVIL_REGISTRIES_INSECURE: host:port entries.
func ParseInsecure(v string) ([]string, error) {
	var out []string
	for _, e := range strings.Split(v, ",") {
		e = strings.ToLower(strings.TrimSpace(e))
		if e == "" {
			continue
		}
		h, p, err := net.SplitHostPort(e)
		if err != nil || h == "" {
			return nil, fmt.Errorf("%s: %q is not host:port", EnvInsecure, e)
		}
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%s: %q is not host:port", EnvInsecure, e)
		}
		out = append(out, e)
	}
	return out, nil
}

// Platform is the one the worker runs: images are picked for it from an
// index.
func Platform() v1.Platform { return v1.Platform{OS: "linux", Architecture: runtime.GOARCH} }

// ParseRef reads a reference (node:22, ghcr.io/acme/ci:3, repo@sha256:…)
// as registries name it: a bare name is Docker Hub's library/.
func (p *Puller) ParseRef(ref string) (name.Reference, error) {
	if ref == "" || len(ref) > MaxRefBytes || strings.ContainsAny(ref, " \t\r\n") {
		return nil, fmt.Errorf("%w: %q", ErrBadRef, clip(ref))
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrBadRef, clip(ref), err)
	}
	if slices.Contains(p.Insecure, strings.ToLower(r.Context().RegistryStr())) {
		r, err = name.ParseReference(ref, name.Insecure)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %w", ErrBadRef, clip(ref), err)
		}
	}
	return r, nil
}

func clip(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

// Resolved is a reference pinned to the manifest the worker runs.
type Resolved struct {
	// Ref is the reference as written.
	Ref string
	// Digest is the platform manifest's digest (sha256:…): from an index,
	// the linux manifest of the worker's architecture.
	Digest string
	// Pinned is repository@digest, what a pull (and a re-run) uses.
	Pinned string
}

// Resolve pins ref to its manifest digest for the worker's platform.
func (p *Puller) Resolve(ctx context.Context, ref string) (Resolved, error) {
	r, err := p.ParseRef(ref)
	if err != nil {
		return Resolved{}, err
	}
	desc, err := remote.Get(r, p.options(ctx)...)
	if err != nil {
		return Resolved{}, p.clean(r, err)
	}
	dg := desc.Digest
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return Resolved{}, p.clean(r, err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return Resolved{}, p.clean(r, err)
		}
		want := Platform()
		found := false
		for _, m := range im.Manifests {
			if m.Platform != nil && m.Platform.Satisfies(want) && m.MediaType.IsImage() {
				dg, found = m.Digest, true
				break
			}
		}
		if !found {
			return Resolved{}, fmt.Errorf("image: %s has no %s/%s image", clip(ref), want.OS, want.Architecture)
		}
	}
	return Resolved{Ref: ref, Digest: dg.String(), Pinned: r.Context().Digest(dg.String()).String()}, nil
}

// Image opens the image pinned (repository@sha256:…) for the store.
func (p *Puller) Image(ctx context.Context, pinned string) (v1.Image, error) {
	r, err := p.ParseRef(pinned)
	if err != nil {
		return nil, err
	}
	if _, ok := r.(name.Digest); !ok {
		return nil, fmt.Errorf("%w: %q is not pinned to a digest", ErrBadRef, clip(pinned))
	}
	img, err := remote.Image(r, p.options(ctx)...)
	if err != nil {
		return nil, p.clean(r, err)
	}
	return img, nil
}

func (p *Puller) options(ctx context.Context) []remote.Option {
	auth := authn.Anonymous
	if p.Auth != nil {
		auth = p.Auth
	}
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithTransport(p.transport()),
		remote.WithAuth(auth),
		remote.WithPlatform(Platform()),
		remote.WithUserAgent("anvil"),
		// A refusal is final: never retried, so a pull from a host nobody
		// listed fails at once.
		remote.WithRetryPredicate(func(err error) bool {
			if errors.Is(err, ErrRefused) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return false
			}
			var ne net.Error
			return errors.Is(err, io.ErrUnexpectedEOF) || (errors.As(err, &ne) && ne.Timeout())
		}),
		remote.WithRetryBackoff(remote.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 3}),
	}
}

// clean turns the registry's errors into ours: a refusal keeps its words.
func (p *Puller) clean(r name.Reference, err error) error {
	var re *RefusedError
	if errors.As(err, &re) {
		return re
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	msg := err.Error()
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	if strings.Contains(msg, "server gave HTTP response to HTTPS client") {
		msg += fmt.Sprintf(" (a registry that speaks plain HTTP is reached only when the operator lists it in %s)", EnvInsecure)
	}
	return fmt.Errorf("image: %s: %s", clip(r.String()), msg)
}

func (p *Puller) transport() http.RoundTripper {
	reach := netpolicy.Reach{Private: p.AllowPrivate, Loopback: p.AllowLoopback}
	d := egress.NewDialer(egress.Options{IsPrivate: reach.Refuses})
	t := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: p.timeout(),
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &judge{p: p, next: t}
}

func (p *Puller) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return 30 * time.Second
}

// judge asks the network list about every request before it is sent.
type judge struct {
	p    *Puller
	next http.RoundTripper
}

func (j *judge) RoundTrip(req *http.Request) (*http.Response, error) {
	host := strings.ToLower(req.URL.Hostname())
	port := req.URL.Port()
	if port == "" {
		port = "443"
		if req.URL.Scheme == "http" {
			port = "80"
		}
	}
	n, _ := strconv.Atoi(port)
	hp := netpolicy.HostPort(host, n)
	if req.URL.Scheme != "https" && !slices.Contains(j.p.Insecure, hp) {
		return nil, &RefusedError{Host: hp, Why: fmt.Sprintf("plain HTTP is used only for the registries of %s", EnvInsecure)}
	}
	if err := j.p.List.Allow(host, n); err != nil {
		return nil, &RefusedError{Host: hp, Preset: PresetOf(host), Why: "not in this project's network list"}
	}
	resp, err := j.next.RoundTrip(req)
	if err != nil {
		var re *egress.RefusedError
		if errors.As(err, &re) {
			if netpolicy.IsWorkerLocal(re.Addr) {
				return nil, &RefusedError{Host: hp, Why: fmt.Sprintf("it resolves to the worker's own address (%s); the operator allows such addresses with %s=true", re.Addr, netpolicy.EnvAllowLoopback)}
			}
			return nil, &RefusedError{Host: hp, Why: fmt.Sprintf("it resolves to a private address (%s); the operator allows such addresses with %s=true", re.Addr, netpolicy.EnvAllowPrivate)}
		}
	}
	return resp, err
}

// PresetOf names the preset that lists host, or "".
func PresetOf(host string) string {
	for _, p := range netpolicy.Presets {
		if slices.Contains(p.Hosts, host) {
			return p.Name
		}
	}
	return ""
}

// MaxSecretBytes bounds a pull secret's value.
const MaxSecretBytes = 64 << 10

// ParseCredentials reads a pull secret for registry: a Docker config.json
// ({"auths": {"ghcr.io": {"auth": base64(user:token)}}}, or with username
// and password), or user:token.
func ParseCredentials(value, registry string) (authn.Authenticator, error) {
	value = strings.TrimSpace(value)
	if value == "" || len(value) > MaxSecretBytes {
		return nil, errors.New("image: the pull secret is empty or too long")
	}
	if strings.HasPrefix(value, "{") {
		var cfg struct {
			Auths map[string]struct {
				Auth     string `json:"auth"`
				Username string `json:"username"`
				Password string `json:"password"`
			} `json:"auths"`
		}
		if err := json.Unmarshal([]byte(value), &cfg); err != nil {
			return nil, errors.New("image: the pull secret is neither a Docker config.json nor user:token")
		}
		for k, a := range cfg.Auths {
			if !sameRegistry(k, registry) {
				continue
			}
			if a.Auth != "" {
				raw, err := base64.StdEncoding.DecodeString(a.Auth)
				if err != nil {
					return nil, errors.New("image: the pull secret's auth is not base64")
				}
				u, pw, ok := strings.Cut(string(raw), ":")
				if !ok {
					return nil, errors.New("image: the pull secret's auth is not user:token")
				}
				return &authn.Basic{Username: u, Password: pw}, nil
			}
			return &authn.Basic{Username: a.Username, Password: a.Password}, nil
		}
		return nil, fmt.Errorf("image: the pull secret has no credentials for %s", registry)
	}
	u, pw, ok := strings.Cut(value, ":")
	if !ok || u == "" {
		return nil, errors.New("image: the pull secret is neither a Docker config.json nor user:token")
	}
	return &authn.Basic{Username: u, Password: pw}, nil
}

// sameRegistry compares a config.json key (which may be a URL, and names
// Docker Hub in several ways) with a registry host.
func sameRegistry(key, registry string) bool {
	k := strings.ToLower(key)
	k = strings.TrimPrefix(strings.TrimPrefix(k, "https://"), "http://")
	k, _, _ = strings.Cut(k, "/")
	hub := func(s string) bool {
		return s == "index.docker.io" || s == "docker.io" || s == "registry-1.docker.io"
	}
	r := strings.ToLower(registry)
	return k == r || (hub(k) && hub(r))
}
