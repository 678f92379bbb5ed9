package release

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
)

// Releases is the releases capability: the list a project's Releases page
// shows, declarations from deploy scripts, and (fixes.go) the fix chain.
type Releases struct {
	s *domain.Store
}

// New builds the service.
func New(s *domain.Store) *Releases { return &Releases{s: s} }

// Release is one release of a project's environment as the API shows it
// (docs/contracts/private-api.md, "Releases").
type Release struct {
	Version     string `json:"version"`
	Environment string `json:"environment"`
	// CommitSHA is the declared commit, else the one the version names, else "".
	CommitSHA string `json:"commit_sha"`
	// CommitFrom says where the commit came from: "declared", "version" or "".
	CommitFrom   string     `json:"commit_from"`
	FirstSeen    *time.Time `json:"first_seen"`
	LastSeen     *time.Time `json:"last_seen"`
	EventCount   int64      `json:"event_count"`
	NewIncidents int64      `json:"new_incidents"`
	DeployedAt   *time.Time `json:"deployed_at"`
	// ServerEvents and BrowserEvents split EventCount by the kind of
	// connection that sent them, each with its first event: only the
	// server's ship a fix or count as served (docs/releases.md).
	ServerEvents     int64      `json:"server_event_count"`
	ServerFirstSeen  *time.Time `json:"server_first_seen"`
	BrowserEvents    int64      `json:"browser_event_count"`
	BrowserFirstSeen *time.Time `json:"browser_first_seen"`
	// Source is where the release came from (docs/releases.md, "Sources
	// and trust"): "member", "api", "sentry_cli" (declared), "server" or
	// "browser" (seen from a connection of that kind only).
	Source string `json:"source"`
	// Trusted: the release may ship a fix and count as the current one;
	// a release seen from browsers only may not.
	Trusted bool `json:"trusted"`
}

// The sources of a release, most trusted first.
const (
	SourceMember    = "member"
	SourceAPI       = "api"
	SourceSentryCLI = "sentry_cli"
	SourceServer    = "server"
	SourceBrowser   = "browser"
)

// SourceWords says where a release came from, as the evidence and the
// Releases page name it.
func SourceWords(source string) string {
	switch source {
	case SourceMember:
		return "declared by a member"
	case SourceAPI:
		return "declared with an API token"
	case SourceSentryCLI:
		return "declared by sentry-cli"
	case SourceServer:
		return "seen from a server connection"
	case SourceBrowser:
		return "seen from browsers only"
	}
	return "source unknown"
}

// sourceSQL reads a release row r's source, a declaration for every
// environment (a) standing for the rows of its version.
const sourceSQL = `CASE WHEN r.declared_by <> '' THEN r.declared_by WHEN COALESCE(a.declared_by, '') <> '' THEN a.declared_by
	WHEN r.seen_server THEN 'server' WHEN r.seen_browser THEN 'browser' ELSE '' END`

// trusted reports whether a source may ship a fix.
func trusted(source string) bool { return source != "" && source != SourceBrowser }

type releaseRow struct {
	Environment  string     `bun:"environment"`
	Version      string     `bun:"version"`
	FirstSeen    *time.Time `bun:"first_seen"`
	LastSeen     *time.Time `bun:"last_seen"`
	EventCount   int64      `bun:"event_count"`
	NewIncidents int64      `bun:"new_incidents"`
	CommitSHA    *string    `bun:"commit_sha"`
	DeployedAt   *time.Time `bun:"deployed_at"`
	Source       string     `bun:"source"`

	ServerEvents     int64      `bun:"server_event_count"`
	ServerFirstSeen  *time.Time `bun:"server_first_seen"`
	BrowserEvents    int64      `bun:"browser_event_count"`
	BrowserFirstSeen *time.Time `bun:"browser_first_seen"`
}

func (r releaseRow) view() Release {
	out := Release{Version: r.Version, Environment: r.Environment, FirstSeen: utc(r.FirstSeen), LastSeen: utc(r.LastSeen),
		EventCount: r.EventCount, NewIncidents: r.NewIncidents, DeployedAt: utc(r.DeployedAt), Source: r.Source, Trusted: trusted(r.Source),
		ServerEvents: r.ServerEvents, ServerFirstSeen: utc(r.ServerFirstSeen), BrowserEvents: r.BrowserEvents, BrowserFirstSeen: utc(r.BrowserFirstSeen)}
	if r.CommitSHA != nil && *r.CommitSHA != "" {
		out.CommitSHA, out.CommitFrom = *r.CommitSHA, "declared"
	} else if sha, ok := CommitOf(r.Version); ok {
		out.CommitSHA, out.CommitFrom = sha, "version"
	}
	return out
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// ListLimit is how many releases List returns.
const ListLimit = 200

// List returns a project's releases of every environment, most recently
// seen first (declared ones never seen last), at most ListLimit. A release
// declared for every environment takes its commit to the rows of its
// version that have none of their own.
func (rs *Releases) List(ctx context.Context, pr *domain.Principal, projectID uuid.UUID) ([]Release, error) {
	if _, err := rs.project(ctx, rs.s.DB, pr, projectID); err != nil {
		return nil, err
	}
	var rows []releaseRow
	err := rs.s.DB.NewRaw(`SELECT r.environment, r.version, r.first_seen, r.last_seen, r.event_count, r.new_incidents,
			r.server_event_count, r.server_first_seen, r.browser_event_count, r.browser_first_seen,
			COALESCE(r.commit_sha, a.commit_sha) AS commit_sha, COALESCE(r.deployed_at, a.deployed_at) AS deployed_at, `+sourceSQL+` AS source
		FROM releases r LEFT JOIN releases a ON a.project_id = r.project_id AND a.environment = '' AND a.version = r.version AND r.environment <> ''
		WHERE r.project_id = ? AND NOT (r.environment = '' AND EXISTS (
			SELECT 1 FROM releases o WHERE o.project_id = r.project_id AND o.version = r.version AND o.environment <> ''))
		ORDER BY r.last_seen DESC NULLS LAST, r.declared_at DESC NULLS LAST, r.version LIMIT ?`, projectID, ListLimit).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("releases: list %s: %w", projectID, err)
	}
	out := make([]Release, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.view())
	}
	return out, nil
}

// project reads the caller's organisation's live project.
func (rs *Releases) project(ctx context.Context, db bun.IDB, pr *domain.Principal, id uuid.UUID) (*domain.Project, error) {
	p := new(domain.Project)
	err := domain.SelectLiveProjects(db, p).Where("id = ? AND org_id = ?", id, pr.OrgID).Scan(ctx)
	if err != nil {
		return nil, domain.NotFound("project")
	}
	return p, nil
}

// Declaration is a deploy script's POST (docs/contracts/private-api.md,
// "Releases"): environment and deployed_at are optional.
type Declaration struct {
	Version     string     `json:"version"`
	CommitSHA   string     `json:"commit_sha"`
	Environment string     `json:"environment"`
	DeployedAt  *time.Time `json:"deployed_at"`
	// Source is the declaration's door (SourceMember, SourceAPI,
	// SourceSentryCLI); Declare reads it from the principal when empty.
	Source string `json:"-"`
}

// maxVersion bounds a version (Sentry's own limit is 200 characters).
const maxVersion = 200

// validate checks a declaration; every refusal is a specific 422.
func (d *Declaration) validate() error {
	d.Version = strings.TrimSpace(d.Version)
	switch {
	case d.Version == "":
		return domain.Invalid("invalid_version", "version is required, such as \"shop@2.4.0\" or a commit SHA")
	case len(d.Version) > maxVersion:
		return domain.Invalid("invalid_version", "version must be at most %d characters", maxVersion)
	case strings.IndexFunc(d.Version, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }) >= 0:
		return domain.Invalid("invalid_version", "version must not contain spaces or control characters")
	}
	if d.CommitSHA != "" {
		sha, ok := NormalizeSHA(d.CommitSHA)
		if !ok {
			return domain.Invalid("invalid_commit_sha", "commit_sha must be a commit SHA: 7 to 40 hexadecimal digits")
		}
		d.CommitSHA = sha
	}
	d.Environment = strings.ToLower(strings.TrimSpace(d.Environment))
	if d.Environment != "" && !domain.ValidEnvironment(d.Environment) {
		return domain.Invalid("invalid_environment", "environment must be a label such as production")
	}
	return nil
}

// Declare records a release a deploy script names, with its commit and
// where and when it was deployed. A declaration again replaces the commit
// (the script knows better than the version's name) and keeps the counts;
// a declaration without a commit keeps the one already declared.
func (rs *Releases) Declare(ctx context.Context, pr *domain.Principal, projectID uuid.UUID, d Declaration) (Release, error) {
	if err := domain.RequireRole(pr, domain.RoleMember); err != nil {
		return Release{}, err
	}
	if err := d.validate(); err != nil {
		return Release{}, err
	}
	var out Release
	err := rs.s.WithProject(ctx, projectID, func(ctx context.Context, tx bun.Tx, p *domain.Project) error {
		if p.OrgID != pr.OrgID || p.DeletedAt != nil {
			return domain.NotFound("project")
		}
		var sha *string
		if d.CommitSHA != "" {
			sha = &d.CommitSHA
		}
		now := rs.s.Now()
		source := d.Source
		if source == "" {
			source = SourceAPI
			if pr.SessionID != nil {
				source = SourceMember
			}
		}
		var row releaseRow
		err := tx.NewRaw(`INSERT INTO releases AS r (project_id, environment, version, commit_sha, deployed_at, declared_at, declared_by)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (project_id, environment, version) DO UPDATE SET
				commit_sha = COALESCE(EXCLUDED.commit_sha, r.commit_sha),
				deployed_at = COALESCE(EXCLUDED.deployed_at, r.deployed_at), declared_at = EXCLUDED.declared_at,
				declared_by = EXCLUDED.declared_by
			RETURNING environment, version, first_seen, last_seen, event_count, new_incidents, commit_sha, deployed_at, declared_by AS source,
				server_event_count, server_first_seen, browser_event_count, browser_first_seen`,
			projectID, d.Environment, d.Version, sha, d.DeployedAt, now, source).Scan(ctx, &row)
		if err != nil {
			return fmt.Errorf("releases: declare %s: %w", d.Version, err)
		}
		out = row.view()
		return nil
	})
	return out, err
}
