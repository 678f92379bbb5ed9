package domain

import (
	"path"
	"regexp"
	"strings"
)

var branchGlobRE = regexp.MustCompile(`^[A-Za-z0-9._/*?\[\]-]{1,255}$`)

// MaxBranchFilters bounds a project's list of branch globs.
const MaxBranchFilters = 50

// checkBranchFilters validates a list of branch globs: each a branch name
// that may hold the glob characters * ? [ ] (path.Match syntax, where *
// stops at a slash), no duplicates, at most MaxBranchFilters. Blank
// entries are dropped, so a form's empty lines do not count.
func checkBranchFilters(in []string) ([]string, error) {
	out := []string{}
	seen := map[string]bool{}
	for _, g := range in {
		g = strings.TrimSpace(g)
		if g == "" || seen[g] {
			continue
		}
		if len(g) > 255 || strings.Contains(g, "..") || strings.HasPrefix(g, "-") ||
			!branchGlobRE.MatchString(g) {
			return nil, Invalid("invalid_branch_filter", "branch filter %q is not a branch name or glob (letters, digits, . _ / - and * ? [ ])", g)
		}
		if _, err := path.Match(g, ""); err != nil {
			return nil, Invalid("invalid_branch_filter", "branch filter %q is not a valid glob: %v", g, err)
		}
		seen[g] = true
		out = append(out, g)
	}
	if len(out) > MaxBranchFilters {
		return nil, Invalid("too_many_branch_filters", "at most %d branch filters", MaxBranchFilters)
	}
	return out, nil
}

// BranchMatches reports whether a push to branch becomes a run: it matches
// one of filters, or — when there are none — it is the default branch.
// A glob's * matches within one path segment (release/* matches
// release/1.2, not release/1.2/hotfix); ** matches across segments.
func BranchMatches(filters []string, defaultBranch, branch string) bool {
	if len(filters) == 0 {
		return branch == defaultBranch
	}
	for _, g := range filters {
		if globMatch(g, branch) {
			return true
		}
	}
	return false
}

// globMatch is path.Match with ** spanning slashes.
func globMatch(glob, s string) bool {
	if !strings.Contains(glob, "**") {
		ok, err := path.Match(glob, s)
		return err == nil && ok
	}
	i := strings.Index(glob, "**")
	prefix, rest := glob[:i], glob[i+2:]
	// prefix must match a leading part of s exactly as a glob; try every split.
	for j := 0; j <= len(s); j++ {
		if ok, err := path.Match(prefix, s[:j]); err != nil || !ok {
			continue
		}
		for k := j; k <= len(s); k++ {
			if globMatch(rest, s[k:]) {
				return true
			}
		}
	}
	return false
}

// runsBranch reports whether a push to branch becomes a run of p.
func (p *Project) runsBranch(branch string) bool {
	return BranchMatches(p.BranchFilters, strings.TrimPrefix(p.DefaultBranch, "refs/heads/"), branch)
}
