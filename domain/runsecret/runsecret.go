// Package runsecret keeps a project's run secrets: values a run's command
// receives as environment variables (a registry password, a deploy key).
// Values are sealed with the operator key (AES-256-GCM, bound to project
// and name like webhook secrets), are never shown again after saving, and
// are masked in the log (domain.LogWriter.Mask). Runs of code from a fork
// never receive them.
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

// Secret is what may be shown of a secret: never its value.
type Secret struct {
	Name      string     `json:"name"`
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

const listSQL = `SELECT s.name, s.updated_at, s.updated_by, COALESCE(u.email, '') AS updated_by_email
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

// Put creates or replaces a secret (admins) and reports whether it was new.
func (sv *Service) Put(ctx context.Context, pr *domain.Principal, projectID uuid.UUID, name, value string) (Secret, bool, error) {
	if err := CheckName(name); err != nil {
		return Secret{}, false, err
	}
	if err := checkValue(value); err != nil {
		return Secret{}, false, err
	}
	sealed, err := sv.s.Keys.Seal([]byte(value), aad(projectID, name))
	if err != nil {
		return Secret{}, false, fmt.Errorf("seal secret: %w", err)
	}
	now := sv.s.Now().UTC()
	uid := pr.UserID
	var created bool
	err = sv.withAdmin(ctx, pr, projectID, func(ctx context.Context, tx bun.Tx, p *domain.Project) error {
		var n int
		var exists bool
		if err := tx.NewRaw(`SELECT count(*), COALESCE(bool_or(name = ?), false) FROM run_secrets WHERE project_id = ?`, name, p.ID).Scan(ctx, &n, &exists); err != nil {
			return err
		}
		if !exists && n >= MaxPerProject {
			return domain.Conflict("too_many_secrets", "a project holds at most %d secrets", MaxPerProject)
		}
		created = !exists
		if _, err := tx.NewRaw(`INSERT INTO run_secrets (project_id, name, sealed, updated_at, updated_by) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (project_id, name) DO UPDATE SET sealed = EXCLUDED.sealed, updated_at = EXCLUDED.updated_at, updated_by = EXCLUDED.updated_by`,
			p.ID, name, sealed, now, uid).Exec(ctx); err != nil {
			return fmt.Errorf("store secret: %w", err)
		}
		return domain.RecordAudit(ctx, tx, pr, domain.AuditRunSecretSet, p.Slug+"/"+name,
			map[string]any{"project_id": p.ID.String(), "name": name, "created": created})
	})
	if err != nil {
		return Secret{}, false, err
	}
	return Secret{Name: name, UpdatedAt: now, UpdatedBy: &uid, UpdatedByEmail: pr.Email}, created, nil
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
// secrets, opened — none for a run of code from a fork. For the executor
// only (no principal: it runs what the queue handed it).
func (sv *Service) ForRun(ctx context.Context, r *run.Run) (map[string]string, error) {
	env := map[string]string{}
	if !r.SecretsAllowed() {
		return env, nil
	}
	var rows []struct {
		Name   string `bun:"name"`
		Sealed string `bun:"sealed"`
	}
	if err := sv.s.DB.NewRaw(`SELECT name, sealed FROM run_secrets WHERE project_id = ? ORDER BY name`, r.ProjectID).Scan(ctx, &rows); err != nil && !db.IsNoRows(err) {
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
