// Package forgeapi is how anvil talks to a forge's REST API: "run the latest
// commit" (a branch's head), commit statuses and a repair's pull request
// (docs/forgeapi.md). Three rules hold for every call, whichever path makes
// it:
//
//  1. One client: [NewHTTPClient], the confined client of
//     domain/internal/egress under the checkout policy — every dialled
//     address checked, no proxy from the environment, no redirects — with
//     ANVIL_CHECKOUT_ALLOW_LOCAL the one switch that lets a forge be on a
//     private address. A project's provider_api_url is checked once more
//     when it is saved ([CheckAPIURL]).
//  2. One meaning of provider_api_url per forge: one factory each
//     ([GitHub], [GitLab], [Gitea]) that every path builds its client with.
//  3. No forge's words in anvil's answers: the SDKs copy a refusal's body
//     into their errors, and an address pointed at an internal service would
//     read that service's answer back through a 422 or the run page. [Clean]
//     turns every error into the HTTP status and, for GitHub, its documented
//     validation code; a pull request's address is kept only when [WebURL]
//     accepts it.
package forgeapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"code.gitea.io/sdk/gitea"
	"github.com/google/go-github/v75/github"
	gitlab "gitlab.com/gitlab-org/api/client-go"

	"anvil/domain/internal/egress"
	"anvil/domain/repourl"
)

// ErrPrivateForge is a call refused because the forge's address is private
// and the operator has not allowed private forges.
var ErrPrivateForge = errors.New("the forge's address is private")

// Forge is a project's forge as its API is called.
type Forge struct {
	Provider string // github, gitlab, gitea
	// APIURL is provider_api_url: "" for github.com and gitlab.com; see
	// the factories for what each forge reads it as.
	APIURL string
	Repo   string // owner/name (GitLab: the project path)
	Token  string
}

// Host is the forge host the per-host limits are kept for.
func (f Forge) Host() string {
	if f.APIURL != "" {
		if u, err := url.Parse(f.APIURL); err == nil && u.Host != "" {
			return u.Host
		}
	}
	switch f.Provider {
	case "github":
		return "api.github.com"
	case "gitlab":
		return "gitlab.com"
	}
	return f.Provider
}

// ProviderName is the forge's name as people write it.
func ProviderName(p string) string {
	switch p {
	case "github":
		return "GitHub"
	case "gitlab":
		return "GitLab"
	case "gitea":
		return "Gitea"
	}
	return p
}

// NewHTTPClient is the client of every forge call under the checkout
// policy: private addresses (policy.IsLocal, else repourl.IsLocalAddr) are
// refused at dial time unless policy.AllowLocal, the environment's proxy is
// ignored and redirects are returned, not followed. 30 s bound one call.
func NewHTTPClient(policy repourl.Policy) *http.Client {
	allow := policy.AllowLocal
	return egress.NewClient(egress.Options{Timeout: 30 * time.Second, AllowPrivate: func() bool { return allow },
		IsPrivate: policy.IsLocal, Refused: ErrPrivateForge})
}

// CheckAPIURL applies the checkout policy to a provider_api_url being saved:
// an address that is, or resolves to, a private one is refused (an error
// wrapping repourl.ErrLocal) unless the policy allows local checkouts; a
// host that does not resolve wraps repourl.ErrUnresolved. The call is made
// again through [NewHTTPClient], which checks the address it connects to.
func CheckAPIURL(ctx context.Context, policy repourl.Policy, raw string) error {
	if raw == "" || policy.AllowLocal {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: not an http(s) URL", repourl.ErrSyntax)
	}
	// The policy reads repository addresses; the API's scheme and host are
	// all it needs of this one.
	_, err = policy.Check(ctx, u.Scheme+"://"+u.Host+"/")
	return err
}

// WebURL returns raw when it may be shown and stored as a pull request's
// address: an absolute https:// URL with a host, or http:// when private
// forges are allowed (a forge on the operator's own network often has no
// TLS); "" otherwise. A forge's answer is data, and a javascript: or
// data: "URL" in it would become a link on the incident page.
func WebURL(raw string, allowHTTP bool) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.Opaque != "" {
		return ""
	}
	for _, r := range raw {
		if r < 0x21 || r == 0x7f {
			return ""
		}
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowHTTP:
	default:
		return ""
	}
	return raw
}

// apiRoot parses provider_api_url with one trailing slash, as the SDKs
// join paths onto it.
func apiRoot(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSuffix(strings.TrimSpace(raw), "/") + "/")
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("provider_api_url is not an http(s) URL")
	}
	return u, nil
}

// GitHub builds the client of a GitHub project. provider_api_url is the
// REST API's root, as GitHub Enterprise Server documents it
// (https://ghe.example/api/v3): requests go to <provider_api_url>/repos/….
// Nothing is appended (go-github's WithEnterpriseURLs would add /api/v3/,
// so that an API served at a root URL got statuses at one path and pull
// requests at another); "" is api.github.com.
func GitHub(hc *http.Client, f Forge) (*github.Client, error) {
	gh := github.NewClient(hc).WithAuthToken(f.Token)
	if strings.TrimSpace(f.APIURL) != "" {
		u, err := apiRoot(f.APIURL)
		if err != nil {
			return nil, err
		}
		gh.BaseURL = u
	}
	return gh, nil
}

// GitLab builds the client of a GitLab project. provider_api_url is the
// instance's address (https://gitlab.example); client-go appends /api/v4/
// unless the address already ends with it, so both spellings reach
// <instance>/api/v4/projects/…; "" is gitlab.com. No retries inside the
// client: a job's back-off is the one policy, and a rate-limit answer must
// reach it.
func GitLab(hc *http.Client, f Forge) (*gitlab.Client, error) {
	opts := []gitlab.ClientOptionFunc{gitlab.WithHTTPClient(hc), gitlab.WithCustomRetryMax(0)}
	if strings.TrimSpace(f.APIURL) != "" {
		u, err := apiRoot(f.APIURL)
		if err != nil {
			return nil, err
		}
		opts = append(opts, gitlab.WithBaseURL(u.String()))
	}
	return gitlab.NewClient(f.Token, opts...)
}

// Gitea builds the client of a Gitea (or Forgejo) project.
// provider_api_url is the instance's address (https://gitea.example); the
// SDK sends requests to <instance>/api/v1/…. There is no default instance.
func Gitea(ctx context.Context, hc *http.Client, f Forge) (*gitea.Client, error) {
	if strings.TrimSpace(f.APIURL) == "" {
		return nil, errors.New("a Gitea project needs provider_api_url (the instance's address)")
	}
	u, err := apiRoot(f.APIURL)
	if err != nil {
		return nil, err
	}
	return gitea.NewClient(strings.TrimSuffix(u.String(), "/"), gitea.SetToken(f.Token), gitea.SetHTTPClient(hc),
		gitea.SetContext(ctx), gitea.SetGiteaVersion(""))
}

// SplitRepo reads owner/name.
func SplitRepo(repo string) (string, string, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("repository %q is not owner/name", repo)
	}
	return owner, name, nil
}

// isPrivateRefusal is a dial the confined client refused.
func isPrivateRefusal(err error) bool { return errors.Is(err, ErrPrivateForge) }
