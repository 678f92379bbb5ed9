package domain

// The base's services for capability packages (domain/runsecret, …): they
// import domain, never the other way round.

// Audit kinds of run secrets.
const (
	AuditRunSecretSet     = "run_secret.set"
	AuditRunSecretDeleted = "run_secret.deleted"
)

// RecordAudit (domain/alert_hook.go) writes an audit entry in the change's
// transaction for them.

// RequireRole refuses a principal below min (ErrForbidden).
func RequireRole(p *Principal, min string) error { return requireRole(p, min) }
