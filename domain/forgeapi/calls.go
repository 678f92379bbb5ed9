package forgeapi

import (
	"context"
	"errors"
	"net/http"

	"code.gitea.io/sdk/gitea"
	"github.com/google/go-github/v75/github"
	gitlab "gitlab.com/gitlab-org/api/client-go"
)

// BranchHead asks the forge for a branch's head commit. Errors are *Error
// or anvil's own (an unknown provider, a repository that is not owner/name).
func BranchHead(ctx context.Context, hc *http.Client, f Forge, branch string) (string, error) {
	// go-github reads a branch through the client's transport alone
	// (RoundTrip, for its optional redirects), which skips the client's
	// timeout: bound the call here. The transport is still the confined one.
	if hc.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, hc.Timeout)
		defer cancel()
	}
	switch f.Provider {
	case "github":
		owner, name, err := SplitRepo(f.Repo)
		if err != nil {
			return "", err
		}
		gh, err := GitHub(hc, f)
		if err != nil {
			return "", err
		}
		b, resp, err := gh.Repositories.GetBranch(ctx, owner, name, branch, 0)
		if err != nil {
			return "", Clean(f.Provider, GitHubHTTP(resp), err)
		}
		return b.GetCommit().GetSHA(), nil
	case "gitlab":
		gl, err := GitLab(hc, f)
		if err != nil {
			return "", err
		}
		b, resp, err := gl.Branches.GetBranch(f.Repo, branch, gitlab.WithContext(ctx))
		if err != nil {
			return "", Clean(f.Provider, GitLabHTTP(resp), err)
		}
		if b.Commit == nil {
			return "", errors.New("the branch has no commit")
		}
		return b.Commit.ID, nil
	case "gitea":
		owner, name, err := SplitRepo(f.Repo)
		if err != nil {
			return "", err
		}
		gc, err := Gitea(ctx, hc, f)
		if err != nil {
			return "", err
		}
		b, resp, err := gc.GetRepoBranch(owner, name, branch)
		if err != nil {
			return "", Clean(f.Provider, GiteaHTTP(resp), err)
		}
		if b.Commit == nil {
			return "", errors.New("the branch has no commit")
		}
		return b.Commit.ID, nil
	}
	return "", errors.New("unknown provider " + f.Provider)
}

// PullRequest is a pull (merge) request to open.
type PullRequest struct {
	Head, Base, Title, Body string
}

// OpenPullRequest proposes pr.Head into pr.Base and returns the pull
// request's web address as the forge gave it (pass it through [WebURL]
// before showing it). GitHub: POST <api>/repos/{owner}/{repo}/pulls;
// GitLab: POST <instance>/api/v4/projects/{path}/merge_requests; Gitea:
// POST <instance>/api/v1/repos/{owner}/{repo}/pulls.
func OpenPullRequest(ctx context.Context, hc *http.Client, f Forge, pr PullRequest) (string, error) {
	switch f.Provider {
	case "github":
		owner, name, err := SplitRepo(f.Repo)
		if err != nil {
			return "", err
		}
		gh, err := GitHub(hc, f)
		if err != nil {
			return "", err
		}
		out, resp, err := gh.PullRequests.Create(ctx, owner, name, &github.NewPullRequest{Title: &pr.Title, Head: &pr.Head, Base: &pr.Base, Body: &pr.Body})
		if err != nil {
			return "", Clean(f.Provider, GitHubHTTP(resp), err)
		}
		return out.GetHTMLURL(), nil
	case "gitlab":
		gl, err := GitLab(hc, f)
		if err != nil {
			return "", err
		}
		mr, resp, err := gl.MergeRequests.CreateMergeRequest(f.Repo, &gitlab.CreateMergeRequestOptions{
			Title: &pr.Title, Description: &pr.Body, SourceBranch: &pr.Head, TargetBranch: &pr.Base,
		}, gitlab.WithContext(ctx))
		if err != nil {
			return "", Clean(f.Provider, GitLabHTTP(resp), err)
		}
		return mr.WebURL, nil
	case "gitea":
		owner, name, err := SplitRepo(f.Repo)
		if err != nil {
			return "", err
		}
		gc, err := Gitea(ctx, hc, f)
		if err != nil {
			return "", err
		}
		out, resp, err := gc.CreatePullRequest(owner, name, gitea.CreatePullRequestOption{Head: pr.Head, Base: pr.Base, Title: pr.Title, Body: pr.Body})
		if err != nil {
			return "", Clean(f.Provider, GiteaHTTP(resp), err)
		}
		return out.HTMLURL, nil
	}
	return "", errors.New("unknown provider " + f.Provider)
}

// GitHubHTTP unwraps go-github's response into the *http.Response [Clean]
// and the statuses' retry policy read (nil when there was none); GitLabHTTP
// and GiteaHTTP do the same for the other SDKs.
func GitHubHTTP(r *github.Response) *http.Response {
	if r == nil {
		return nil
	}
	return r.Response
}

// GitLabHTTP unwraps client-go's response (see [GitHubHTTP]).
func GitLabHTTP(r *gitlab.Response) *http.Response {
	if r == nil {
		return nil
	}
	return r.Response
}

// GiteaHTTP unwraps the Gitea SDK's response (see [GitHubHTTP]).
func GiteaHTTP(r *gitea.Response) *http.Response {
	if r == nil {
		return nil
	}
	return r.Response
}
