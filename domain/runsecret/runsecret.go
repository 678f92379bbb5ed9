// Package runsecret keeps a project's run secrets: values a run's command
// receives as environment variables (a registry password, a deploy key).
// Values are sealed with the operator key (AES-256-GCM, bound to project
// and name like webhook secrets), are never shown again after saving, and
// are masked in the log (domain.LogWriter.Mask). Runs of code from a fork
// never receive them.
//
// A secret has a scope: the runs that receive it — "runs" (a project's
// runs), "repairs" (its repair runs, which may reach a model API with it,
// docs/network.md) or "both". Every secret saved before scopes existed
// reached both and keeps doing so, and a secret saved without a scope is
// "both" too, so a client that never names one sees nothing change.
package runsecret

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/db"
	"anvil/domain"
	"anvil/domain/internal/mask"
	"anvil/domain/run"
)

// Limits.
const (
	MaxValueBytes = 64 << 10
	MaxPerProject = 100
)

var nameRE = regexp.MustCompile(`^[A-Z_][A-Z0-9_]{0,127}$`)

// reserved are names the sandbox sets itself, and anvil's own prefix.
var reserved = map[string]bool{"PATH": true, "HOME": true, "LANG": true, "TERM": true, "CI": true}

// Scopes of a secret.
const (
	ScopeRuns    = "runs"
	ScopeRepairs = "repairs"
	ScopeBoth    = "both"
)

// CheckScope refuses a scope that is none of the three.
func CheckScope(scope string) error {
	switch scope {
	case ScopeRuns, ScopeRepairs, ScopeBoth:
		return nil
	}
	return domain.Invalid("invalid_secret_scope", "scope %q must be runs, repairs or both", domain.ClipString(scope, 40))
}

// Secret is what may be shown of a secret: never its value.
type Secret struct {
	Name string `json:"name"`
	// Scope is which runs receive it: runs, repairs or both.
	Scope     string     `json:"scope"`
	UpdatedAt time.Time  `json:"updated_at"`
	UpdatedBy *uuid.UUID `json:"updated_by"`
	// UpdatedByEmail is who saved it last ("" once the account is gone).
	UpdatedByEmail string `json:"updated_by_email"`
}

// Service stores and reads run secrets.
type Service struct{ s *domain.Store }

// New builds the service.
func New(s *domain.Store) *Service { return &Service{s: s} }

func aad(projectID uuid.UUID, name string) []byte {
	return []byte("run_secret:" + projectID.String() + ":" + name)
}

// CheckName refuses a name that is not an environment-variable name anvil
// lets a command have.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return domain.Invalid("invalid_secret_name", "secret name %q must be an environment variable name: upper-case letters, digits and _, not starting with a digit, at most 128 characters", name)
	}
	if reserved[name] || strings.HasPrefix(name, "ANVIL_") {
		return domain.Invalid("reserved_secret_name", "secret name %q is reserved (PATH, HOME, LANG, TERM, CI and ANVIL_*)", name)
	}
	return nil
}

func checkValue(v string) error {
	switch {
	case len(v) < mask.MinLen:
		return domain.Invalid("secret_too_short", "a secret value must be at least %d characters: a shorter one cannot be masked in logs", mask.MinLen)
	case len(v) > MaxValueBytes:
		return domain.Invalid("secret_too_long", "a secret value must be at most %d bytes", MaxValueBytes)
	case !utf8.ValidString(v) || strings.ContainsRune(v, 0):
		return domain.Invalid("invalid_secret_value", "a secret value must be UTF-8 text without NUL characters")
	}
	return nil
}

// withAdmin runs fn under the project's lock for an admin of its organisation.
func (sv *Service) withAdmin(ctx context.Context, pr *domain.Principal, projectID uuid.UUID, fn func(ctx context.Context, tx bun.Tx, p *domain.Project) error) error {
	if err := domain.RequireRole(pr, domain.RoleAdmin); err != nil {
		return err
	}
	return sv.s.WithProject(ctx, projectID, func(ctx context.Context, tx bun.Tx, p *domain.Project) error {
		if p.OrgID != pr.OrgID {
			return domain.NotFound("project")
		}
		return fn(ctx, tx, p)
	})
}

const listSQL = `SELECT s.name, s.scope, s.updated_at, s.updated_by, COALESCE(u.email, '') AS updated_by_email
	FROM run_secrets s LEFT JOIN users u ON u.id = s.updated_by WHERE s.project_id = ?`

// List returns the project's secrets by name, without values (admins).
func (sv *Service) List(ctx context.Context, pr *domain.Principal, projectID uuid.UUID) ([]Secret, error) {
	out := []Secret{}
	err := sv.withAdmin(ctx, pr, projectID, func(ctx context.Context, tx bun.Tx, _ *domain.Project) error {
		return tx.NewRaw(listSQL+` ORDER BY s.name`, projectID).Scan(ctx, &out)
	})
	return out, err
}

// Get returns one secret's name and when it was saved (admins).
func (sv *Service) Get(ctx context.Context, pr *domain.Principal, projectID uuid.UUID, name string) (Secret, error) {
	var out []Secret
	err := sv.withAdmin(ctx, pr, projectID, func(ctx context.Context, tx bun.Tx, _ *domain.Project) error {
		return tx.NewRaw(listSQL+` AND s.name = ?`, projectID, name).Scan(ctx, &out)
	})
	if err != nil {
		return Secret{}, err
	}
	if len(out) == 0 {
		return Secret{}, domain.NotFound("secret")
	}
	return out[0], nil
}

// Put creates or replaces a secret (admins) and reports whether it was
// new; a new secret reaches both kinds of run, a replaced one keeps its
// scope.
func (sv *Service) Put(ctx context.Context, pr *domain.Principal, projectID uuid.UUID, name, value string) (Secret, bool, error) {
	return sv.PutScoped(ctx, pr, projectID, name, &value, "")
}

// PutScoped creates or changes a secret (admins): its value when value is
// not nil (a new secret needs one), its scope when scope is not "" (a new
// secret without one reaches both kinds of run).
func (sv *Service) PutScoped(ctx context.Context, pr *domain.Principal, projectID uuid.UUID, name string, value *string, scope string) (Secret, bool, error) {
	if err := CheckName(name); err != nil {
		return Secret{}, false, err
	}
	if scope != "" {
		if err := CheckScope(scope); err != nil {
			return Secret{}, false, err
		}
	}
	var sealed string
	if value != nil {
		if err := checkValue(*value); err != nil {
			return Secret{}, false, err
		}
		var err error
		if sealed, err = sv.s.Keys.Seal([]byte(*value), aad(projectID, name)); err != nil {
			return Secret{}, false, fmt.Errorf("seal secret: %w", err)
		}
	}
	now := sv.s.Now().UTC()
	uid := pr.UserID
	var created bool
	var was string
	err := sv.withAdmin(ctx, pr, projectID, func(ctx context.Context, tx bun.Tx, p *domain.Project) error {
		var n int
		if err := tx.NewRaw(`SELECT count(*), COALESCE(max(scope) FILTER (WHERE name = ?), '') FROM run_secrets WHERE project_id = ?`, name, p.ID).Scan(ctx, &n, &was); err != nil {
			return err
		}
		exists := was != ""
		if !exists && n >= MaxPerProject {
			return domain.Conflict("too_many_secrets", "a project holds at most %d secrets", MaxPerProject)
		}
		if !exists && value == nil {
			return domain.Invalid("missing_value", "value is required for a new secret")
		}
		created = !exists
		if scope == "" {
			scope = was
			if scope == "" {
				scope = ScopeBoth
			}
		}
		if value == nil {
			if _, err := tx.NewRaw(`UPDATE run_secrets SET scope = ?, updated_at = ?, updated_by = ? WHERE project_id = ? AND name = ?`,
				scope, now, uid, p.ID, name).Exec(ctx); err != nil {
				return fmt.Errorf("store secret: %w", err)
			}
		} else if _, err := tx.NewRaw(`INSERT INTO run_secrets (project_id, name, sealed, scope, updated_at, updated_by) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (project_id, name) DO UPDATE SET sealed = EXCLUDED.sealed, scope = EXCLUDED.scope, updated_at = EXCLUDED.updated_at, updated_by = EXCLUDED.updated_by`,
			p.ID, name, sealed, scope, now, uid).Exec(ctx); err != nil {
			return fmt.Errorf("store secret: %w", err)
		}
		detail := map[string]any{"project_id": p.ID.String(), "name": name, "created": created, "scope": scope}
		if was != "" && was != scope {
			detail["scope_was"] = was
		}
		return domain.RecordAudit(ctx, tx, pr, domain.AuditRunSecretSet, p.Slug+"/"+name, detail)
	})
	if err != nil {
		return Secret{}, false, err
	}
	return Secret{Name: name, Scope: scope, UpdatedAt: now, UpdatedBy: &uid, UpdatedByEmail: pr.Email}, created, nil
}

// Delete removes a secret (admins).
func (sv *Service) Delete(ctx context.Context, pr *domain.Principal, projectID uuid.UUID, name string) error {
	return sv.withAdmin(ctx, pr, projectID, func(ctx context.Context, tx bun.Tx, p *domain.Project) error {
		res, err := tx.NewRaw(`DELETE FROM run_secrets WHERE project_id = ? AND name = ?`, p.ID, name).Exec(ctx)
		if err != nil {
			return fmt.Errorf("delete secret: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return domain.NotFound("secret")
		}
		return domain.RecordAudit(ctx, tx, pr, domain.AuditRunSecretDeleted, p.Slug+"/"+name,
			map[string]any{"project_id": p.ID.String(), "name": name})
	})
}

// ForRun returns the environment a run's command receives: the project's
// secrets of the run's scope (a repair run: repairs and both; any other:
// runs and both), opened — none for a run of code from a fork. For the
// executor only (no principal: it runs what the queue handed it).
func (sv *Service) ForRun(ctx context.Context, r *run.Run) (map[string]string, error) {
	env := map[string]string{}
	if !r.SecretsAllowed() {
		return env, nil
	}
	var rows []struct {
		Name   string `bun:"name"`
		Sealed string `bun:"sealed"`
	}
	scope := ScopeRuns
	if r.Trigger == run.TriggerRepair {
		scope = ScopeRepairs
	}
	if err := sv.s.DB.NewRaw(`SELECT name, sealed FROM run_secrets WHERE project_id = ? AND scope IN (?, 'both') ORDER BY name`, r.ProjectID, scope).Scan(ctx, &rows); err != nil && !db.IsNoRows(err) {
		return nil, fmt.Errorf("read secrets of project %s: %w", r.ProjectID, err)
	}
	for _, row := range rows {
		v, err := sv.s.Keys.Open(row.Sealed, aad(r.ProjectID, row.Name))
		if err != nil {
			return nil, fmt.Errorf("open secret %s of project %s: %w", row.Name, r.ProjectID, err)
		}
		env[row.Name] = string(v)
	}
	return env, nil
}

// Values are env's values, for the log's mask.
func Values(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, v := range env {
		out = append(out, v)
	}
	return out
}
