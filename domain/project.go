package domain

import (
	"path"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// Project is a git repository with a run queue.
type Project struct {
	bun.BaseModel     `bun:"table:projects"`
	ID                uuid.UUID `bun:"id,pk,type:uuid,default:gen_random_uuid()"`
	OrgID             uuid.UUID `bun:"org_id"`
	Slug              string    `bun:"slug"`
	Name              string    `bun:"name"`
	RepoURL           string    `bun:"repo_url"`
	DefaultBranch     string    `bun:"default_branch"`
	RunCommand        string    `bun:"run_command"`
	RepairCommand     string    `bun:"repair_command"`
	Provider          string    `bun:"provider"`
	ProviderAPIURL    string    `bun:"provider_api_url"`
	ProviderRepo      string    `bun:"provider_repo"`
	ProviderTokenEnc  string    `bun:"provider_token_enc"`
	RunTimeoutSeconds int       `bun:"run_timeout_seconds"`
	// Number is the project's positive integer from a sequence, assigned
	// once and never reused: the project segment of its Sentry DSN.
	Number int64 `bun:"number,nullzero,default:nextval('project_number_seq')"`
	// BranchFilters are the branch globs whose pushes become runs; empty
	// means the default branch alone (see BranchMatches).
	BranchFilters []string `bun:"branch_filters,array"`
	// NetworkAllow is what the project's runs may reach through the
	// egress proxy, RepairNetworkAllow what its repair runs may reach
	// (netpolicy's canonical entries; empty: offline; docs/network.md).
	NetworkAllow       []string `bun:"network_allow,array"`
	RepairNetworkAllow []string `bun:"repair_network_allow,array"`
	// ForkCache gives runs of a fork's code a read-only copy of the
	// project's cache; false: an empty one (docs/caches.md).
	ForkCache bool `bun:"fork_cache"`
	// RunImage is the image a run of the project without a pipeline file
	// runs its command in, RepairImage the one of its repair runs; "" is
	// the host's toolchain (docs/images.md).
	RunImage    string `bun:"run_image"`
	RepairImage string `bun:"repair_image"`
	// ImagePullSecret names the run secret whose credentials pull RunImage
	// and RepairImage; "" pulls them anonymously (docs/images.md,
	// "Private registries").
	ImagePullSecret string `bun:"image_pull_secret"`
	// StatusContext names the project's commit statuses on the forge
	// (anvil/<slug> unless set; see StatusContextOf).
	StatusContext string    `bun:"status_context"`
	CreatedAt     time.Time `bun:"created_at,nullzero,default:now()"`
	UpdatedAt     time.Time `bun:"updated_at,nullzero,default:now()"`
	// DeletedAt is set when the project was deleted: it is hidden
	// everywhere and being erased (docs/erasure.md).
	DeletedAt *time.Time `bun:"deleted_at"`
	// Warnings are notes on the save that just happened (the repository
	// did not answer, …): the project was saved all the same. Not stored.
	Warnings []string `bun:"-"`
	// FixVerificationSeconds is how long a shipped fix must hold before
	// its incident closes (docs/releases.md; default 24 h, at least 60 s).
	FixVerificationSeconds int64 `bun:"fix_verification_window,nullzero,default:86400" json:"-"`
}

// RunTimeout is the longest a run of this project may take.
func (p *Project) RunTimeout() time.Duration { return time.Duration(p.RunTimeoutSeconds) * time.Second }

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

// RunsBranch reports whether a push to branch becomes a run of p.
func (p *Project) RunsBranch(branch string) bool {
	return BranchMatches(p.BranchFilters, strings.TrimPrefix(p.DefaultBranch, "refs/heads/"), branch)
}

// FixWindow is the project's verification window (docs/releases.md): 24 h
// unless set.
func (p *Project) FixWindow() time.Duration {
	if p.FixVerificationSeconds <= 0 {
		return 24 * time.Hour
	}
	return time.Duration(p.FixVerificationSeconds) * time.Second
}

// ImageFor is the image of a run of this project without a pipeline file:
// the repair image for a repair run, the run image otherwise; "" for none.
func (p *Project) ImageFor(repair bool) string {
	if repair {
		return p.RepairImage
	}
	return p.RunImage
}

// NetworkFor is the network list of a run of this project: the repair list
// for a repair run, the runs' list otherwise (docs/network.md).
func (p *Project) NetworkFor(repair bool) []string {
	if repair {
		return p.RepairNetworkAllow
	}
	return p.NetworkAllow
}
