package incident

import (
	"strconv"
	"time"
)

// Fix is an incident's fix chain (docs/releases.md): the commit that fixes
// it (a merged repair pull request, or a pushed commit that says
// "Fixes SHOP-12"), the release that shipped it, the verification window
// and its outcome. It is recorded on the incident and in its transitions;
// the statuses are the nine of seed 004.
type Fix struct {
	CommitSHA     string     `bun:"fix_commit_sha"`
	Source        string     `bun:"fix_source"` // "merge" or "push"
	PRNumber      int        `bun:"fix_pr_number"`
	PRURL         string     `bun:"fix_pr_url"`
	MergedAt      *time.Time `bun:"fix_merged_at"`
	Release       string     `bun:"fix_release"`
	ShippedAt     *time.Time `bun:"fix_shipped_at"`
	VerifyUntil   *time.Time `bun:"fix_verify_until"`
	VerifiedAt    *time.Time `bun:"fix_verified_at"`
	ReleaseBase   int64      `bun:"fix_release_base"`
	Waiting       string     `bun:"fix_waiting"`
	RecurredIn    string     `bun:"fix_recurred_release"`
	RecurredAt    *time.Time `bun:"fix_recurred_at"`
	OldRelease    string     `bun:"fix_old_release"`
	OldEvents     int64      `bun:"fix_old_events"`
	JudgedAt      *time.Time `bun:"fix_judged_at"`
	ClosedRelease string     `bun:"closed_release"`
}

// FixView is the fix chain as the API shows it (DESIGN §9:
// fix {commit_sha, pr_url, merged_at, release, shipped_at, verify_until,
// verified_at}, and what else the incident page shows).
type FixView struct {
	CommitSHA   string     `json:"commit_sha"`
	Source      string     `json:"source"`
	PRNumber    int        `json:"pr_number,omitempty"`
	PRURL       string     `json:"pr_url"`
	MergedAt    *time.Time `json:"merged_at"`
	Release     string     `json:"release"`
	ShippedAt   *time.Time `json:"shipped_at"`
	VerifyUntil *time.Time `json:"verify_until"`
	VerifiedAt  *time.Time `json:"verified_at"`
	// Waiting says why a window that ended has not closed the incident.
	Waiting    string     `json:"waiting,omitempty"`
	RecurredIn string     `json:"recurred_in,omitempty"`
	RecurredAt *time.Time `json:"recurred_at,omitempty"`
	// SeenBefore is the last release without the fix an event came from
	// ("seen in R, before the fix") and how many such events.
	SeenBefore       string `json:"seen_before_fix,omitempty"`
	SeenBeforeEvents int64  `json:"seen_before_fix_events,omitempty"`
	ClosedInRelease  string `json:"closed_in_release,omitempty"`
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// view is nil until there is a fix or a release-aware close.
func (f Fix) view() *FixView {
	if f.CommitSHA == "" && f.ClosedRelease == "" {
		return nil
	}
	return &FixView{CommitSHA: f.CommitSHA, Source: f.Source, PRNumber: f.PRNumber, PRURL: f.PRURL, MergedAt: utcPtr(f.MergedAt),
		Release: f.Release, ShippedAt: utcPtr(f.ShippedAt), VerifyUntil: utcPtr(f.VerifyUntil), VerifiedAt: utcPtr(f.VerifiedAt),
		Waiting: f.Waiting, RecurredIn: f.RecurredIn, RecurredAt: utcPtr(f.RecurredAt), SeenBefore: f.OldRelease,
		SeenBeforeEvents: f.OldEvents, ClosedInRelease: f.ClosedRelease}
}

// Verifying reports whether the fix has shipped and its window is open or
// waiting: the inbox's "verifying" filter.
func (f Fix) Verifying() bool {
	return f.ShippedAt != nil && f.VerifiedAt == nil && f.RecurredAt == nil
}

// FixRef names the fix the way people read it: "!4" for a merged pull
// request, the short commit for a pushed one.
func FixRef(prNumber int, commit string) string {
	if prNumber > 0 {
		return "!" + strconv.Itoa(prNumber)
	}
	if len(commit) > 7 {
		commit = commit[:7]
	}
	return commit
}

// FixNote is the fix chain's state in one line, as the inbox and the
// incident page show it; "" without a fix.
func FixNote(f *FixView) string {
	if f == nil {
		return ""
	}
	ref := FixRef(f.PRNumber, f.CommitSHA)
	var s string
	switch {
	case f.RecurredAt != nil:
		s = "recurred in " + f.RecurredIn + ", which contains the fix from " + ref
	case f.VerifiedAt != nil:
		s = "fix from " + ref + " verified in " + f.Release
	case f.ShippedAt != nil && f.Waiting != "":
		s = f.Waiting
	case f.ShippedAt != nil:
		s = "fix shipped in " + f.Release + ", verifying until " + f.VerifyUntil.UTC().Format("2006-01-02 15:04 UTC")
	case f.CommitSHA != "" && f.PRNumber > 0:
		s = "fix merged in " + ref + ", waiting for a release"
	case f.CommitSHA != "":
		s = "fix committed in " + ref + ", waiting for a release"
	case f.ClosedInRelease != "":
		s = "closed in release " + f.ClosedInRelease
	}
	if f.SeenBefore != "" {
		s += "; seen in " + f.SeenBefore + ", before the fix"
	}
	return s
}
