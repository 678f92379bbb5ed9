package domain

import (
	"context"

	"github.com/uptrace/bun"
)

// The base's services for capability packages (domain/runsecret, …): they
// import domain, never the other way round.

// Audit kinds of run secrets.
const (
	AuditRunSecretSet     = "run_secret.set"
	AuditRunSecretDeleted = "run_secret.deleted"
)

// RecordAudit writes an audit entry in tx, the transaction of the change it
// describes (see recordAudit). detail must never hold a secret.
func RecordAudit(ctx context.Context, tx bun.IDB, p *Principal, kind, target string, detail map[string]any) error {
	return recordAudit(ctx, tx, p, kind, target, detail)
}

// RequireRole refuses a principal below min (ErrForbidden).
func RequireRole(p *Principal, min string) error { return requireRole(p, min) }
