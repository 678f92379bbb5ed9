package release

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/forge"
	"anvil/domain/forgeapi"
	"anvil/domain/incident"
	"anvil/domain/project"
)

// Fixes is the fix chain (docs/releases.md): what a forge's deliveries say
// about repairs and commits, and — in check.go — shipped, proven and
// recurred fixes. It moves incidents only through incident's methods.
type Fixes struct {
	s         *domain.Store
	incidents *incident.Incidents
	projects  *project.Projects
	// AllowHTTPLinks lets a merged pull request's address be http:// (a
	// forge on the operator's network), as the repair's own may be when
	// the checkout policy allows local forges; the wiring sets it.
	AllowHTTPLinks bool
}

// NewFixes builds the service.
func NewFixes(s *domain.Store, in *incident.Incidents) *Fixes {
	return &Fixes{s: s, incidents: in, projects: project.NewProjects(s)}
}

// token is the project's provider token, for fetching its repository.
func (f *Fixes) token(p *domain.Project) (string, error) { return f.projects.ProviderToken(p) }

// fixesRE finds "Fixes SHOP-12" in a commit message: GitHub's closing
// keywords (fix, fixes, fixed, close, closes, closed, resolve, resolves,
// resolved), any case, an optional colon, then a short id.
var fixesRE = regexp.MustCompile(`(?i)\b(fix(?:e[sd])?|close[sd]?|resolve[sd]?)\b:?\s+([a-z0-9][a-z0-9-]*-[0-9]+)\b`)

// IsRevert reports whether a commit message is a revert's ("Revert "…"",
// as git revert and the forges' revert buttons write it): a revert undoes
// a change, and the fix it quotes is never its own (docs/releases.md,
// "Merged and closed repairs").
func IsRevert(message string) bool {
	m := strings.TrimLeft(message, " \t\r\n")
	return strings.HasPrefix(m, `Revert "`) || strings.HasPrefix(m, "Revert '") || strings.Contains(message, "\nThis reverts commit ")
}

// FixRef is one "Fixes SHOP-12" of a commit message.
type FixRef struct {
	Keyword string
	Slug    string
	Number  int64
}

// FixesIn reads the incidents a commit message says it fixes.
func FixesIn(message string) []FixRef {
	var out []FixRef
	for _, m := range fixesRE.FindAllStringSubmatch(message, 20) {
		slug, n, ok := incident.ParseShortID(m[2])
		if ok {
			out = append(out, FixRef{Keyword: m[1], Slug: slug, Number: n})
		}
	}
	return out
}

// FromDelivery reads a verified delivery of projectID for the fix chain:
// a repair pull request merged or closed, or a push to the default branch
// whose commits say which incidents they fix. Everything else is none of
// its business. It is idempotent — the web tier calls it for a replayed
// delivery too, so a delivery whose recording failed is recorded when the
// forge sends it again.
func (f *Fixes) FromDelivery(ctx context.Context, projectID uuid.UUID, pl forge.Payload) error {
	switch {
	case pl.Kind == forge.KindPullRequest && pl.PullRequest != nil && pl.PullRequest.Closed:
		pr := pl.PullRequest
		// The pull request's address is the forge's data: it becomes a
		// link on the incident page only through the check the repair's
		// own address passes (forgeapi.WebURL).
		url := forgeapi.WebURL(pr.URL, f.AllowHTTPLinks)
		if pr.Merged && pr.MergeCommitSHA != "" {
			_, err := f.incidents.FixMerged(ctx, projectID, pr.Number, url, pr.MergeCommitSHA, string(pl.Provider), f.at(pr.MergedAt))
			return err
		}
		if !pr.Merged {
			_, err := f.incidents.FixPRClosed(ctx, projectID, pr.Number, url, string(pl.Provider))
			return err
		}
	case pl.Kind == forge.KindPush && len(pl.Commits) > 0:
		var p domain.Project
		if err := domain.SelectLiveProjects(f.s.DB, &p).Where("id = ?", projectID).Scan(ctx); err != nil {
			return fmt.Errorf("fixes: project %s: %w", projectID, err)
		}
		if pl.Branch != strings.TrimPrefix(p.DefaultBranch, "refs/heads/") {
			return nil
		}
		for _, c := range pl.Commits {
			if IsRevert(c.Message) {
				continue
			}
			for _, ref := range FixesIn(c.Message) {
				if ref.Slug != p.Slug {
					continue
				}
				if _, err := f.incidents.FixCommitted(ctx, projectID, ref.Number, c.SHA, ref.Keyword, string(pl.Provider), f.at(c.Timestamp)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// at is a fix's time: the forge's own (the merge's, the commit's), never
// later than now, else now. Fixes are ordered by it, so that a delivery
// replayed late, or an older commit, never replaces a newer fix.
func (f *Fixes) at(forgeTime time.Time) time.Time {
	now := f.s.Now()
	if forgeTime.IsZero() || forgeTime.After(now) {
		return now
	}
	return forgeTime
}
