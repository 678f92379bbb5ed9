package project

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/internal/dbutil"
	"anvil/domain/repourl"
)

// ProjectInput is what a person or client may set on a project. Pointers
// distinguish "not given" from "empty" on update.
type ProjectInput struct {
	Slug              *string `json:"slug"`
	Name              *string `json:"name"`
	RepoURL           *string `json:"repo_url"`
	DefaultBranch     *string `json:"default_branch"`
	RunCommand        *string `json:"run_command"`
	RepairCommand     *string `json:"repair_command"`
	Provider          *string `json:"provider"`
	ProviderAPIURL    *string `json:"provider_api_url"`
	ProviderRepo      *string `json:"provider_repo"`
	ProviderToken     *string `json:"provider_token"`
	RunTimeoutSeconds *int    `json:"run_timeout_seconds"`
	// BranchFilters replaces the list of branch globs when given.
	BranchFilters *[]string `json:"branch_filters"`
	// StatusContext is the context of the project's commit statuses;
	// left out on create, it is anvil/<slug>.
	StatusContext *string `json:"status_context"`
	// FixVerificationWindow is how long a shipped fix must hold before its
	// incident closes, written like retention durations ("24h", "30m";
	// at least "1m"; docs/releases.md).
	FixVerificationWindow *string `json:"fix_verification_window"`
	// NetworkAllow and RepairNetworkAllow replace the network lists of
	// runs and of repair runs when given (netpolicy entries; docs/network.md).
	NetworkAllow       *[]string `json:"network_allow"`
	RepairNetworkAllow *[]string `json:"repair_network_allow"`
	// ForkCache says whether runs of a fork's code get a read-only copy of
	// the project's cache (true when left out on create; docs/caches.md).
	ForkCache *bool `json:"fork_cache"`
	// RunImage and RepairImage: an image reference (node:22,
	// ghcr.io/acme/ci:3, repo@sha256:…) or "" (docs/images.md).
	RunImage    *string `json:"run_image"`
	RepairImage *string `json:"repair_image"`
	// ImagePullSecret names the run secret whose credentials pull
	// run_image and repair_image; "" pulls them anonymously
	// (docs/images.md, "Private registries").
	ImagePullSecret *string `json:"image_pull_secret"`
}

var (
	providerRepoRE = regexp.MustCompile(`^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)+$`)
)

// repoURLProblem checks the syntax of a repository address (https, http,
// ssh or scp-like; file:// and absolute paths parse, the policy refuses
// them later). An address with no scheme that is not an absolute path
// ("github.com/foo/bar", "foo") is malformed: git would read it as a path
// relative to the worker's directory, which is never what was meant.
func repoURLProblem(s string) (string, string) {
	t, err := repourl.Parse(s)
	if err != nil {
		return "invalid_repo_url", "is not a supported repository address: " + repourl.Detail(err)
	}
	if t.Kind == repourl.KindLocal && !strings.Contains(s, "://") && !strings.HasPrefix(s, "/") {
		msg := fmt.Sprintf("is malformed: %q has no scheme (https://, http://, ssh://) and is not an absolute path", domain.ClipString(s, 80))
		if first, _, _ := strings.Cut(s, "/"); strings.Contains(first, ".") && strings.Contains(s, "/") {
			msg += fmt.Sprintf("; did you mean %q?", "https://"+domain.ClipString(s, 80))
		}
		return "malformed_repo_url", msg
	}
	return "", ""
}

func trimmed(p *string) string {
	if p == nil {
		return ""
	}
	return strings.TrimSpace(*p)
}

// apply validates in and writes it onto p. creating demands every required
// field. Every refused field is reported, with those of pre (found before,
// such as the checkout policy's) in one Invalid error.
func (in *ProjectInput) apply(p *domain.Project, creating bool, pre domain.FieldErrors) error {
	type field struct {
		name     string
		val      *string
		dst      *string
		required bool
		max      int
		check    func(string) (code, problem string)
	}
	fields := []field{
		{"slug", in.Slug, &p.Slug, true, 63, func(s string) (string, string) {
			if !domain.ValidSlug(s) {
				return "invalid_slug", fmt.Sprintf("%q must match ^[a-z0-9][a-z0-9-]{0,62}$ (lower-case letters, digits and dashes)", s)
			}
			// /projects/:slug shares its segment with /projects/new and
			// /projects/:id (docs/contracts/private-api.md, "Projects by slug").
			if _, err := uuid.Parse(s); s == "new" || err == nil {
				return "reserved_slug", fmt.Sprintf("%q cannot be a project's slug: it would be read as a page or a project id in /projects/%s", s, s)
			}
			return "", ""
		}},
		{"name", in.Name, &p.Name, false, 200, nil},
		{"repo_url", in.RepoURL, &p.RepoURL, true, 2048, repoURLProblem},
		{"default_branch", in.DefaultBranch, &p.DefaultBranch, true, 255, func(s string) (string, string) {
			if !domain.ValidBranch(s) || strings.Contains(s, "..") || strings.HasPrefix(s, "-") {
				return "invalid_default_branch", fmt.Sprintf("%q is not a valid branch name", s)
			}
			return "", ""
		}},
		{"run_command", in.RunCommand, &p.RunCommand, true, 10000, nil},
		{"repair_command", in.RepairCommand, &p.RepairCommand, false, 10000, nil},
		{"provider", in.Provider, &p.Provider, false, 20, func(s string) (string, string) {
			switch s {
			case "", "github", "gitlab", "gitea":
				return "", ""
			}
			return "invalid_provider", "must be one of github, gitlab, gitea"
		}},
		{"provider_api_url", in.ProviderAPIURL, &p.ProviderAPIURL, false, 2048, func(s string) (string, string) {
			if s == "" {
				return "", ""
			}
			u, err := url.Parse(s)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return "invalid_provider_api_url", "must be an http(s) URL"
			}
			return "", ""
		}},
		{"provider_repo", in.ProviderRepo, &p.ProviderRepo, false, 255, func(s string) (string, string) {
			if s != "" && !providerRepoRE.MatchString(s) {
				return "invalid_provider_repo", "must look like owner/name"
			}
			return "", ""
		}},
		{"status_context", in.StatusContext, &p.StatusContext, false, 1 << 16, statusContextProblem},
		{"run_image", in.RunImage, &p.RunImage, false, 512, imageRefProblem},
		{"repair_image", in.RepairImage, &p.RepairImage, false, 512, imageRefProblem},
		{"image_pull_secret", in.ImagePullSecret, &p.ImagePullSecret, false, 64, pullSecretNameProblem},
	}
	var errs domain.FieldErrors
	for _, f := range fields {
		if f.val == nil {
			if creating && f.required {
				errs.Add(f.name, "missing_"+f.name, "is required")
			}
			continue
		}
		v := trimmed(f.val)
		if f.name == "run_command" || f.name == "repair_command" {
			v = strings.TrimRight(strings.ReplaceAll(*f.val, "\r\n", "\n"), " \n\t")
			v = strings.TrimLeft(v, " \n\t")
		}
		switch {
		case v == "" && f.required:
			errs.Add(f.name, "missing_"+f.name, "must not be empty")
			continue
		case len(v) > f.max:
			errs.Add(f.name, "too_long_"+f.name, "must be at most %d characters", f.max)
			continue
		}
		if f.check != nil {
			if code, problem := f.check(v); code != "" {
				errs.Add(f.name, code, "%s", problem)
				continue
			}
		}
		if f.name == "repo_url" && pre.Has("repo_url") {
			continue
		}
		*f.dst = v
	}
	for _, e := range pre {
		if !errs.Has(e.Field) {
			errs = append(errs, e)
		}
	}
	if p.Name == "" {
		p.Name = p.Slug
	}
	if p.StatusContext == "" && p.Slug != "" {
		p.StatusContext = domain.DefaultStatusContext(p.Slug)
	}
	if in.RunTimeoutSeconds != nil {
		if *in.RunTimeoutSeconds < 1 || *in.RunTimeoutSeconds > 86400 {
			errs.Add("run_timeout_seconds", "invalid_run_timeout", "must be between 1 and 86400")
		} else {
			p.RunTimeoutSeconds = *in.RunTimeoutSeconds
		}
	}
	if p.RunTimeoutSeconds == 0 {
		p.RunTimeoutSeconds = 1800
	}
	if in.FixVerificationWindow != nil {
		d, ok := domain.ParseWindow(*in.FixVerificationWindow)
		switch {
		case !ok:
			errs.Add("fix_verification_window", "invalid_fix_verification_window", `must be a whole number followed by d, h, m or s, such as "24h" or "30m"`)
		case d < time.Minute:
			errs.Add("fix_verification_window", "invalid_fix_verification_window", "must be at least 1m")
		default:
			p.FixVerificationSeconds = int64(d / time.Second)
		}
	}
	if in.BranchFilters != nil {
		f, err := checkBranchFilters(*in.BranchFilters)
		var de *domain.Error
		switch {
		case errors.As(err, &de):
			errs.Add("branch_filters", de.Code, "%s", strings.TrimPrefix(de.Message, "branch filter "))
		case err == nil:
			p.BranchFilters = f
		}
	}
	if p.BranchFilters == nil {
		p.BranchFilters = []string{}
	}
	applyNetworkList(&errs, "network_allow", in.NetworkAllow, &p.NetworkAllow)
	applyNetworkList(&errs, "repair_network_allow", in.RepairNetworkAllow, &p.RepairNetworkAllow)
	switch {
	case in.ForkCache != nil:
		p.ForkCache = *in.ForkCache
	case creating:
		p.ForkCache = true
	}
	if p.Provider != "" && p.ProviderRepo == "" && in.ProviderRepo != nil && !errs.Has("provider_repo") && !errs.Has("provider") {
		errs.Add("provider_repo", "missing_provider_repo", "(owner/name) is required when provider is set")
	}
	if in.ProviderToken != nil && len(strings.TrimSpace(*in.ProviderToken)) > 4096 {
		errs.Add("provider_token", "too_long_provider_token", "must be at most 4096 characters")
	}
	return errs.Err()
}

// checkRepoURL applies the checkout policy to a repository address being
// saved: a local one is refused (a field error), a host that does not
// resolve only warned about.
func (ps *Projects) checkRepoURL(ctx context.Context, in *ProjectInput) (domain.FieldErrors, []string) {
	raw := trimmed(in.RepoURL)
	if in.RepoURL == nil || raw == "" {
		return nil, nil
	}
	if code, _ := repoURLProblem(raw); code != "" {
		return nil, nil // apply reports the syntax
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := ps.policy.Check(ctx, raw)
	switch {
	case errors.Is(err, repourl.ErrLocal):
		var fe domain.FieldErrors
		fe.Add("repo_url", "local_repo_url", "is a local checkout, refused: %s", repourl.Detail(err))
		return fe, nil
	case errors.Is(err, repourl.ErrUnresolved):
		return nil, []string{fmt.Sprintf("the repository's host %s does not resolve (yet); runs fail until it does", repourl.Detail(err))}
	}
	return nil, nil
}

// probe asks a saved project's repository whether it answers (git
// ls-remote, through the prober the worker's checkout uses) and returns a
// warning when it does not. The project is saved either way: a repository
// may be unreachable for a moment, or reachable only from the workers.
func (ps *Projects) probe(ctx context.Context, p *domain.Project) []string {
	if ps.prober == nil {
		return nil
	}
	token, err := ps.ProviderToken(p)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := ps.prober(ctx, p.RepoURL, token); err != nil {
		msg := strings.TrimPrefix(err.Error(), "sandbox: ")
		if token != "" {
			msg = strings.ReplaceAll(msg, token, "[REDACTED]")
		}
		if len(msg) > 400 {
			msg = msg[:400] + "…"
		}
		return []string{"the repository did not answer (git ls-remote): " + msg}
	}
	return nil
}

// RepoProber asks a repository whether it answers (git ls-remote), with
// the provider token; the worker's checkout provides it.
type RepoProber func(ctx context.Context, repoURL, token string) error

// Projects manages projects.
type Projects struct {
	s      *domain.Store
	policy repourl.Policy
	prober RepoProber
}

// NewProjects builds the service; repository addresses are held to the
// strict checkout policy until SetCheckout says otherwise.
func NewProjects(s *domain.Store) *Projects { return &Projects{s: s} }

// SetCheckout sets the checkout policy applied when a project is saved and
// the prober (nil for none) that checks its repository answers.
func (ps *Projects) SetCheckout(policy repourl.Policy, prober RepoProber) {
	ps.policy, ps.prober = policy, prober
}

// CheckoutPolicy is the policy repositories and forges are held to
// (ANVIL_CHECKOUT_ALLOW_LOCAL); the forges' client is built on it.
func (ps *Projects) CheckoutPolicy() repourl.Policy { return ps.policy }

func providerTokenAAD(id uuid.UUID) []byte {
	return []byte("project:" + id.String() + ":provider_token")
}

func (ps *Projects) setToken(p *domain.Project, in *ProjectInput) error {
	if in.ProviderToken == nil {
		return nil
	}
	tok := strings.TrimSpace(*in.ProviderToken)
	if tok == "" {
		p.ProviderTokenEnc = ""
		return nil
	}
	enc, err := ps.s.Keys.Seal([]byte(tok), providerTokenAAD(p.ID))
	if err != nil {
		return fmt.Errorf("encrypt provider token: %w", err)
	}
	p.ProviderTokenEnc = enc
	return nil
}

// ProviderToken decrypts a project's provider token ("" when none).
func (ps *Projects) ProviderToken(p *domain.Project) (string, error) {
	if p.ProviderTokenEnc == "" {
		return "", nil
	}
	b, err := ps.s.Keys.Open(p.ProviderTokenEnc, providerTokenAAD(p.ID))
	if err != nil {
		return "", fmt.Errorf("decrypt provider token of project %s: %w", p.ID, err)
	}
	return string(b), nil
}

// Create validates and stores a new project.
func (ps *Projects) Create(ctx context.Context, pr *domain.Principal, in ProjectInput) (*domain.Project, error) {
	if err := domain.RequireRole(pr, domain.RoleAdmin); err != nil {
		return nil, err
	}
	p := &domain.Project{ID: uuid.New(), OrgID: pr.OrgID}
	pre, warnings := ps.checkRepoURL(ctx, &in)
	pre, warnings = ps.checkAPIURL(ctx, &in, pre, warnings)
	// A new project has no run secrets yet: any pull secret is unknown.
	pre = pullSecretUnknown(pre, &in)
	if err := in.apply(p, true, pre); err != nil {
		return nil, err
	}
	if err := ps.setToken(p, &in); err != nil {
		return nil, err
	}
	err := ps.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(p).Returning("*").Exec(ctx); err != nil {
			return err
		}
		return domain.RecordAudit(ctx, tx, pr, domain.AuditProjectCreated, p.Slug, map[string]any{"project_id": p.ID.String(),
			"repo_url": p.RepoURL, "default_branch": p.DefaultBranch, "run_command": p.RunCommand})
	})
	if err != nil {
		if dbutil.IsUnique(err, "projects_org_slug_key") {
			return nil, domain.Conflict("slug_taken", "a project with slug %q already exists in this organisation", p.Slug)
		}
		return nil, fmt.Errorf("create project: %w", err)
	}
	p.Warnings = warnings
	if len(warnings) == 0 {
		p.Warnings = ps.probe(ctx, p)
	}
	return p, nil
}

// Update changes the given fields of a project.
func (ps *Projects) Update(ctx context.Context, pr *domain.Principal, id uuid.UUID, in ProjectInput) (*domain.Project, error) {
	if err := domain.RequireRole(pr, domain.RoleAdmin); err != nil {
		return nil, err
	}
	var out *domain.Project
	// The policy resolves the host: before the project's lock, not under it.
	pre, warnings := ps.checkRepoURL(ctx, &in)
	pre, warnings = ps.checkAPIURL(ctx, &in, pre, warnings)
	err := ps.s.WithProject(ctx, id, func(ctx context.Context, tx bun.Tx, p *domain.Project) error {
		if p.OrgID != pr.OrgID {
			return domain.NotFound("project")
		}
		before := *p
		before.BranchFilters = append([]string{}, p.BranchFilters...)
		before.NetworkAllow = append([]string{}, p.NetworkAllow...)
		before.RepairNetworkAllow = append([]string{}, p.RepairNetworkAllow...)
		refused := pre
		if v := trimmed(in.ImagePullSecret); v != "" {
			// Read under the project's lock, which run secrets are saved
			// and deleted under too.
			exists, err := tx.NewSelect().Table("run_secrets").Where("project_id = ? AND name = ?", p.ID, v).Exists(ctx)
			if err != nil {
				return fmt.Errorf("read run secrets: %w", err)
			}
			if !exists {
				refused = pullSecretUnknown(pre, &in)
			}
		}
		if err := in.apply(p, false, refused); err != nil {
			return err
		}
		if err := ps.setToken(p, &in); err != nil {
			return err
		}
		p.UpdatedAt = ps.s.Now()
		if _, err := tx.NewUpdate().Model(p).WherePK().
			Column("slug", "name", "repo_url", "default_branch", "run_command", "repair_command", "provider",
				"provider_api_url", "provider_repo", "provider_token_enc", "run_timeout_seconds", "branch_filters", "status_context", "fix_verification_window",
				"network_allow", "repair_network_allow", "fork_cache", "run_image", "repair_image", "image_pull_secret", "updated_at").
			Exec(ctx); err != nil {
			if dbutil.IsUnique(err, "projects_org_slug_key") {
				return domain.Conflict("slug_taken", "a project with slug %q already exists in this organisation", p.Slug)
			}
			return fmt.Errorf("update project: %w", err)
		}
		out = p
		if changes := projectChanges(&before, p, &in); len(changes) > 0 {
			return domain.RecordAudit(ctx, tx, pr, domain.AuditProjectUpdated, p.Slug, map[string]any{"project_id": p.ID.String(), "changes": changes})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.Warnings = warnings
	if len(warnings) == 0 && (in.RepoURL != nil || in.ProviderToken != nil) {
		out.Warnings = ps.probe(ctx, out)
	}
	return out, nil
}

// Get returns a project of the caller's organisation.
func (ps *Projects) Get(ctx context.Context, orgID, id uuid.UUID) (*domain.Project, error) {
	p := new(domain.Project)
	err := domain.SelectLiveProjects(ps.s.DB, p).Where("id = ? AND org_id = ?", id, orgID).Scan(ctx)
	if dbutil.IsNoRows(err) {
		return nil, domain.NotFound("project")
	}
	return p, err
}

// ByID returns a project whatever its organisation (system callers only).
func (ps *Projects) ByID(ctx context.Context, id uuid.UUID) (*domain.Project, error) {
	p := new(domain.Project)
	err := ps.s.DB.NewSelect().Model(p).ModelTableExpr(domain.AllProjects+" AS project").Where("id = ?", id).Scan(ctx)
	if dbutil.IsNoRows(err) {
		return nil, domain.NotFound("project")
	}
	return p, err
}

// List returns the organisation's projects by slug.
func (ps *Projects) List(ctx context.Context, orgID uuid.UUID) ([]domain.Project, error) {
	var out []domain.Project
	err := domain.SelectLiveProjects(ps.s.DB, &out).Where("org_id = ?", orgID).Order("slug").Scan(ctx)
	return out, err
}

// ProjectSummary is a project with what lists show beside it.
type ProjectSummary struct {
	domain.Project
	LastStatus string `bun:"last_status"`
	QueueDepth int    `bun:"queue_depth"`
}

// Summaries lists the organisation's projects with their queue depth (from
// the queue) and last run status (from the read model).
func (ps *Projects) Summaries(ctx context.Context, orgID uuid.UUID) ([]ProjectSummary, error) {
	var out []ProjectSummary
	err := ps.s.DB.NewRaw(`
		SELECT p.*,
		       COALESCE((SELECT ri.status FROM run_index ri WHERE ri.project_id = p.id ORDER BY ri.queued_at DESC LIMIT 1), '') AS last_status,
		       (SELECT count(*) FROM project_runs r WHERE r.project_id = p.id AND r.position IS NOT NULL) AS queue_depth
		FROM `+domain.LiveProjects+` p WHERE p.org_id = ? ORDER BY p.slug`, orgID).Scan(ctx, &out)
	return out, err
}

// BySlug returns a project of the caller's organisation by its slug.
func (ps *Projects) BySlug(ctx context.Context, orgID uuid.UUID, slug string) (*domain.Project, error) {
	p := new(domain.Project)
	err := domain.SelectLiveProjects(ps.s.DB, p).Where("slug = ? AND org_id = ?", slug, orgID).Scan(ctx)
	if dbutil.IsNoRows(err) {
		return nil, domain.NotFound("project")
	}
	return p, err
}

// projectChanges lists what a save changed, in the audit log's words (the
// provider token only as set or removed, never its value).
func projectChanges(was, now *domain.Project, in *ProjectInput) []domain.AuditChange {
	var out []domain.AuditChange
	add := func(field, label, from, to string) {
		if from != to {
			out = append(out, domain.AuditChange{Field: field, Label: label, From: from, To: to})
		}
	}
	add("slug", "slug", was.Slug, now.Slug)
	add("name", "name", was.Name, now.Name)
	add("repo_url", "repository address", was.RepoURL, now.RepoURL)
	add("default_branch", "default branch", was.DefaultBranch, now.DefaultBranch)
	add("run_command", "run command", was.RunCommand, now.RunCommand)
	add("repair_command", "repair command", was.RepairCommand, now.RepairCommand)
	add("provider", "forge provider", was.Provider, now.Provider)
	add("provider_api_url", "forge API URL", was.ProviderAPIURL, now.ProviderAPIURL)
	add("provider_repo", "forge repository", was.ProviderRepo, now.ProviderRepo)
	add("run_timeout_seconds", "run timeout", (time.Duration(was.RunTimeoutSeconds) * time.Second).String(), (time.Duration(now.RunTimeoutSeconds) * time.Second).String())
	add("branch_filters", "branch filters", strings.Join(was.BranchFilters, ", "), strings.Join(now.BranchFilters, ", "))
	add("status_context", "status context", domain.StatusContextOf(was), domain.StatusContextOf(now))
	add("network_allow", "network list of runs", networkWords(was.NetworkAllow), networkWords(now.NetworkAllow))
	add("repair_network_allow", "network list of repair runs", networkWords(was.RepairNetworkAllow), networkWords(now.RepairNetworkAllow))
	add("fork_cache", "cache for forks' runs", forkCacheWords(was.ForkCache), forkCacheWords(now.ForkCache))
	add("run_image", "image of runs", imageWords(was.RunImage), imageWords(now.RunImage))
	add("repair_image", "image of repair runs", imageWords(was.RepairImage), imageWords(now.RepairImage))
	add("image_pull_secret", "pull secret of the images", pullSecretWords(was.ImagePullSecret), pullSecretWords(now.ImagePullSecret))
	add("fix_verification_window", "fix verification window", domain.FormatWindow(was.FixWindow()), domain.FormatWindow(now.FixWindow()))
	if in.ProviderToken != nil {
		switch {
		case strings.TrimSpace(*in.ProviderToken) != "":
			out = append(out, domain.AuditChange{Field: "provider_token", Label: "forge access token", To: "set", Secret: true})
		case was.ProviderTokenEnc != "":
			out = append(out, domain.AuditChange{Field: "provider_token", Label: "forge access token", Secret: true})
		}
	}
	return out
}

// forkCacheWords is the fork cache setting in the audit's words.
func forkCacheWords(on bool) string {
	if on {
		return "a read-only copy"
	}
	return "none"
}
