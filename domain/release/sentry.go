package release

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
)

// sentry-cli's releases (docs/releases.md, "sentry-cli"): the parts of
// Sentry's web API that `sentry-cli releases new`, `releases set-commits
// --commit <repo>@<sha>` and `deploys new` call, mapped onto declarations
// — a release new is a declaration for every environment of the projects
// it names, a ref a declared commit of the project whose repository it
// names, a deploy a declaration of the environment with its time.
//
// Sentry's releases belong to the organisation and list their projects;
// anvil's belong to a project. A request names its projects by slug or by
// number (the project segment of the Sentry DSN), as sentry-cli sends
// SENTRY_PROJECT; a deploy without projects is for the projects that know
// the release.

// SentryProject names a project in Sentry's answers.
type SentryProject struct {
	Slug string `json:"slug"`
	Name string `json:"name"`
}

// SentryCommit is a release's last commit in Sentry's answers.
type SentryCommit struct {
	ID string `json:"id"`
}

// SentryRelease is a release as sentry-cli reads it (its ReleaseInfo).
type SentryRelease struct {
	Version      string          `json:"version"`
	URL          *string         `json:"url"`
	DateCreated  time.Time       `json:"dateCreated"`
	DateReleased *time.Time      `json:"dateReleased"`
	LastEvent    *time.Time      `json:"lastEvent"`
	NewGroups    int64           `json:"newGroups"`
	Projects     []SentryProject `json:"projects"`
	LastCommit   *SentryCommit   `json:"lastCommit"`
}

// SentryRef is one head commit of set-commits: "<repo>@<sha>" (a range
// "<repo>@<prev>..<sha>" sends previousCommit too; the release is the head).
type SentryRef struct {
	Repository     string  `json:"repository"`
	Commit         string  `json:"commit"`
	PreviousCommit *string `json:"previousCommit"`
}

// SentryReleaseInput is the body of POST …/releases/ and PUT
// …/releases/{version}/. Projects are slugs (strings) or numbers. The
// commits that `set-commits --auto/--local` reads from a local checkout
// are not taken: which of them is the release's head is the CLI's guess,
// and a wrong commit makes a release contain a fix it does not.
type SentryReleaseInput struct {
	Version      string            `json:"version"`
	Projects     []json.RawMessage `json:"projects"`
	URL          *string           `json:"url"`
	DateStarted  *time.Time        `json:"dateStarted"`
	DateReleased *time.Time        `json:"dateReleased"`
	Refs         []SentryRef       `json:"refs"`
}

// SentryDeployInput is the body of POST …/releases/{version}/deploys/.
type SentryDeployInput struct {
	Environment  string     `json:"environment"`
	Name         *string    `json:"name"`
	URL          *string    `json:"url"`
	DateStarted  *time.Time `json:"dateStarted"`
	DateFinished *time.Time `json:"dateFinished"`
	Projects     []string   `json:"projects"`
}

// SentryDeploy is a deploy as sentry-cli reads it.
type SentryDeploy struct {
	ID           string     `json:"id"`
	Environment  string     `json:"environment"`
	Name         *string    `json:"name"`
	URL          *string    `json:"url"`
	DateStarted  *time.Time `json:"dateStarted"`
	DateFinished *time.Time `json:"dateFinished"`
}

// SentryRepoProvider names a repository's forge.
type SentryRepoProvider struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// SentryRepo is a repository of the organisation as set-commits checks
// `--commit <repo>@<sha>` against: one per project with a repository,
// named by its provider repository ("acme/shop") or else its slug.
type SentryRepo struct {
	ID          string             `json:"id"`
	Name        string             `json:"name"`
	URL         *string            `json:"url"`
	Provider    SentryRepoProvider `json:"provider"`
	Status      string             `json:"status"`
	DateCreated time.Time          `json:"dateCreated"`
}

// repoName is the name set-commits knows a project's repository by.
func repoName(p *domain.Project) string {
	if p.ProviderRepo != "" {
		return p.ProviderRepo
	}
	return p.Slug
}

// orgProjects reads the live projects of the caller's organisation, which
// must be the one the path names.
func (rs *Releases) orgProjects(ctx context.Context, pr *domain.Principal, orgSlug string) ([]*domain.Project, error) {
	if pr == nil || pr.OrgSlug != orgSlug {
		return nil, domain.NotFound("organization")
	}
	var ps []*domain.Project
	if err := domain.SelectLiveProjects(rs.s.DB, &ps).Where("org_id = ?", pr.OrgID).Order("slug").Scan(ctx); err != nil {
		return nil, fmt.Errorf("releases: projects of %s: %w", orgSlug, err)
	}
	return ps, nil
}

// SentryRepos lists the organisation's repositories.
func (rs *Releases) SentryRepos(ctx context.Context, pr *domain.Principal, orgSlug string) ([]SentryRepo, error) {
	ps, err := rs.orgProjects(ctx, pr, orgSlug)
	if err != nil {
		return nil, err
	}
	out := []SentryRepo{}
	for _, p := range ps {
		if p.RepoURL == "" {
			continue
		}
		prov := p.Provider
		if prov == "" {
			prov = "git"
		}
		out = append(out, SentryRepo{ID: strconv.FormatInt(p.Number, 10), Name: repoName(p),
			Provider: SentryRepoProvider{ID: "integrations:" + prov, Name: prov}, Status: "active", DateCreated: p.CreatedAt.UTC()})
	}
	return out, nil
}

// named picks the projects a request names (slugs or numbers); an unknown
// one is a 404.
func named(ps []*domain.Project, ids []json.RawMessage) ([]*domain.Project, error) {
	var out []*domain.Project
	for _, raw := range ids {
		var slug string
		var number int64
		if err := json.Unmarshal(raw, &slug); err != nil {
			if err := json.Unmarshal(raw, &number); err != nil {
				return nil, domain.Invalid("invalid_projects", "projects are project slugs or numbers")
			}
		}
		if n, err := strconv.ParseInt(slug, 10, 64); err == nil {
			number = n
		}
		var found *domain.Project
		for _, p := range ps {
			if (slug != "" && p.Slug == strings.ToLower(slug)) || (number > 0 && p.Number == number) {
				found = p
				break
			}
		}
		if found == nil {
			return nil, domain.NotFound("project")
		}
		out = appendProject(out, found)
	}
	return out, nil
}

func appendProject(ps []*domain.Project, p *domain.Project) []*domain.Project {
	for _, q := range ps {
		if q.ID == p.ID {
			return ps
		}
	}
	return append(ps, p)
}

// byRepo is the project whose repository a ref names (case-insensitive,
// as set-commits compares).
func byRepo(ps []*domain.Project, name string) *domain.Project {
	for _, p := range ps {
		if p.RepoURL != "" && strings.EqualFold(repoName(p), name) {
			return p
		}
	}
	return nil
}

// SentryNewRelease creates (or touches) a release: POST …/releases/.
func (rs *Releases) SentryNewRelease(ctx context.Context, pr *domain.Principal, orgSlug string, in SentryReleaseInput) (SentryRelease, error) {
	ps, err := rs.orgProjects(ctx, pr, orgSlug)
	if err != nil {
		return SentryRelease{}, err
	}
	targets, err := named(ps, in.Projects)
	if err != nil {
		return SentryRelease{}, err
	}
	if len(targets) == 0 {
		return SentryRelease{}, domain.Invalid("no_project", "projects must name the release's project (SENTRY_PROJECT)")
	}
	return rs.sentryDeclare(ctx, pr, ps, targets, in.Version, in)
}

// SentryUpdateRelease updates a release: PUT …/releases/{version}/ — its
// refs declare the commits of the projects whose repositories they name.
// A release no project knows, and that this does not declare, is a 404.
func (rs *Releases) SentryUpdateRelease(ctx context.Context, pr *domain.Principal, orgSlug, version string, in SentryReleaseInput) (SentryRelease, error) {
	ps, err := rs.orgProjects(ctx, pr, orgSlug)
	if err != nil {
		return SentryRelease{}, err
	}
	targets, err := named(ps, in.Projects)
	if err != nil {
		return SentryRelease{}, err
	}
	if len(targets) == 0 && len(in.Refs) == 0 {
		if targets, err = rs.knowing(ctx, ps, version); err != nil {
			return SentryRelease{}, err
		}
		if len(targets) == 0 {
			return SentryRelease{}, domain.NotFound("release")
		}
	}
	return rs.sentryDeclare(ctx, pr, ps, targets, version, in)
}

// sentryDeclare declares version for every project of targets and of the
// refs (with the ref's commit) and answers Sentry's release.
func (rs *Releases) sentryDeclare(ctx context.Context, pr *domain.Principal, ps, targets []*domain.Project, version string, in SentryReleaseInput) (SentryRelease, error) {
	commits := map[uuid.UUID]string{}
	for _, ref := range in.Refs {
		p := byRepo(ps, ref.Repository)
		if p == nil {
			return SentryRelease{}, domain.Invalid("unknown_repository", "no project of this organisation has the repository %q",
				domain.ClipString(ref.Repository, 100))
		}
		sha, ok := NormalizeSHA(ref.Commit)
		if !ok {
			return SentryRelease{}, domain.Invalid("invalid_commit_sha", "the commit of %q must be a commit SHA: 7 to 40 hexadecimal digits",
				domain.ClipString(ref.Repository, 100))
		}
		commits[p.ID] = sha
		targets = appendProject(targets, p)
	}
	out := SentryRelease{Version: strings.TrimSpace(version), URL: in.URL, DateCreated: rs.s.Now().UTC(), DateReleased: in.DateReleased,
		Projects: []SentryProject{}}
	for _, p := range targets {
		r, err := rs.Declare(ctx, pr, p.ID, Declaration{Version: version, CommitSHA: commits[p.ID], Source: SourceSentryCLI})
		if err != nil {
			return SentryRelease{}, err
		}
		out.Projects = append(out.Projects, SentryProject{Slug: p.Slug, Name: p.Name})
		if r.CommitSHA != "" && out.LastCommit == nil {
			out.LastCommit = &SentryCommit{ID: r.CommitSHA}
		}
		if r.LastSeen != nil && (out.LastEvent == nil || r.LastSeen.After(*out.LastEvent)) {
			out.LastEvent = r.LastSeen
		}
	}
	return out, nil
}

// knowing are the projects of ps with a row of version.
func (rs *Releases) knowing(ctx context.Context, ps []*domain.Project, version string) ([]*domain.Project, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	ids := make([]uuid.UUID, 0, len(ps))
	for _, p := range ps {
		ids = append(ids, p.ID)
	}
	var have []uuid.UUID
	if err := rs.s.DB.NewRaw(`SELECT DISTINCT project_id FROM releases WHERE project_id IN (?) AND version = ?`,
		bun.List(ids), strings.TrimSpace(version)).Scan(ctx, &have); err != nil {
		return nil, fmt.Errorf("releases: projects of %s: %w", version, err)
	}
	var out []*domain.Project
	for _, p := range ps {
		for _, id := range have {
			if p.ID == id {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// SentryNewDeploy records a deploy: POST …/releases/{version}/deploys/ —
// the release in environment, deployed when the deploy finished (or now).
func (rs *Releases) SentryNewDeploy(ctx context.Context, pr *domain.Principal, orgSlug, version string, in SentryDeployInput) (SentryDeploy, error) {
	ps, err := rs.orgProjects(ctx, pr, orgSlug)
	if err != nil {
		return SentryDeploy{}, err
	}
	if strings.TrimSpace(in.Environment) == "" {
		return SentryDeploy{}, domain.Invalid("invalid_environment", "environment is required, such as production")
	}
	raw := make([]json.RawMessage, 0, len(in.Projects))
	for _, p := range in.Projects {
		b, _ := json.Marshal(p)
		raw = append(raw, b)
	}
	targets, err := named(ps, raw)
	if err != nil {
		return SentryDeploy{}, err
	}
	if len(targets) == 0 {
		if targets, err = rs.knowing(ctx, ps, version); err != nil {
			return SentryDeploy{}, err
		}
		if len(targets) == 0 {
			return SentryDeploy{}, domain.NotFound("release")
		}
	}
	at := rs.s.Now().UTC()
	if in.DateFinished != nil {
		at = in.DateFinished.UTC()
	}
	for _, p := range targets {
		if _, err := rs.Declare(ctx, pr, p.ID, Declaration{Version: version, Environment: in.Environment, DeployedAt: &at, Source: SourceSentryCLI}); err != nil {
			return SentryDeploy{}, err
		}
	}
	return SentryDeploy{ID: uuid.NewString(), Environment: strings.ToLower(strings.TrimSpace(in.Environment)), Name: in.Name, URL: in.URL,
		DateStarted: in.DateStarted, DateFinished: &at}, nil
}
