package forgestatus

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"anvil/domain"
	"anvil/domain/forgeapi"
	"anvil/domain/run"
)

// GitHead resolves a branch's head with git ls-remote (the checkout's
// confined git: sandbox.Git.Head).
type GitHead func(ctx context.Context, repoURL, token, branch string) (string, error)

// LatestCommit resolves a project's default-branch head through its forge's
// API (GET the branch with the official client), or with git ls-remote when
// the project has no provider. hc is forgeapi.NewHTTPClient under the
// checkout policy.
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

// BranchHead asks the forge for a branch's head commit (forgeapi.BranchHead).
func BranchHead(ctx context.Context, hc *http.Client, f Forge, branch string) (string, error) {
	return forgeapi.BranchHead(ctx, hc, f, branch)
}
