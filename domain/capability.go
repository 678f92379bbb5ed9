package domain

// The base's services for capability packages (domain/runsecret, …): they
// import domain, never the other way round.

// Audit kinds of run secrets.
const (
	AuditRunSecretSet     = "run_secret.set"
	AuditRunSecretDeleted = "run_secret.deleted"
)

// AuditRunCacheCleared is the audit kind of a project's cache cleared
// (domain/runcache).
const AuditRunCacheCleared = "run_cache.cleared"

// RecordAudit (domain/audit.go) writes an audit entry in the change's
// transaction for them, and RequireRole (domain/roles.go) checks the role.

// AuditImagesCleared is the audit kind of a clear of the workers' image
// stores requested (domain/imagestore).
const AuditImagesCleared = "images.cleared"
