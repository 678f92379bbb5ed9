package account

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/internal/dbutil"
	"anvil/domain/internal/tokens"
)

// InvitationTTL is how long an invitation link stays usable.
const InvitationTTL = 7 * 24 * time.Hour

// InvitationTokenPrefix starts every invitation token (the last part of the
// one-time link /invite/<token>).
const InvitationTokenPrefix = "anv_inv_"

// ErrInvitationInvalid is the one refusal of an unknown, expired, used or
// revoked invitation: which of them it was is nobody's business (no oracle).
var ErrInvitationInvalid = domain.NewError(domain.ErrNotFound, "invitation_invalid", "this invitation is no longer valid")

// Invitation is a pending (or past) invitation as listed; never its token.
type Invitation struct {
	ID        uuid.UUID  `json:"invitation_id"`
	Email     string     `json:"email"`
	Role      string     `json:"role"`
	InvitedBy string     `json:"invited_by"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt time.Time  `json:"expires_at"`
	UsedAt    *time.Time `json:"used_at,omitempty"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// MailStatus is what became of the invitation's mail: "" (none sent),
	// "sending", "sent", "retrying: …", "refused: …" (docs/mail.md).
	MailStatus string `json:"mail_status"`
}

// InvitationSummary is what the invitation page shows its visitor.
type InvitationSummary struct {
	OrgName    string
	Email      string
	Role       string
	ExpiresAt  time.Time
	UserExists bool // the email already has an anvil account: log in to join
}

func invitationHash(token string) []byte {
	sum := sha256.Sum256([]byte("anvil-invitation:" + token))
	return sum[:]
}

// CreateInvitation invites email into the principal's organisation with
// role and returns the invitation and its token, which exists in plaintext
// only in this return value. Role rules are ChangeRole's.
func (a *Accounts) CreateInvitation(ctx context.Context, p *domain.Principal, email, role string) (*Invitation, string, error) {
	if err := domain.RequireRole(p, domain.RoleAdmin); err != nil {
		return nil, "", err
	}
	email, err := validateEmail(email)
	if err != nil {
		return nil, "", err
	}
	role = strings.ToLower(strings.TrimSpace(role))
	if !domain.ValidRole(role) {
		return nil, "", domain.Invalid("invalid_role", "role must be one of owner, admin, member, viewer")
	}
	if !managedByAdmin(role) && !p.AtLeast(domain.RoleOwner) {
		return nil, "", domain.Forbidden("only an owner may invite an owner or an admin")
	}
	tok := InvitationTokenPrefix + tokens.RandomBase62(tokens.RandomLen)
	now := a.s.Now()
	inv := &Invitation{ID: uuid.New(), Email: email, Role: role, InvitedBy: p.Email, CreatedAt: now, ExpiresAt: now.Add(InvitationTTL)}
	err = a.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var member bool
		if err := tx.NewRaw(`SELECT EXISTS (SELECT 1 FROM memberships m JOIN users u ON u.id = m.user_id
			WHERE m.org_id = ? AND lower(u.email) = lower(?))`, p.OrgID, email).Scan(ctx, &member); err != nil {
			return fmt.Errorf("invitation: member check: %w", err)
		}
		if member {
			return domain.Conflict("already_member", "%s is already a member of this organisation", email)
		}
		if _, err := tx.NewRaw(`INSERT INTO invitations (id, org_id, email, role, token_hash, invited_by, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, inv.ID, p.OrgID, email, role, invitationHash(tok), p.UserID, now, inv.ExpiresAt).Exec(ctx); err != nil {
			return fmt.Errorf("invitation: create: %w", err)
		}
		if a.Mail != nil {
			if err := a.enqueueInvitationMail(ctx, tx, inv.ID, tok); err != nil {
				return err
			}
		}
		return domain.RecordAudit(ctx, tx, p, domain.AuditInvitationCreated, email, map[string]any{"role": role, "invitation_id": inv.ID.String()})
	})
	if err != nil {
		return nil, "", err
	}
	return inv, tok, nil
}

// ListInvitations lists the organisation's pending invitations (not used,
// not revoked, not expired), the newest first.
func (a *Accounts) ListInvitations(ctx context.Context, p *domain.Principal) ([]Invitation, error) {
	if err := domain.RequireRole(p, domain.RoleAdmin); err != nil {
		return nil, err
	}
	out := []Invitation{}
	rows, err := a.s.DB.QueryContext(ctx, `SELECT i.id, i.email, i.role, COALESCE(u.email, ''), i.created_at, i.expires_at, i.mail_status
		FROM invitations i LEFT JOIN users u ON u.id = i.invited_by
		WHERE i.org_id = ? AND i.used_at IS NULL AND i.revoked_at IS NULL AND i.expires_at > ?
		ORDER BY i.created_at DESC`, p.OrgID, a.s.Now())
	if err != nil {
		return nil, fmt.Errorf("invitations: list: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var inv Invitation
		if err := rows.Scan(&inv.ID, &inv.Email, &inv.Role, &inv.InvitedBy, &inv.CreatedAt, &inv.ExpiresAt, &inv.MailStatus); err != nil {
			return nil, err
		}
		inv.CreatedAt, inv.ExpiresAt = inv.CreatedAt.UTC(), inv.ExpiresAt.UTC()
		out = append(out, inv)
	}
	return out, rows.Err()
}

// RevokeInvitation makes a pending invitation's link useless at once.
func (a *Accounts) RevokeInvitation(ctx context.Context, p *domain.Principal, id uuid.UUID) error {
	if err := domain.RequireRole(p, domain.RoleAdmin); err != nil {
		return err
	}
	return a.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var email, role string
		err := tx.NewRaw(`UPDATE invitations SET revoked_at = ? WHERE id = ? AND org_id = ?
			AND used_at IS NULL AND revoked_at IS NULL RETURNING email, role`, a.s.Now(), id, p.OrgID).Scan(ctx, &email, &role)
		if dbutil.IsNoRows(err) {
			return domain.NotFound("pending invitation")
		}
		if err != nil {
			return fmt.Errorf("invitation: revoke: %w", err)
		}
		return domain.RecordAudit(ctx, tx, p, domain.AuditInvitationRevoked, email, map[string]any{"role": role, "invitation_id": id.String()})
	})
}

type invitationRow struct {
	ID      uuid.UUID
	OrgID   uuid.UUID
	OrgName string
	Email   string
	Role    string
	Expires time.Time
}

// loadInvitation finds a usable invitation by token (locked when tx is a
// transaction); anything else is ErrInvitationInvalid.
func (a *Accounts) loadInvitation(ctx context.Context, db bun.IDB, token string, lock bool) (*invitationRow, error) {
	if len(token) != len(InvitationTokenPrefix)+tokens.RandomLen || !strings.HasPrefix(token, InvitationTokenPrefix) {
		return nil, ErrInvitationInvalid
	}
	q := `SELECT i.id, i.org_id, o.name, i.email, i.role, i.expires_at FROM invitations i JOIN organizations o ON o.id = i.org_id
		WHERE i.token_hash = ? AND i.used_at IS NULL AND i.revoked_at IS NULL AND i.expires_at > ?`
	if lock {
		q += ` FOR UPDATE OF i`
	}
	r := new(invitationRow)
	err := db.NewRaw(q, invitationHash(token), a.s.Now()).Scan(ctx, &r.ID, &r.OrgID, &r.OrgName, &r.Email, &r.Role, &r.Expires)
	if dbutil.IsNoRows(err) {
		return nil, ErrInvitationInvalid
	}
	if err != nil {
		return nil, fmt.Errorf("invitation: find: %w", err)
	}
	return r, nil
}

// Invitation describes a usable invitation to the person who opened its link.
func (a *Accounts) Invitation(ctx context.Context, token string) (*InvitationSummary, error) {
	r, err := a.loadInvitation(ctx, a.s.DB, token, false)
	if err != nil {
		return nil, err
	}
	s := &InvitationSummary{OrgName: r.OrgName, Email: r.Email, Role: r.Role, ExpiresAt: r.Expires.UTC()}
	if err := a.s.DB.NewRaw(`SELECT EXISTS (SELECT 1 FROM users WHERE lower(email) = lower(?))`, r.Email).Scan(ctx, &s.UserExists); err != nil {
		return nil, err
	}
	return s, nil
}

// useInvitation adds userID to the invitation's organisation, marks it used
// and records both, all in tx.
func useInvitation(ctx context.Context, tx bun.Tx, r *invitationRow, userID uuid.UUID, now time.Time) error {
	res, err := tx.NewRaw(`INSERT INTO memberships (org_id, user_id, role) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
		r.OrgID, userID, r.Role).Exec(ctx)
	if err != nil {
		return fmt.Errorf("invitation: add member: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return domain.Conflict("already_member", "you are already a member of %s", r.OrgName)
	}
	if _, err := tx.NewRaw(`UPDATE invitations SET used_at = ?, used_by = ? WHERE id = ?`, now, userID, r.ID).Exec(ctx); err != nil {
		return fmt.Errorf("invitation: mark used: %w", err)
	}
	if err := domain.RecordAuditIn(ctx, tx, r.OrgID, &userID, r.Email, domain.AuditInvitationUsed, r.Email, map[string]any{"role": r.Role, "invitation_id": r.ID.String()}); err != nil {
		return err
	}
	return domain.RecordAuditIn(ctx, tx, r.OrgID, &userID, r.Email, domain.AuditMemberAdded, r.Email, map[string]any{"role": r.Role, "via": "invitation"})
}

// AcceptInvitationNew lets a person without an anvil account accept: it
// creates their user with name and password, adds them with the invited role
// and opens a session in that organisation (the returned cookie).
func (a *Accounts) AcceptInvitationNew(ctx context.Context, token, name, password string) (string, error) {
	name = strings.TrimSpace(name)
	if err := validateName(name); err != nil {
		return "", err
	}
	if err := ValidatePassword(password); err != nil {
		return "", err
	}
	if _, err := a.loadInvitation(ctx, a.s.DB, token, false); err != nil {
		return "", err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return "", err
	}
	var cookie string
	err = a.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		r, err := a.loadInvitation(ctx, tx, token, true)
		if err != nil {
			return err
		}
		u := &User{Email: r.Email, Name: name, PasswordHash: hash}
		if _, err := tx.NewInsert().Model(u).Returning("*").Exec(ctx); err != nil {
			if dbutil.IsUnique(err, "") {
				return domain.Conflict("account_exists", "%s already has an anvil account: log in as that email to join", r.Email)
			}
			return fmt.Errorf("invitation: create user: %w", err)
		}
		if err := useInvitation(ctx, tx, r, u.ID, a.s.Now()); err != nil {
			return err
		}
		cookie, err = a.openSession(ctx, tx, u.ID, r.OrgID)
		return err
	})
	return cookie, err
}

// AcceptInvitationAsUser lets a signed-in person whose email is the
// invited one join; their session moves to the new organisation.
func (a *Accounts) AcceptInvitationAsUser(ctx context.Context, p *domain.Principal, token string) error {
	return a.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		r, err := a.loadInvitation(ctx, tx, token, true)
		if err != nil {
			return err
		}
		if !strings.EqualFold(r.Email, p.Email) {
			return domain.Forbidden("this invitation is for %s; you are logged in as %s", r.Email, p.Email)
		}
		if err := useInvitation(ctx, tx, r, p.UserID, a.s.Now()); err != nil {
			return err
		}
		if p.SessionID != nil {
			if _, err := tx.NewRaw(`UPDATE sessions SET org_id = ? WHERE id = ?`, r.OrgID, p.SessionID).Exec(ctx); err != nil {
				return fmt.Errorf("invitation: switch session: %w", err)
			}
		}
		return nil
	})
}

func validateName(name string) error {
	switch {
	case name == "":
		return domain.Invalid("invalid_name", "name is required")
	case len(name) > 100:
		return domain.Invalid("invalid_name", "name must be at most 100 characters")
	}
	return nil
}
