package domain

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// Kinds of audit entries: every security-relevant change of an organisation.
const (
	AuditMemberAdded         = "member.added"
	AuditMemberRemoved       = "member.removed"
	AuditMemberRoleChanged   = "member.role_changed"
	AuditInvitationCreated   = "invitation.created"
	AuditInvitationUsed      = "invitation.used"
	AuditInvitationRevoked   = "invitation.revoked"
	AuditPasswordChanged     = "password.changed"
	AuditPasswordReset       = "password.reset"
	AuditTokenCreated        = "token.created"
	AuditTokenRevoked        = "token.revoked"
	AuditWebhookCreated      = "webhook.created"
	AuditWebhookDeleted      = "webhook.deleted"
	AuditWebhookRotated      = "webhook.secret_rotated"
	AuditDeliveryEvaluated   = "webhook.delivery_evaluated"
	AuditConnectionCreated   = "connection.created"
	AuditConnectionRevoked   = "connection.revoked"
	AuditBindingChanged      = "binding.changed"
	AuditCardExternal        = "card.external"
	AuditProjectCreated      = "project.created"
	AuditProjectUpdated      = "project.updated"
	AuditProjectDeleted      = "project.deleted"
	AuditOrganizationCreated = "organization.created"
	// The alert destinations' entries (domain/alert).
	AuditAlertDestinationCreated = "alert_destination.created"
	AuditAlertDestinationUpdated = "alert_destination.updated"
	AuditAlertDestinationDeleted = "alert_destination.deleted"
	AuditAlertDestinationTested  = "alert_destination.tested"
	// AuditConnectionOriginsChanged: a browser connection's allowed origins.
	AuditConnectionOriginsChanged = "connection.origins_changed"
	// AuditSecretsForgotten: the operator declared a lost key's secrets
	// gone (`anvil admin forget-secrets`).
	AuditSecretsForgotten = "secrets.forgotten"
	OperatorActor         = "operator (anvil admin)"
	auditPageSize         = 50
)

// RecordAudit writes one audit entry in tx, the transaction of the change it
// describes, so that the entry exists exactly when the change does. p is the
// actor (nil for the operator's command line). detail must never hold a
// secret: callers pass names, roles and ids only.
func RecordAudit(ctx context.Context, tx bun.IDB, p *Principal, kind, target string, detail map[string]any) error {
	if p == nil {
		return fmt.Errorf("audit %s: no actor", kind)
	}
	return RecordAuditIn(ctx, tx, p.OrgID, &p.UserID, p.Email, kind, target, detail)
}

// RecordAuditIn is RecordAudit for an explicit organisation and actor (an
// invitation accepted by someone who is not a member yet, an operator's reset).
func RecordAuditIn(ctx context.Context, tx bun.IDB, orgID uuid.UUID, actorID *uuid.UUID, actorEmail, kind, target string, detail map[string]any) error {
	if detail == nil {
		detail = map[string]any{}
	}
	raw, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("audit %s: %w", kind, err)
	}
	if _, err := tx.NewRaw(`INSERT INTO audit_log (org_id, actor_id, actor_email, kind, target, detail) VALUES (?, ?, ?, ?, ?, ?)`,
		orgID, actorID, actorEmail, kind, target, string(raw)).Exec(ctx); err != nil {
		return fmt.Errorf("audit %s: %w", kind, err)
	}
	return nil
}

// AuditEntry is one line of the audit log as shown.
type AuditEntry struct {
	ID         int64          `json:"id"`
	At         time.Time      `json:"at"`
	ActorEmail string         `json:"actor_email"`
	Kind       string         `json:"kind"`
	Target     string         `json:"target"`
	Detail     map[string]any `json:"detail"`
}

// AuditQuery filters the audit log; Before is the id of the last entry of
// the previous page (0 for the newest).
type AuditQuery struct {
	Actor  string // an email (any case)
	Kind   string
	Before int64
	Limit  int
}

// AuditPage is one page of entries, newest first; NextBefore is 0 on the last.
type AuditPage struct {
	Entries    []AuditEntry
	NextBefore int64
}

// Audit reads the audit log of the principal's organisation (owners and admins).
type Audit struct{ s *Store }

// NewAudit builds the service.
func NewAudit(s *Store) *Audit { return &Audit{s: s} }

// List returns one page of the log.
func (a *Audit) List(ctx context.Context, p *Principal, q AuditQuery) (AuditPage, error) {
	var out AuditPage
	if err := RequireRole(p, RoleAdmin); err != nil {
		return out, err
	}
	if len(q.Actor) > 254 || len(q.Kind) > 64 {
		return out, Invalid("invalid_filter", "actor or kind filter is too long")
	}
	if q.Before < 0 {
		return out, Invalid("invalid_cursor", "before must be a positive entry id")
	}
	if q.Limit <= 0 || q.Limit > auditPageSize {
		q.Limit = auditPageSize
	}
	sel := a.s.DB.NewSelect().Table("audit_log").Column("id", "at", "actor_email", "kind", "target", "detail").
		Where("org_id = ?", p.OrgID).OrderExpr("id DESC").Limit(int64(q.Limit + 1))
	if a := strings.TrimSpace(q.Actor); a != "" {
		sel = sel.Where("lower(actor_email) = lower(?)", a)
	}
	if k := strings.TrimSpace(q.Kind); k != "" {
		sel = sel.Where("kind = ?", k)
	}
	if q.Before > 0 {
		sel = sel.Where("id < ?", q.Before)
	}
	rows, err := sel.Rows(ctx)
	if err != nil {
		return out, fmt.Errorf("audit: list: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e AuditEntry
		var raw []byte
		if err := rows.Scan(&e.ID, &e.At, &e.ActorEmail, &e.Kind, &e.Target, &raw); err != nil {
			return out, fmt.Errorf("audit: scan: %w", err)
		}
		_ = json.Unmarshal(raw, &e.Detail)
		e.At = e.At.UTC()
		out.Entries = append(out.Entries, e)
	}
	if err := rows.Err(); err != nil {
		return out, err
	}
	if len(out.Entries) > q.Limit {
		out.Entries = out.Entries[:q.Limit]
		out.NextBefore = out.Entries[q.Limit-1].ID
	}
	return out, nil
}
