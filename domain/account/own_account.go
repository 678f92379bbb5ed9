package account

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/internal/dbutil"
	"anvil/domain/internal/tokens"
)

// PasswordResetTTL is how long an operator's reset link stays usable.
const PasswordResetTTL = time.Hour

// PasswordResetPrefix starts every reset token (/reset/<token>).
const PasswordResetPrefix = "anv_rst_"

// ErrResetInvalid is the one refusal of an unknown, expired or used reset link.
var ErrResetInvalid = domain.NewError(domain.ErrNotFound, "reset_invalid", "this password reset link is no longer valid; ask your operator for a new one")

// unusablePassword is stored while a reset is pending: no password matches it.
const unusablePassword = "!reset"

// Account is the principal's own user as shown on the account page.
type Account struct {
	Email string
	Name  string
}

// OwnAccount returns the caller's user.
func (a *Accounts) OwnAccount(ctx context.Context, p *domain.Principal) (Account, error) {
	var acc Account
	err := a.s.DB.NewRaw(`SELECT email, name FROM users WHERE id = ?`, p.UserID).Scan(ctx, &acc.Email, &acc.Name)
	return acc, err
}

// Rename changes the caller's display name.
func (a *Accounts) Rename(ctx context.Context, p *domain.Principal, name string) error {
	name = strings.TrimSpace(name)
	if err := validateName(name); err != nil {
		return err
	}
	_, err := a.s.DB.NewRaw(`UPDATE users SET name = ? WHERE id = ?`, name, p.UserID).Exec(ctx)
	return err
}

// auditEveryOrg records kind in every organisation userID belongs to: a
// person's password matters to each of them.
func auditEveryOrg(ctx context.Context, tx bun.IDB, userID uuid.UUID, actorID *uuid.UUID, actorEmail, kind, target string) error {
	var orgs []uuid.UUID
	if err := tx.NewRaw(`SELECT org_id FROM memberships WHERE user_id = ?`, userID).Scan(ctx, &orgs); err != nil && !dbutil.IsNoRows(err) {
		return fmt.Errorf("audit orgs: %w", err)
	}
	for _, o := range orgs {
		if err := domain.RecordAuditIn(ctx, tx, o, actorID, actorEmail, kind, target, nil); err != nil {
			return err
		}
	}
	return nil
}

// revokeUserTokens revokes every live personal API token of userID, in
// every organisation, in the caller's transaction, and records each in its
// organisation's audit log (token.revoked, with the reason). A password
// reset or change ends sessions; without this a taken-over account would
// keep its API access through the tokens its taker made.
func (a *Accounts) revokeUserTokens(ctx context.Context, tx bun.IDB, userID uuid.UUID, actorID *uuid.UUID, actorEmail, reason string) (int, error) {
	var revoked []struct {
		OrgID  uuid.UUID `bun:"org_id"`
		Name   string    `bun:"name"`
		Prefix string    `bun:"prefix"`
	}
	if err := tx.NewRaw(`UPDATE api_tokens SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL RETURNING org_id, name, prefix`,
		a.s.Now(), userID).Scan(ctx, &revoked); err != nil && !dbutil.IsNoRows(err) {
		return 0, fmt.Errorf("revoke tokens: %w", err)
	}
	for _, t := range revoked {
		if err := domain.RecordAuditIn(ctx, tx, t.OrgID, actorID, actorEmail, domain.AuditTokenRevoked, t.Name,
			map[string]any{"prefix": t.Prefix, "reason": reason}); err != nil {
			return 0, err
		}
	}
	return len(revoked), nil
}

// Why revokeUserTokens ran, in the audit entries it writes.
const (
	revokeReasonReset  = "password_reset"
	revokeReasonChange = "password_change"
)

// ChangePassword replaces the caller's password after checking the current
// one; every other session of the user ends (the calling one stays). With
// revokeTokens every API token of theirs, in every organisation, is revoked
// too (the account page's "also revoke my API tokens").
func (a *Accounts) ChangePassword(ctx context.Context, p *domain.Principal, current, next string, revokeTokens bool) error {
	if current == "" || len(current) > 512 {
		return domain.Invalid("wrong_password", "the current password is incorrect")
	}
	if err := ValidatePassword(next); err != nil {
		return err
	}
	var old string
	if err := a.s.DB.NewRaw(`SELECT password_hash FROM users WHERE id = ?`, p.UserID).Scan(ctx, &old); err != nil {
		return fmt.Errorf("password: %w", err)
	}
	if !CheckPassword(old, current) {
		return domain.Invalid("wrong_password", "the current password is incorrect")
	}
	hash, err := HashPassword(next)
	if err != nil {
		return err
	}
	return a.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		res, err := tx.NewRaw(`UPDATE users SET password_hash = ? WHERE id = ? AND password_hash = ?`, hash, p.UserID, old).Exec(ctx)
		if err != nil {
			return fmt.Errorf("password: update: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return domain.Conflict("password_changed", "the password was changed meanwhile; try again")
		}
		keep := p.SessionID
		if keep == nil {
			keep = []byte{}
		}
		if _, err := tx.NewRaw(`DELETE FROM sessions WHERE user_id = ? AND id <> ?`, p.UserID, keep).Exec(ctx); err != nil {
			return fmt.Errorf("password: end sessions: %w", err)
		}
		if revokeTokens {
			if _, err := a.revokeUserTokens(ctx, tx, p.UserID, &p.UserID, p.Email, revokeReasonChange); err != nil {
				return err
			}
		}
		return auditEveryOrg(ctx, tx, p.UserID, &p.UserID, p.Email, domain.AuditPasswordChanged, p.Email)
	})
}

// SessionInfo is one of the caller's own sessions.
type SessionInfo struct {
	ID        string // a handle derived from the stored hash, not a cookie
	OrgName   string
	UserAgent string // the login's User-Agent header ("" before it was kept)
	CreatedAt time.Time
	ExpiresAt time.Time
	Current   bool
}

func sessionHandle(id []byte) string {
	sum := sha256.Sum256(append([]byte("anvil-session-handle:"), id...))
	return hex.EncodeToString(sum[:16])
}

// Sessions lists the caller's live sessions across organisations.
func (a *Accounts) Sessions(ctx context.Context, p *domain.Principal) ([]SessionInfo, error) {
	rows, err := a.s.DB.QueryContext(ctx, `SELECT s.id, o.name, s.created_at, s.expires_at, s.user_agent FROM sessions s
		JOIN organizations o ON o.id = s.org_id WHERE s.user_id = ? AND s.expires_at > ? ORDER BY s.created_at DESC`, p.UserID, a.s.Now())
	if err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	defer rows.Close()
	var out []SessionInfo
	for rows.Next() {
		var id []byte
		var s SessionInfo
		if err := rows.Scan(&id, &s.OrgName, &s.CreatedAt, &s.ExpiresAt, &s.UserAgent); err != nil {
			return nil, err
		}
		s.ID, s.Current = sessionHandle(id), p.SessionID != nil && tokens.HashEqual(id, p.SessionID)
		out = append(out, s)
	}
	return out, rows.Err()
}

// EndSession ends one of the caller's sessions by its handle.
func (a *Accounts) EndSession(ctx context.Context, p *domain.Principal, handle string) error {
	ss, err := a.s.DB.QueryContext(ctx, `SELECT id FROM sessions WHERE user_id = ?`, p.UserID)
	if err != nil {
		return err
	}
	var target []byte
	for ss.Next() {
		var id []byte
		if err := ss.Scan(&id); err != nil {
			ss.Close()
			return err
		}
		if sessionHandle(id) == handle {
			target = id
		}
	}
	ss.Close()
	if target == nil {
		return domain.NotFound("session")
	}
	_, err = a.s.DB.NewRaw(`DELETE FROM sessions WHERE id = ? AND user_id = ?`, target, p.UserID).Exec(ctx)
	return err
}

// EndOtherSessions ends every session of the caller but the one it is
// made from ("end all other sessions"), in every organisation, and returns
// how many it ended.
func (a *Accounts) EndOtherSessions(ctx context.Context, p *domain.Principal) (int64, error) {
	if p.SessionID == nil {
		return 0, domain.NewError(domain.ErrForbidden, "no_session", "only a signed-in browser can end its other sessions")
	}
	res, err := a.s.DB.NewRaw(`DELETE FROM sessions WHERE user_id = ? AND id <> ?`, p.UserID, p.SessionID).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("end other sessions: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// maxUserAgent bounds the User-Agent kept with a session.
const maxUserAgent = 512

// NoteSessionAgent keeps the User-Agent of the login that opened the
// session of cookie, so Account → Sessions can name its browser and
// device.
func (a *Accounts) NoteSessionAgent(ctx context.Context, cookie, ua string) error {
	if len(ua) > maxUserAgent {
		ua = strings.ToValidUTF8(ua[:maxUserAgent], "")
	}
	if _, err := a.s.DB.NewRaw(`UPDATE sessions SET user_agent = ? WHERE id = ?`, ua, sessionHash(cookie)).Exec(ctx); err != nil {
		return fmt.Errorf("session agent: %w", err)
	}
	return nil
}

// OrgChoice is an organisation the caller belongs to.
type OrgChoice struct {
	ID   uuid.UUID
	Slug string
	Name string
	Role string
}

// Organizations lists the organisations of the caller.
func (a *Accounts) Organizations(ctx context.Context, p *domain.Principal) ([]OrgChoice, error) {
	rows, err := a.s.DB.QueryContext(ctx, `SELECT o.id, o.slug, o.name, m.role FROM memberships m
		JOIN organizations o ON o.id = m.org_id WHERE m.user_id = ? ORDER BY lower(o.name), o.slug`, p.UserID)
	if err != nil {
		return nil, fmt.Errorf("organisations: %w", err)
	}
	defer rows.Close()
	var out []OrgChoice
	for rows.Next() {
		var o OrgChoice
		if err := rows.Scan(&o.ID, &o.Slug, &o.Name, &o.Role); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// SwitchOrganization moves the caller's browser session to another of their
// organisations (a 404 for one they do not belong to).
func (a *Accounts) SwitchOrganization(ctx context.Context, p *domain.Principal, orgID uuid.UUID) error {
	if p.SessionID == nil {
		return domain.Invalid("no_session", "an API token belongs to one organisation; switching needs a browser session")
	}
	res, err := a.s.DB.NewRaw(`UPDATE sessions SET org_id = ? WHERE id = ? AND user_id = ?
		AND EXISTS (SELECT 1 FROM memberships WHERE org_id = ? AND user_id = ?)`, orgID, p.SessionID, p.UserID, orgID, p.UserID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("switch organisation: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return domain.NotFound("organisation")
	}
	return nil
}

// CreateOrganization creates an organisation owned by the caller and, for a
// browser session, switches to it.
func (a *Accounts) CreateOrganization(ctx context.Context, p *domain.Principal, slug, name string) (*Organization, error) {
	slug = strings.TrimSpace(slug)
	if !domain.ValidSlug(slug) {
		return nil, domain.Invalid("invalid_slug", "organisation slug %q must be lowercase letters, digits and dashes (^[a-z0-9][a-z0-9-]{0,62}$)", slug)
	}
	name = strings.TrimSpace(name)
	if name == "" {
		name = slug
	}
	if len(name) > 100 {
		return nil, domain.Invalid("invalid_name", "name must be at most 100 characters")
	}
	org := &Organization{Slug: slug, Name: name}
	err := a.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(org).Returning("*").Exec(ctx); err != nil {
			if dbutil.IsUnique(err, "") {
				return domain.Conflict("org_exists", "organisation %q already exists", slug)
			}
			return fmt.Errorf("create organisation: %w", err)
		}
		if _, err := tx.NewRaw(`INSERT INTO memberships (org_id, user_id, role) VALUES (?, ?, ?)`, org.ID, p.UserID, domain.RoleOwner).Exec(ctx); err != nil {
			return fmt.Errorf("create organisation: owner: %w", err)
		}
		if p.SessionID != nil {
			if _, err := tx.NewRaw(`UPDATE sessions SET org_id = ? WHERE id = ?`, org.ID, p.SessionID).Exec(ctx); err != nil {
				return fmt.Errorf("create organisation: switch: %w", err)
			}
		}
		return domain.RecordAuditIn(ctx, tx, org.ID, &p.UserID, p.Email, domain.AuditOrganizationCreated, slug, nil)
	})
	if err != nil {
		return nil, err
	}
	return org, nil
}

func resetHash(token string) []byte {
	sum := sha256.Sum256([]byte("anvil-reset:" + token))
	return sum[:]
}

// PasswordReset is what an operator's reset made: the link's token (shown
// once), when it expires, and how many API tokens of the person it revoked.
type PasswordReset struct {
	Token         string
	Expires       time.Time
	TokensRevoked int
}

// CreatePasswordReset is the operator's `anvil admin reset-password`: the
// user's password stops working, and every session and every API token of
// theirs ends at once (a reset is what an operator does for a taken-over
// account); the returned token (shown once) lets them set a new password
// within PasswordResetTTL.
func (a *Accounts) CreatePasswordReset(ctx context.Context, email string) (PasswordReset, error) {
	email, err := validateEmail(email)
	if err != nil {
		return PasswordReset{}, err
	}
	tok := PasswordResetPrefix + tokens.RandomBase62(tokens.RandomLen)
	now := a.s.Now()
	out := PasswordReset{Token: tok, Expires: now.Add(PasswordResetTTL)}
	expires := out.Expires
	err = a.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var userID uuid.UUID
		var stored string
		err := tx.NewRaw(`SELECT id, email FROM users WHERE lower(email) = lower(?) FOR UPDATE`, email).Scan(ctx, &userID, &stored)
		if dbutil.IsNoRows(err) {
			return domain.NotFound("user " + email)
		}
		if err != nil {
			return fmt.Errorf("reset: find user: %w", err)
		}
		// An earlier link stops working: only the newest reset counts.
		if _, err := tx.NewRaw(`UPDATE password_resets SET used_at = ? WHERE user_id = ? AND used_at IS NULL`, now, userID).Exec(ctx); err != nil {
			return err
		}
		if _, err := tx.NewRaw(`INSERT INTO password_resets (user_id, token_hash, created_at, expires_at) VALUES (?, ?, ?, ?)`,
			userID, resetHash(tok), now, expires).Exec(ctx); err != nil {
			return fmt.Errorf("reset: create: %w", err)
		}
		if _, err := tx.NewRaw(`UPDATE users SET password_hash = ? WHERE id = ?`, unusablePassword, userID).Exec(ctx); err != nil {
			return err
		}
		if _, err := tx.NewRaw(`DELETE FROM sessions WHERE user_id = ?`, userID).Exec(ctx); err != nil {
			return err
		}
		if out.TokensRevoked, err = a.revokeUserTokens(ctx, tx, userID, nil, domain.OperatorActor, revokeReasonReset); err != nil {
			return err
		}
		return auditEveryOrg(ctx, tx, userID, nil, domain.OperatorActor, domain.AuditPasswordReset, stored)
	})
	if err != nil {
		return PasswordReset{}, err
	}
	return out, nil
}

// PasswordResetEmail names the account of a usable reset link.
func (a *Accounts) PasswordResetEmail(ctx context.Context, token string) (string, error) {
	var email string
	err := a.s.DB.NewRaw(`SELECT u.email FROM password_resets r JOIN users u ON u.id = r.user_id
		WHERE r.token_hash = ? AND r.used_at IS NULL AND r.expires_at > ?`, resetHash(token), a.s.Now()).Scan(ctx, &email)
	if dbutil.IsNoRows(err) {
		return "", ErrResetInvalid
	}
	return email, err
}

// ResetPassword sets a new password through a reset link, once. Every
// session and every API token of the person ends with it: a reset link is
// the way back into a taken-over account, and nothing its taker made may
// outlive it.
func (a *Accounts) ResetPassword(ctx context.Context, token, password string) error {
	if !strings.HasPrefix(token, PasswordResetPrefix) || len(token) != len(PasswordResetPrefix)+tokens.RandomLen {
		return ErrResetInvalid
	}
	if err := ValidatePassword(password); err != nil {
		return err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return err
	}
	return a.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var id, userID uuid.UUID
		err := tx.NewRaw(`SELECT id, user_id FROM password_resets WHERE token_hash = ? AND used_at IS NULL AND expires_at > ? FOR UPDATE`,
			resetHash(token), a.s.Now()).Scan(ctx, &id, &userID)
		if dbutil.IsNoRows(err) {
			return ErrResetInvalid
		}
		if err != nil {
			return err
		}
		if _, err := tx.NewRaw(`UPDATE password_resets SET used_at = ? WHERE id = ?`, a.s.Now(), id).Exec(ctx); err != nil {
			return err
		}
		var email string
		if err := tx.NewRaw(`UPDATE users SET password_hash = ? WHERE id = ? RETURNING email`, hash, userID).Scan(ctx, &email); err != nil {
			return err
		}
		if _, err := tx.NewRaw(`DELETE FROM sessions WHERE user_id = ?`, userID).Exec(ctx); err != nil {
			return err
		}
		if _, err := a.revokeUserTokens(ctx, tx, userID, &userID, email, revokeReasonReset); err != nil {
			return err
		}
		return auditEveryOrg(ctx, tx, userID, &userID, email, domain.AuditPasswordChanged, email)
	})
}
