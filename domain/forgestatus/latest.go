package forgestatus

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-github/v75/github"
	gitlab "gitlab.com/gitlab-org/api/client-go"

	"anvil/domain"
	"anvil/domain/run"
)

// GitHead resolves a branch's head with git ls-remote (the checkout's
// confined git: sandbox.Git.Head).
type GitHead func(ctx context.Context, repoURL, token, branch string) (string, error)

// LatestCommit resolves a project's default-branch head through its forge's
// API (GET the branch with the official client), or with git ls-remote when
// the project has no provider.
func LatestCommit(hc *http.Client, git GitHead) run.LatestResolver {
	return func(ctx context.Context, p *domain.Project, token string) (string, error) {
		if p.Provider == "" {
			if git == nil {
				return "", fmt.Errorf("the project has no forge and this process cannot run git: %w", run.ErrNoResolver)
			}
			return git(ctx, p.RepoURL, token, p.DefaultBranch)
		}
		f := Forge{Provider: p.Provider, APIURL: p.ProviderAPIURL, Repo: p.ProviderRepo, Token: token}
		return BranchHead(ctx, hc, f, strings.TrimPrefix(p.DefaultBranch, "refs/heads/"))
	}
}

// BranchHead asks the forge for a branch's head commit.
func BranchHead(ctx context.Context, hc *http.Client, f Forge, branch string) (string, error) {
	switch f.Provider {
	case "github":
		owner, name, err := splitRepo(f.Repo)
		if err != nil {
			return "", err
		}
		gh := github.NewClient(hc).WithAuthToken(f.Token)
		if f.APIURL != "" {
			if gh, err = gh.WithEnterpriseURLs(f.APIURL, f.APIURL); err != nil {
				return "", err
			}
		}
		b, _, err := gh.Repositories.GetBranch(ctx, owner, name, branch, 0)
		if err != nil {
			return "", err
		}
		return b.GetCommit().GetSHA(), nil
	case "gitlab":
		gl, err := gitlabClient(hc, f)
		if err != nil {
			return "", err
		}
		b, _, err := gl.Branches.GetBranch(f.Repo, branch, gitlab.WithContext(ctx))
		if err != nil {
			return "", err
		}
		if b.Commit == nil {
			return "", errors.New("the branch has no commit")
		}
		return b.Commit.ID, nil
	case "gitea":
		owner, name, err := splitRepo(f.Repo)
		if err != nil {
			return "", err
		}
		gc, err := giteaClient(ctx, hc, f)
		if err != nil {
			return "", err
		}
		b, _, err := gc.GetRepoBranch(owner, name, branch)
		if err != nil {
			return "", err
		}
		if b.Commit == nil {
			return "", errors.New("the branch has no commit")
		}
		return b.Commit.ID, nil
	}
	return "", errors.New("unknown provider " + f.Provider)
}
