package forgestatus

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"code.gitea.io/sdk/gitea"
	"github.com/google/go-github/v75/github"
	gitlab "gitlab.com/gitlab-org/api/client-go"
)

// Status is one commit status as every forge takes it.
type Status struct {
	SHA         string
	State       string
	Context     string
	TargetURL   string
	Description string
}

// Forge is where a project's statuses go.
type Forge struct {
	Provider string // github, gitlab, gitea
	APIURL   string // "" for github.com / gitlab.com
	Repo     string // owner/name (GitLab: the project path)
	Token    string
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

// PostError is a post that failed, classified for the retry policy.
type PostError struct {
	// Transient: a 5xx, a network error or a rate limit; worth retrying.
	Transient bool
	// RetryAt, when set, is when the forge said to come back (Retry-After,
	// X-RateLimit-Reset / RateLimit-Reset).
	RetryAt time.Time
	Status  int
	Err     error
}

func (e *PostError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("HTTP %d: %s", e.Status, e.Err.Error())
	}
	return e.Err.Error()
}
func (e *PostError) Unwrap() error { return e.Err }

// classify turns a client's answer into a PostError (nil on success).
func classify(resp *http.Response, err error, now time.Time) error {
	if err == nil {
		return nil
	}
	pe := &PostError{Err: err}
	if resp == nil {
		pe.Transient = true // network error: no answer at all
		return pe
	}
	pe.Status = resp.StatusCode
	if at, ok := retryAt(resp.Header, now); ok && (resp.StatusCode == http.StatusTooManyRequests ||
		resp.StatusCode == http.StatusForbidden || resp.StatusCode >= 500) {
		pe.Transient, pe.RetryAt = true, at
		return pe
	}
	pe.Transient = resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests
	return pe
}

// retryAt reads the rate-limit answer: Retry-After (seconds or an HTTP
// date) first, then the reset time of an exhausted quota.
func retryAt(h http.Header, now time.Time) (time.Time, bool) {
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.Atoi(v); err == nil && s >= 0 {
			return now.Add(time.Duration(s) * time.Second), true
		}
		if t, err := http.ParseTime(v); err == nil {
			return t, true
		}
	}
	for _, name := range []string{"X-RateLimit-Reset", "RateLimit-Reset"} {
		if v := strings.TrimSpace(h.Get(name)); v != "" && h.Get(strings.Replace(name, "Reset", "Remaining", 1)) == "0" {
			if s, err := strconv.ParseInt(v, 10, 64); err == nil && s > 0 {
				return time.Unix(s, 0), true
			}
		}
	}
	return time.Time{}, false
}

// Post sends one status through the provider's official client.
func Post(ctx context.Context, hc *http.Client, f Forge, s Status, now time.Time) error {
	switch f.Provider {
	case "github":
		return postGitHub(ctx, hc, f, s, now)
	case "gitlab":
		return postGitLab(ctx, hc, f, s, now)
	case "gitea":
		return postGitea(ctx, hc, f, s, now)
	}
	return &PostError{Err: fmt.Errorf("provider %q cannot take commit statuses", f.Provider)}
}

func splitRepo(repo string) (string, string, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", &PostError{Err: fmt.Errorf("repository %q is not owner/name", repo)}
	}
	return owner, name, nil
}

func postGitHub(ctx context.Context, hc *http.Client, f Forge, s Status, now time.Time) error {
	owner, name, err := splitRepo(f.Repo)
	if err != nil {
		return err
	}
	gh := github.NewClient(hc).WithAuthToken(f.Token)
	if f.APIURL != "" {
		if gh, err = gh.WithEnterpriseURLs(f.APIURL, f.APIURL); err != nil {
			return &PostError{Err: err}
		}
	}
	_, resp, err := gh.Repositories.CreateStatus(ctx, owner, name, s.SHA, &github.RepoStatus{
		State: &s.State, Context: &s.Context, TargetURL: &s.TargetURL, Description: &s.Description})
	var r *http.Response
	if resp != nil {
		r = resp.Response
	}
	var rl *github.RateLimitError
	if errors.As(err, &rl) && r == nil {
		// go-github refuses locally while it knows the quota is spent.
		return &PostError{Transient: true, RetryAt: rl.Rate.Reset.Time, Err: err}
	}
	return classify(r, err, now)
}

func gitlabClient(hc *http.Client, f Forge) (*gitlab.Client, error) {
	// No retries inside the client: the job's back-off is the one policy,
	// and a rate-limit answer must reach it.
	opts := []gitlab.ClientOptionFunc{gitlab.WithHTTPClient(hc), gitlab.WithCustomRetryMax(0)}
	if f.APIURL != "" {
		opts = append(opts, gitlab.WithBaseURL(f.APIURL))
	}
	return gitlab.NewClient(f.Token, opts...)
}

func postGitLab(ctx context.Context, hc *http.Client, f Forge, s Status, now time.Time) error {
	gl, err := gitlabClient(hc, f)
	if err != nil {
		return &PostError{Err: err}
	}
	_, resp, err := gl.Commits.SetCommitStatus(f.Repo, s.SHA, &gitlab.SetCommitStatusOptions{
		State: gitlab.BuildStateValue(s.State), Context: &s.Context, TargetURL: &s.TargetURL, Description: &s.Description,
	}, gitlab.WithContext(ctx))
	var r *http.Response
	if resp != nil {
		r = resp.Response
	}
	return classify(r, err, now)
}

func giteaClient(ctx context.Context, hc *http.Client, f Forge) (*gitea.Client, error) {
	return gitea.NewClient(f.APIURL, gitea.SetToken(f.Token), gitea.SetHTTPClient(hc), gitea.SetContext(ctx), gitea.SetGiteaVersion(""))
}

func postGitea(ctx context.Context, hc *http.Client, f Forge, s Status, now time.Time) error {
	owner, name, err := splitRepo(f.Repo)
	if err != nil {
		return err
	}
	gc, err := giteaClient(ctx, hc, f)
	if err != nil {
		return &PostError{Err: err}
	}
	_, resp, err := gc.CreateStatus(owner, name, s.SHA, gitea.CreateStatusOption{
		State: gitea.StatusState(s.State), TargetURL: s.TargetURL, Description: s.Description, Context: s.Context})
	var r *http.Response
	if resp != nil {
		r = resp.Response
	}
	return classify(r, err, now)
}
