package forgestatus

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"code.gitea.io/sdk/gitea"
	"github.com/google/go-github/v75/github"
	gitlab "gitlab.com/gitlab-org/api/client-go"

	"anvil/domain/forgeapi"
)

// Status is one commit status as every forge takes it.
type Status struct {
	SHA         string
	State       string
	Context     string
	TargetURL   string
	Description string
}

// Forge is where a project's statuses go (forgeapi.Forge: one meaning of
// provider_api_url for every call to a forge).
type Forge = forgeapi.Forge

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
	// Err is a forgeapi.Error (it names the status) or anvil's own words.
	return e.Err.Error()
}
func (e *PostError) Unwrap() error { return e.Err }

// classify turns a client's answer into a PostError (nil on success).
func classify(provider string, resp *http.Response, err error, now time.Time) error {
	if err == nil {
		return nil
	}
	pe := &PostError{Err: forgeapi.Clean(provider, resp, err)}
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
	owner, name, err := forgeapi.SplitRepo(repo)
	if err != nil {
		return "", "", &PostError{Err: err}
	}
	return owner, name, nil
}

func postGitHub(ctx context.Context, hc *http.Client, f Forge, s Status, now time.Time) error {
	owner, name, err := splitRepo(f.Repo)
	if err != nil {
		return err
	}
	gh, err := forgeapi.GitHub(hc, f)
	if err != nil {
		return &PostError{Err: err}
	}
	_, resp, err := gh.Repositories.CreateStatus(ctx, owner, name, s.SHA, &github.RepoStatus{
		State: &s.State, Context: &s.Context, TargetURL: &s.TargetURL, Description: &s.Description})
	r := forgeapi.GitHubHTTP(resp)
	var rl *github.RateLimitError
	if errors.As(err, &rl) && r == nil {
		// go-github refuses locally while it knows the quota is spent.
		return &PostError{Transient: true, RetryAt: rl.Rate.Reset.Time, Err: forgeapi.Clean(f.Provider, nil, err)}
	}
	return classify(f.Provider, r, err, now)
}

func postGitLab(ctx context.Context, hc *http.Client, f Forge, s Status, now time.Time) error {
	gl, err := forgeapi.GitLab(hc, f)
	if err != nil {
		return &PostError{Err: err}
	}
	_, resp, err := gl.Commits.SetCommitStatus(f.Repo, s.SHA, &gitlab.SetCommitStatusOptions{
		State: gitlab.BuildStateValue(s.State), Context: &s.Context, TargetURL: &s.TargetURL, Description: &s.Description,
	}, gitlab.WithContext(ctx))
	return classify(f.Provider, forgeapi.GitLabHTTP(resp), err, now)
}

func postGitea(ctx context.Context, hc *http.Client, f Forge, s Status, now time.Time) error {
	owner, name, err := splitRepo(f.Repo)
	if err != nil {
		return err
	}
	gc, err := forgeapi.Gitea(ctx, hc, f)
	if err != nil {
		return &PostError{Err: err}
	}
	_, resp, err := gc.CreateStatus(owner, name, s.SHA, gitea.CreateStatusOption{
		State: gitea.StatusState(s.State), TargetURL: s.TargetURL, Description: s.Description, Context: s.Context})
	return classify(f.Provider, forgeapi.GiteaHTTP(resp), err, now)
}
