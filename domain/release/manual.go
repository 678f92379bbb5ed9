package release

import (
	"context"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/forgeapi"
	"anvil/domain/incident"
)

// ManualFix is a fix a person records by hand (docs/releases.md, "A fix
// recorded by hand"): a commit SHA, or a commit's web address
// (…/commit/<sha>), and optionally the pull request it was merged in.
type ManualFix struct {
	Commit string `json:"commit_sha"`
	PRURL  string `json:"pr_url"`
}

// maxManualRef bounds each field of a manual fix.
const maxManualRef = 2048

// commitInURL finds the commit of a commit's web address on the three
// forges (…/commit/<sha>, GitLab's …/-/commit/<sha>).
var commitInURL = regexp.MustCompile(`/commits?/([0-9a-fA-F]{7,40})/?$`)

// prNumberInURL finds a pull or merge request's number at the end of its
// address (…/pull/62, …/-/merge_requests/4, …/pulls/1).
var prNumberInURL = regexp.MustCompile(`/(?:pull|pulls|merge_requests)/([0-9]{1,9})/?$`)

// RecordByHand records a person's fix of an incident, for projects without
// a forge or webhooks: the fix then ships, is verified or recurs as a
// merged repair's does. Every refusal is a specific 422 and changes
// nothing.
func (f *Fixes) RecordByHand(ctx context.Context, pr *domain.Principal, incidentID uuid.UUID, in ManualFix) (*incident.Incident, error) {
	if err := domain.RequireRole(pr, domain.RoleMember); err != nil {
		return nil, err
	}
	ref, prURL := strings.TrimSpace(in.Commit), strings.TrimSpace(in.PRURL)
	if len(ref) > maxManualRef || len(prURL) > maxManualRef {
		return nil, domain.Invalid("invalid_fix", "a commit or pull request address must be at most %d characters", maxManualRef)
	}
	if m := commitInURL.FindStringSubmatch(ref); m != nil && strings.Contains(ref, "://") {
		if forgeapi.WebURL(ref, f.AllowHTTPLinks) == "" {
			return nil, domain.Invalid("invalid_commit_sha", "the commit's address must be an https:// web address")
		}
		ref = m[1]
	}
	if ref == "" {
		if prURL != "" {
			return nil, domain.Invalid("commit_required", "give the commit the pull request was merged as (its SHA or its address): anvil cannot ask a forge it has no access to")
		}
		return nil, domain.Invalid("commit_required", "give the fix's commit: a SHA such as 3f9c1e2 or the commit's web address")
	}
	sha, ok := NormalizeSHA(ref)
	if !ok {
		return nil, domain.Invalid("invalid_commit_sha", "the commit must be a SHA of 7 to 40 hexadecimal digits, or the commit's web address")
	}
	number := 0
	if prURL != "" {
		// The same check the repair's own pull request address passes.
		if forgeapi.WebURL(prURL, f.AllowHTTPLinks) == "" {
			return nil, domain.Invalid("invalid_pr_url", "the pull request's address must be an https:// web address")
		}
		u, _ := url.Parse(prURL)
		m := prNumberInURL.FindStringSubmatch(u.Path)
		if m == nil {
			return nil, domain.Invalid("invalid_pr_url", "the pull request's address must end in its number, such as …/pull/62 or …/merge_requests/4")
		}
		number, _ = strconv.Atoi(m[1])
	}
	return f.incidents.FixByHand(ctx, pr, incidentID, sha, number, prURL)
}
