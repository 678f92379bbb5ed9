package project

import (
	"path"
	"regexp"
	"strings"

	"anvil/domain"
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
			return nil, domain.Invalid("invalid_branch_filter", "branch filter %q is not a branch name or glob (letters, digits, . _ / - and * ? [ ])", g)
		}
		if _, err := path.Match(g, ""); err != nil {
			return nil, domain.Invalid("invalid_branch_filter", "branch filter %q is not a valid glob: %v", g, err)
		}
		seen[g] = true
		out = append(out, g)
	}
	if len(out) > MaxBranchFilters {
		return nil, domain.Invalid("too_many_branch_filters", "at most %d branch filters", MaxBranchFilters)
	}
	return out, nil
}
