package domain

import "github.com/google/uuid"

// roleRank orders the roles: each may do what the ones below it may.
var roleRank = map[string]int{RoleViewer: 1, RoleMember: 2, RoleAdmin: 3, RoleOwner: 4}

// Roles lists the roles from the most to the least powerful.
var Roles = []string{RoleOwner, RoleAdmin, RoleMember, RoleViewer}

// ValidRole reports whether r is one of the four roles.
func ValidRole(r string) bool { return roleRank[r] > 0 }

// AtLeast reports whether the principal holds role min or a higher one.
func (p *Principal) AtLeast(min string) bool {
	return p != nil && roleRank[p.Role] >= roleRank[min] && roleRank[min] > 0
}

// RequireRole refuses a principal below min, naming both roles so that a
// person knows whom to ask. Viewers read only; members trigger and cancel
// runs and take inbox decisions; admins also manage projects, webhooks,
// connections, bindings, the card and members; owners also manage owners.
func RequireRole(p *Principal, min string) error {
	if p.AtLeast(min) {
		return nil
	}
	role := "no role"
	if p != nil {
		role = "a " + p.Role
	}
	return Forbidden("you are %s in this organisation; this needs the %s role or higher", role, min)
}

// RequireWrite refuses viewers: what members may do (runs, cancels, inbox
// decisions). Settings use RequireRole(p, RoleAdmin).
func RequireWrite(p *Principal) error { return RequireRole(p, RoleMember) }

// Roles of a membership, from the least to the most powerful: viewers read;
// members also run and decide; admins also manage the organisation's
// settings and its members and viewers; owners also manage owners and
// admins (see RequireRole).
const (
	RoleOwner  = "owner"
	RoleAdmin  = "admin"
	RoleMember = "member"
	RoleViewer = "viewer"
)

// Principal is who is calling: a user acting in one organisation, through a
// browser session or a personal API token.
type Principal struct {
	UserID    uuid.UUID
	Email     string
	OrgID     uuid.UUID
	OrgSlug   string
	OrgName   string
	Role      string
	SessionID []byte // set for browser sessions (the hash, never the cookie)
	TokenID   uuid.UUID
}

// CanWrite reports whether the principal may trigger and cancel runs and take
// inbox decisions (members and above).
func (p *Principal) CanWrite() bool { return p != nil && p.Role != RoleViewer }
