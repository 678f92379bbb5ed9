package account

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/internal/dbutil"
)

// Member is a person of an organisation as listed.
type Member struct {
	UserID     uuid.UUID  `json:"user_id"`
	Email      string     `json:"email"`
	Name       string     `json:"name"`
	Role       string     `json:"role"`
	JoinedAt   time.Time  `json:"joined_at"`
	LastSeenAt *time.Time `json:"last_seen_at"`
}

// ListMembers lists the people of the principal's organisation, owners first.
// Everybody in the organisation may see who else is in it.
func (a *Accounts) ListMembers(ctx context.Context, p *domain.Principal) ([]Member, error) {
	ms := []Member{}
	rows, err := a.s.DB.QueryContext(ctx, `SELECT u.id, u.email, u.name, m.role, m.created_at, m.last_seen_at
		FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.org_id = ?
		ORDER BY CASE m.role WHEN 'owner' THEN 0 WHEN 'admin' THEN 1 WHEN 'member' THEN 2 ELSE 3 END, lower(u.email)`, p.OrgID)
	if err != nil {
		return nil, fmt.Errorf("members: list: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var m Member
		if err := rows.Scan(&m.UserID, &m.Email, &m.Name, &m.Role, &m.JoinedAt, &m.LastSeenAt); err != nil {
			return nil, fmt.Errorf("members: scan: %w", err)
		}
		m.JoinedAt = m.JoinedAt.UTC()
		if m.LastSeenAt != nil {
			t := m.LastSeenAt.UTC()
			m.LastSeenAt = &t
		}
		ms = append(ms, m)
	}
	return ms, rows.Err()
}

// lockMembers serializes membership changes of one organisation (so that two
// owners demoting each other at once cannot leave it without an owner) and
// returns the target's current role ("" when not a member).
func lockMembers(ctx context.Context, tx bun.Tx, orgID, userID uuid.UUID) (role, email string, err error) {
	if _, err := tx.NewRaw(`SELECT 1 FROM organizations WHERE id = ? FOR UPDATE`, orgID).Exec(ctx); err != nil {
		return "", "", fmt.Errorf("members: lock organisation: %w", err)
	}
	err = tx.NewRaw(`SELECT m.role, u.email FROM memberships m JOIN users u ON u.id = m.user_id
		WHERE m.org_id = ? AND m.user_id = ?`, orgID, userID).Scan(ctx, &role, &email)
	if dbutil.IsNoRows(err) {
		return "", "", domain.NotFound("member")
	}
	if err != nil {
		return "", "", fmt.Errorf("members: find: %w", err)
	}
	return role, email, nil
}

func countOwners(ctx context.Context, tx bun.IDB, orgID uuid.UUID) (int, error) {
	var n int
	err := tx.NewRaw(`SELECT count(*) FROM memberships WHERE org_id = ? AND role = 'owner'`, orgID).Scan(ctx, &n)
	return n, err
}

// managedByAdmin reports whether an admin may give or take role: admins
// manage members and viewers; owners manage everybody.
func managedByAdmin(role string) bool { return role == domain.RoleMember || role == domain.RoleViewer }

var errLastOwner = domain.Conflict("last_owner", "the organisation's last owner can be neither demoted nor removed, nor leave; make someone else an owner first")

// ChangeRole gives a member another role. Admins manage members and
// viewers; only an owner makes or unmakes an owner; nobody changes their
// own role; the last owner stays an owner.
func (a *Accounts) ChangeRole(ctx context.Context, p *domain.Principal, userID uuid.UUID, role string) error {
	if err := domain.RequireRole(p, domain.RoleAdmin); err != nil {
		return err
	}
	if !domain.ValidRole(role) {
		return domain.Invalid("invalid_role", "role must be one of owner, admin, member, viewer")
	}
	if userID == p.UserID {
		return domain.Forbidden("nobody changes their own role; ask another owner or admin")
	}
	return a.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		old, email, err := lockMembers(ctx, tx, p.OrgID, userID)
		if err != nil {
			return err
		}
		if !p.AtLeast(domain.RoleOwner) && !(managedByAdmin(old) && managedByAdmin(role)) {
			return domain.Forbidden("an admin manages members and viewers; only an owner makes or unmakes an owner or an admin")
		}
		if old == role {
			return nil
		}
		if old == domain.RoleOwner {
			if n, err := countOwners(ctx, tx, p.OrgID); err != nil {
				return err
			} else if n <= 1 {
				return errLastOwner
			}
		}
		if _, err := tx.NewRaw(`UPDATE memberships SET role = ? WHERE org_id = ? AND user_id = ?`, role, p.OrgID, userID).Exec(ctx); err != nil {
			return fmt.Errorf("members: change role: %w", err)
		}
		return domain.RecordAudit(ctx, tx, p, domain.AuditMemberRoleChanged, email, map[string]any{"from": old, "to": role})
	})
}

// RemoveMember takes a person out of the organisation; their sessions and
// personal API tokens in it stop at once. Anyone may remove themselves
// (leave); removing somebody else follows ChangeRole's rules.
func (a *Accounts) RemoveMember(ctx context.Context, p *domain.Principal, userID uuid.UUID) error {
	self := p != nil && userID == p.UserID
	if !self {
		if err := domain.RequireRole(p, domain.RoleAdmin); err != nil {
			return err
		}
	}
	return a.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		old, email, err := lockMembers(ctx, tx, p.OrgID, userID)
		if err != nil {
			return err
		}
		if !self && !managedByAdmin(old) && !p.AtLeast(domain.RoleOwner) {
			return domain.Forbidden("only an owner may remove an owner or an admin")
		}
		if old == domain.RoleOwner {
			if n, err := countOwners(ctx, tx, p.OrgID); err != nil {
				return err
			} else if n <= 1 {
				return errLastOwner
			}
		}
		if err := endAccess(ctx, tx, p.OrgID, userID, a.s.Now()); err != nil {
			return err
		}
		if _, err := tx.NewRaw(`DELETE FROM memberships WHERE org_id = ? AND user_id = ?`, p.OrgID, userID).Exec(ctx); err != nil {
			return fmt.Errorf("members: remove: %w", err)
		}
		detail := map[string]any{"role": old}
		if self {
			detail["left"] = true
		}
		return domain.RecordAudit(ctx, tx, p, domain.AuditMemberRemoved, email, detail)
	})
}

// endAccess ends a person's sessions in an organisation and revokes their
// personal tokens there.
func endAccess(ctx context.Context, tx bun.IDB, orgID, userID uuid.UUID, now time.Time) error {
	if _, err := tx.NewRaw(`DELETE FROM sessions WHERE org_id = ? AND user_id = ?`, orgID, userID).Exec(ctx); err != nil {
		return fmt.Errorf("members: end sessions: %w", err)
	}
	if _, err := tx.NewRaw(`UPDATE api_tokens SET revoked_at = ? WHERE org_id = ? AND user_id = ? AND revoked_at IS NULL`,
		now, orgID, userID).Exec(ctx); err != nil {
		return fmt.Errorf("members: revoke tokens: %w", err)
	}
	return nil
}
