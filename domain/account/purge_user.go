package account

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/internal/dbutil"
)

// AuditUserPurged is written in every organisation a purged person
// belonged to, with their pseudonym as the target.
const AuditUserPurged = "user.purged"

// PurgeReport is what `anvil admin purge-user` removed.
type PurgeReport struct {
	UserID uuid.UUID `json:"user_id"`
	// Pseudonym replaces the person's email in the audit trail.
	Pseudonym string `json:"pseudonym"`
	// Organizations are the slugs of the memberships removed.
	Organizations  []string `json:"organizations"`
	Sessions       int64    `json:"sessions"`
	APITokens      int64    `json:"api_tokens"`
	Invitations    int64    `json:"invitations"`
	PasswordResets int64    `json:"password_resets"`
	AuditEntries   int64    `json:"audit_entries"`
}

// Pseudonym is how the audit trail names a purged person: a short hash of
// their id (random, so it cannot be guessed back from an email), the same
// in every entry, so the entries of one person still read as one person's.
func Pseudonym(userID uuid.UUID) string {
	sum := sha256.Sum256([]byte("anvil-purged-user:" + userID.String()))
	return "user-" + hex.EncodeToString(sum[:5])
}

// PurgeUser removes a person (the operator's `anvil admin purge-user`,
// docs/erasure.md): their memberships, sessions, personal API tokens and
// password resets, the invitations addressed to them and the pending ones
// they created (used and revoked ones stay as the organisation's history,
// without their name), and their user row. The audit trail keeps its
// entries with the person's email replaced by their Pseudonym, and every
// organisation they left gets a "user.purged" entry. The last owner of an
// organisation is refused: someone must be made owner first, or the
// organisation deleted. All of it is one transaction.
func (a *Accounts) PurgeUser(ctx context.Context, email string) (PurgeReport, error) {
	var rep PurgeReport
	email = strings.TrimSpace(email)
	if email == "" {
		return rep, domain.Invalid("invalid_email", "email is required")
	}
	err := a.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var stored string
		if err := tx.NewRaw(`SELECT id, email FROM users WHERE lower(email) = lower(?) FOR UPDATE`, email).Scan(ctx, &rep.UserID, &stored); err != nil {
			if dbutil.IsNoRows(err) {
				return domain.NotFound("user")
			}
			return fmt.Errorf("purge: find user: %w", err)
		}
		rep.Pseudonym = Pseudonym(rep.UserID)
		var ms []struct {
			OrgID uuid.UUID `bun:"org_id"`
			Slug  string    `bun:"slug"`
			Role  string    `bun:"role"`
		}
		// The organisations are locked as lockMembers locks them, so that no
		// concurrent demotion leaves an organisation without an owner.
		if err := tx.NewRaw(`SELECT o.id AS org_id, o.slug, m.role FROM memberships m JOIN organizations o ON o.id = m.org_id
			WHERE m.user_id = ? ORDER BY o.id FOR UPDATE OF o`, rep.UserID).Scan(ctx, &ms); err != nil {
			return fmt.Errorf("purge: memberships: %w", err)
		}
		for _, m := range ms {
			if m.Role != domain.RoleOwner {
				continue
			}
			n, err := countOwners(ctx, tx, m.OrgID)
			if err != nil {
				return err
			}
			if n <= 1 {
				return domain.Conflict("last_owner", "%s is the last owner of organisation %q: make another member its owner, or delete the organisation, first",
					stored, m.Slug)
			}
		}
		count := func(q string, args ...any) (int64, error) {
			res, err := tx.NewRaw(q, args...).Exec(ctx)
			if err != nil {
				return 0, fmt.Errorf("purge: %w", err)
			}
			return res.RowsAffected()
		}
		var err error
		if rep.AuditEntries, err = count(`UPDATE audit_log SET actor_email = ?
			WHERE actor_id = ? OR lower(actor_email) = lower(?)`, rep.Pseudonym, rep.UserID, stored); err != nil {
			return err
		}
		// Entries about the person (member added, invitation used …) name
		// them in the target or the detail.
		if _, err := count(`UPDATE audit_log SET target = ? WHERE lower(target) = lower(?)`, rep.Pseudonym, stored); err != nil {
			return err
		}
		if _, err := count(`UPDATE audit_log SET detail = replace(replace(detail::text, ?, ?), lower(?), ?)::jsonb
			WHERE strpos(lower(detail::text), lower(?)) > 0`, stored, rep.Pseudonym, stored, rep.Pseudonym, stored); err != nil {
			return err
		}
		if rep.Sessions, err = count(`DELETE FROM sessions WHERE user_id = ?`, rep.UserID); err != nil {
			return err
		}
		if rep.APITokens, err = count(`DELETE FROM api_tokens WHERE user_id = ?`, rep.UserID); err != nil {
			return err
		}
		if rep.PasswordResets, err = count(`DELETE FROM password_resets WHERE user_id = ?`, rep.UserID); err != nil {
			return err
		}
		if rep.Invitations, err = count(`DELETE FROM invitations WHERE lower(email) = lower(?)
			OR (invited_by = ? AND used_at IS NULL AND revoked_at IS NULL)`, stored, rep.UserID); err != nil {
			return err
		}
		for _, m := range ms {
			if err := domain.RecordAuditIn(ctx, tx, m.OrgID, nil, domain.OperatorActor, AuditUserPurged, rep.Pseudonym, map[string]any{"role": m.Role}); err != nil {
				return err
			}
			rep.Organizations = append(rep.Organizations, m.Slug)
		}
		if _, err := count(`DELETE FROM memberships WHERE user_id = ?`, rep.UserID); err != nil {
			return err
		}
		// What still points at the person (runs they triggered or canceled,
		// secrets they set, invitations they sent or used) loses the pointer
		// through the foreign keys' ON DELETE SET NULL.
		_, err = count(`DELETE FROM users WHERE id = ?`, rep.UserID)
		return err
	})
	if err != nil {
		return PurgeReport{}, err
	}
	return rep, nil
}
