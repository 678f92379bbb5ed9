package account

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/internal/dbutil"
	"anvil/domain/internal/tokens"
	anvilmail "anvil/domain/mail"
)

// SessionTTL is how long a browser session lasts.
const SessionTTL = 14 * 24 * time.Hour

// Organization is a tenant: every project belongs to one.
type Organization struct {
	bun.BaseModel `bun:"table:organizations"`
	ID            uuid.UUID `bun:"id,pk,type:uuid,default:gen_random_uuid()"`
	Slug          string    `bun:"slug"`
	Name          string    `bun:"name"`
	CreatedAt     time.Time `bun:"created_at,nullzero,default:now()"`
}

// User is a person who can log in.
type User struct {
	bun.BaseModel `bun:"table:users"`
	ID            uuid.UUID `bun:"id,pk,type:uuid,default:gen_random_uuid()"`
	Email         string    `bun:"email"`
	Name          string    `bun:"name"`
	PasswordHash  string    `bun:"password_hash"`
	CreatedAt     time.Time `bun:"created_at,nullzero,default:now()"`
}

// Accounts manages organisations, people, sessions and personal tokens.
type Accounts struct {
	s *domain.Store
	// Mail, when set, mails invitations and password resets (docs/mail.md).
	Mail *anvilmail.Mailer
	// PublicURL is the cockpit's address, for the links in mail.
	PublicURL string
}

// NewAccounts builds the service.
func NewAccounts(s *domain.Store) *Accounts { return &Accounts{s: s} }

// ValidatePassword enforces a minimum that a person can still remember.
func ValidatePassword(pw string) error {
	switch {
	case len(pw) < 10:
		return domain.Invalid("invalid_password", "password must be at least 10 characters")
	case len(pw) > 512:
		return domain.Invalid("invalid_password", "password must be at most 512 characters")
	}
	return nil
}

func validateEmail(email string) (string, error) {
	email = strings.TrimSpace(email)
	if email == "" {
		return "", domain.Invalid("invalid_email", "email is required")
	}
	if len(email) > 254 {
		return "", domain.Invalid("invalid_email", "email must be at most 254 characters")
	}
	a, err := mail.ParseAddress(email)
	if err != nil || a.Address != email {
		return "", domain.Invalid("invalid_email", "email %q is not a valid address", email)
	}
	return email, nil
}

// BootstrapResult is what `anvil admin bootstrap` prints.
type BootstrapResult struct {
	OrgID  uuid.UUID `json:"org_id"`
	UserID uuid.UUID `json:"user_id"`
	Token  string    `json:"token"`
}

// Bootstrap creates an organisation, its owner and a first API token in one
// transaction. The owner is reused when the email already exists (adding a
// second organisation to a person).
func (a *Accounts) Bootstrap(ctx context.Context, orgSlug, email, password string) (BootstrapResult, error) {
	return a.bootstrap(ctx, orgSlug, email, password, true)
}

// BootstrapOwner is Bootstrap without the API token: for a caller that has
// nobody to hand the token to (`anvil dev` prints a login, not a token), so
// no credential exists that nobody ever saw. Token is empty.
func (a *Accounts) BootstrapOwner(ctx context.Context, orgSlug, email, password string) (BootstrapResult, error) {
	return a.bootstrap(ctx, orgSlug, email, password, false)
}

func (a *Accounts) bootstrap(ctx context.Context, orgSlug, email, password string, withToken bool) (BootstrapResult, error) {
	var res BootstrapResult
	if !domain.ValidSlug(orgSlug) {
		return res, domain.Invalid("invalid_slug", "organisation slug %q must match ^[a-z0-9][a-z0-9-]{0,62}$", orgSlug)
	}
	email, err := validateEmail(email)
	if err != nil {
		return res, err
	}
	if err := ValidatePassword(password); err != nil {
		return res, err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return res, err
	}
	err = a.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		org := &Organization{Slug: orgSlug, Name: orgSlug}
		if _, err := tx.NewInsert().Model(org).Returning("*").Exec(ctx); err != nil {
			if dbutil.IsUnique(err, "") {
				return domain.Conflict("org_exists", "organisation %q already exists", orgSlug)
			}
			return fmt.Errorf("create organisation: %w", err)
		}
		u := new(User)
		err := tx.NewSelect().Model(u).Where("lower(email) = lower(?)", email).Scan(ctx)
		switch {
		case dbutil.IsNoRows(err):
			u = &User{Email: email, Name: strings.Split(email, "@")[0], PasswordHash: hash}
			if _, err := tx.NewInsert().Model(u).Returning("*").Exec(ctx); err != nil {
				return fmt.Errorf("create user: %w", err)
			}
		case err != nil:
			return fmt.Errorf("find user: %w", err)
		}
		if _, err := tx.NewRaw("INSERT INTO memberships (org_id, user_id, role) VALUES (?, ?, ?)", org.ID, u.ID, domain.RoleOwner).Exec(ctx); err != nil {
			return fmt.Errorf("add owner: %w", err)
		}
		// The organisation's creation is the first entry of its audit log.
		if err := domain.RecordAuditIn(ctx, tx, org.ID, &u.ID, u.Email, domain.AuditOrganizationCreated, org.Slug, map[string]any{"owner": u.Email}); err != nil {
			return err
		}
		res = BootstrapResult{OrgID: org.ID, UserID: u.ID}
		if withToken {
			tok, err := a.insertToken(ctx, tx, org.ID, u.ID, "bootstrap")
			if err != nil {
				return err
			}
			res.Token = tok
		}
		return nil
	})
	return res, err
}

// AddMember creates (or reuses) a user and gives them role in the
// organisation of p. Only owners and admins may add people.
func (a *Accounts) AddMember(ctx context.Context, p *domain.Principal, email, password, role string) (uuid.UUID, error) {
	if err := domain.RequireRole(p, domain.RoleAdmin); err != nil {
		return uuid.Nil, err
	}
	if !domain.ValidRole(role) {
		return uuid.Nil, domain.Invalid("invalid_role", "role must be one of owner, admin, member, viewer")
	}
	if !managedByAdmin(role) && !p.AtLeast(domain.RoleOwner) {
		return uuid.Nil, domain.Forbidden("only an owner may add an owner or an admin")
	}
	email, err := validateEmail(email)
	if err != nil {
		return uuid.Nil, err
	}
	if err := ValidatePassword(password); err != nil {
		return uuid.Nil, err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return uuid.Nil, err
	}
	u := &User{Email: email, Name: strings.Split(email, "@")[0], PasswordHash: hash}
	err = a.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		err := tx.NewSelect().Model(u).Where("lower(email) = lower(?)", email).Scan(ctx)
		if dbutil.IsNoRows(err) {
			_, err = tx.NewInsert().Model(u).Returning("*").Exec(ctx)
		}
		if err != nil {
			return fmt.Errorf("user: %w", err)
		}
		res, err := tx.NewRaw(`INSERT INTO memberships (org_id, user_id, role) VALUES (?, ?, ?)
			ON CONFLICT (org_id, user_id) DO NOTHING`, p.OrgID, u.ID, role).Exec(ctx)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return domain.Conflict("already_member", "%s is already a member of this organisation", email)
		}
		return domain.RecordAudit(ctx, tx, p, domain.AuditMemberAdded, email, map[string]any{"role": role})
	})
	return u.ID, err
}

// HasUsers reports whether anybody can log in yet (used by `make run` to
// bootstrap a demo owner on the first start).
func (a *Accounts) HasUsers(ctx context.Context) (bool, error) {
	return a.s.DB.NewSelect().Table("users").Exists(ctx)
}

// Login checks credentials and opens a session. It returns the cookie value
// (only its hash is stored). Unknown email and wrong password are the same
// refusal and take the same time.
func (a *Accounts) Login(ctx context.Context, email, password string) (string, *domain.Principal, error) {
	bad := domain.NewError(domain.ErrUnauthorized, "invalid_credentials", "email or password is incorrect")
	if email == "" || password == "" || len(email) > 254 || len(password) > 512 {
		return "", nil, bad
	}
	u := new(User)
	err := a.s.DB.NewSelect().Model(u).Where("lower(email) = lower(?)", strings.TrimSpace(email)).Scan(ctx)
	if dbutil.IsNoRows(err) {
		CheckPassword(dummyHash(), password)
		return "", nil, bad
	}
	if err != nil {
		return "", nil, fmt.Errorf("login: %w", err)
	}
	if !CheckPassword(u.PasswordHash, password) {
		return "", nil, bad
	}
	var orgID uuid.UUID
	err = a.s.DB.NewRaw(`SELECT org_id FROM memberships WHERE user_id = ? ORDER BY created_at, org_id LIMIT 1`, u.ID).Scan(ctx, &orgID)
	if dbutil.IsNoRows(err) {
		return "", nil, domain.NewError(domain.ErrForbidden, "no_organisation", "this account belongs to no organisation")
	}
	if err != nil {
		return "", nil, fmt.Errorf("login membership: %w", err)
	}
	cookie, err := a.openSession(ctx, a.s.DB, u.ID, orgID)
	if err != nil {
		return "", nil, err
	}
	p, err := a.principal(ctx, u.ID, orgID)
	if err != nil {
		return "", nil, err
	}
	p.SessionID = sessionHash(cookie)
	return cookie, p, nil
}

// openSession stores a new session of userID in orgID and returns its cookie
// value (only the hash is stored).
func (a *Accounts) openSession(ctx context.Context, db bun.IDB, userID, orgID uuid.UUID) (string, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	cookie := base64.RawURLEncoding.EncodeToString(raw)
	now := a.s.Now()
	if _, err := db.NewRaw(`INSERT INTO sessions (id, user_id, org_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
		sessionHash(cookie), userID, orgID, now, now.Add(SessionTTL)).Exec(ctx); err != nil {
		return "", fmt.Errorf("create session: %w", err)
	}
	return cookie, nil
}

func sessionHash(cookie string) []byte {
	sum := sha256.Sum256([]byte("anvil-session:" + cookie))
	return sum[:]
}

// Session resolves a session cookie to its principal.
func (a *Accounts) Session(ctx context.Context, cookie string) (*domain.Principal, error) {
	if cookie == "" || len(cookie) > 100 {
		return nil, domain.ErrUnauthorized
	}
	id := sessionHash(cookie)
	var row struct {
		UserID uuid.UUID `bun:"user_id"`
		OrgID  uuid.UUID `bun:"org_id"`
	}
	err := a.s.DB.NewRaw(`SELECT user_id, org_id FROM sessions WHERE id = ? AND expires_at > ?`, id, a.s.Now()).Scan(ctx, &row)
	if dbutil.IsNoRows(err) {
		return nil, domain.ErrUnauthorized
	}
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	p, err := a.principal(ctx, row.UserID, row.OrgID)
	if err != nil {
		return nil, err
	}
	p.SessionID = id
	return p, nil
}

// Logout ends a session.
func (a *Accounts) Logout(ctx context.Context, cookie string) error {
	_, err := a.s.DB.NewRaw(`DELETE FROM sessions WHERE id = ?`, sessionHash(cookie)).Exec(ctx)
	return err
}

func (a *Accounts) principal(ctx context.Context, userID, orgID uuid.UUID) (*domain.Principal, error) {
	p := &domain.Principal{UserID: userID, OrgID: orgID}
	var seen *time.Time
	err := a.s.DB.NewRaw(`SELECT u.email, o.slug, o.name, m.role, m.last_seen_at
		FROM memberships m JOIN users u ON u.id = m.user_id JOIN organizations o ON o.id = m.org_id
		WHERE m.user_id = ? AND m.org_id = ?`, userID, orgID).Scan(ctx, &p.Email, &p.OrgSlug, &p.OrgName, &p.Role, &seen)
	if dbutil.IsNoRows(err) {
		return nil, domain.ErrUnauthorized
	}
	if err != nil {
		return nil, fmt.Errorf("principal: %w", err)
	}
	// last_seen_at at minute resolution: one write per member per minute at most.
	if now := a.s.Now(); seen == nil || now.Sub(*seen) > time.Minute {
		_, _ = a.s.DB.NewRaw(`UPDATE memberships SET last_seen_at = ? WHERE org_id = ? AND user_id = ?`, now, orgID, userID).Exec(ctx)
	}
	return p, nil
}

// APIToken is a personal API token as listed (never its secret).
type APIToken struct {
	bun.BaseModel `bun:"table:api_tokens"`
	ID            uuid.UUID  `bun:"id,pk,type:uuid,default:gen_random_uuid()" json:"id"`
	OrgID         uuid.UUID  `bun:"org_id" json:"-"`
	UserID        uuid.UUID  `bun:"user_id" json:"-"`
	Name          string     `bun:"name" json:"name"`
	Prefix        string     `bun:"prefix" json:"prefix"`
	Hash          []byte     `bun:"hash" json:"-"`
	CreatedAt     time.Time  `bun:"created_at,nullzero,default:now()" json:"created_at"`
	LastUsedAt    *time.Time `bun:"last_used_at" json:"last_used_at"`
	RevokedAt     *time.Time `bun:"revoked_at" json:"revoked_at"`
}

func (a *Accounts) insertToken(ctx context.Context, tx bun.IDB, orgID, userID uuid.UUID, name string) (string, error) {
	tok, lookup, hash := tokens.New(tokens.PersonalTokenPrefix)
	t := &APIToken{OrgID: orgID, UserID: userID, Name: name, Prefix: lookup, Hash: hash}
	if _, err := tx.NewInsert().Model(t).Exec(ctx); err != nil {
		return "", fmt.Errorf("create token: %w", err)
	}
	return tok, nil
}

// CreateToken issues a personal API token; the plaintext is returned once.
func (a *Accounts) CreateToken(ctx context.Context, p *domain.Principal, name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return "", domain.Invalid("invalid_name", "token name is required")
	}
	if len(name) > 100 {
		return "", domain.Invalid("invalid_name", "token name must be at most 100 characters")
	}
	var tok string
	err := a.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) (err error) {
		if tok, err = a.insertToken(ctx, tx, p.OrgID, p.UserID, name); err != nil {
			return err
		}
		return domain.RecordAudit(ctx, tx, p, domain.AuditTokenCreated, name, map[string]any{"prefix": tok[:tokens.LookupLen]})
	})
	return tok, err
}

// ListTokens lists the caller's own tokens in this organisation.
func (a *Accounts) ListTokens(ctx context.Context, p *domain.Principal) ([]APIToken, error) {
	var ts []APIToken
	err := a.s.DB.NewSelect().Model(&ts).Where("org_id = ? AND user_id = ?", p.OrgID, p.UserID).
		OrderExpr("revoked_at IS NOT NULL, created_at DESC").Scan(ctx)
	return ts, err
}

// RevokeToken revokes one of the caller's tokens.
func (a *Accounts) RevokeToken(ctx context.Context, p *domain.Principal, id uuid.UUID) error {
	return a.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var name, prefix string
		var was *time.Time
		err := tx.NewRaw(`SELECT name, prefix, revoked_at FROM api_tokens WHERE id = ? AND org_id = ? AND user_id = ? FOR UPDATE`,
			id, p.OrgID, p.UserID).Scan(ctx, &name, &prefix, &was)
		if dbutil.IsNoRows(err) {
			return domain.NotFound("token")
		}
		if err != nil || was != nil {
			return err
		}
		if _, err := tx.NewRaw(`UPDATE api_tokens SET revoked_at = ? WHERE id = ?`, a.s.Now(), id).Exec(ctx); err != nil {
			return err
		}
		return domain.RecordAudit(ctx, tx, p, domain.AuditTokenRevoked, name, map[string]any{"prefix": prefix})
	})
}

// Authenticate resolves a bearer personal token to its principal. Every
// failure is the same ErrUnauthorized.
func (a *Accounts) Authenticate(ctx context.Context, bearer string) (*domain.Principal, error) {
	lookup, hash, ok := tokens.Split(tokens.PersonalTokenPrefix, bearer)
	if !ok {
		return nil, domain.ErrUnauthorized
	}
	t := new(APIToken)
	err := a.s.DB.NewSelect().Model(t).Where("prefix = ?", lookup).Scan(ctx)
	if dbutil.IsNoRows(err) {
		tokens.HashEqual(hash, hash)
		return nil, domain.ErrUnauthorized
	}
	if err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	if !tokens.HashEqual(t.Hash, hash) || t.RevokedAt != nil {
		return nil, domain.ErrUnauthorized
	}
	// last_used_at at minute resolution: one write per token per minute at most.
	now := a.s.Now()
	if t.LastUsedAt == nil || now.Sub(*t.LastUsedAt) > time.Minute {
		_, _ = a.s.DB.NewRaw(`UPDATE api_tokens SET last_used_at = ? WHERE id = ?`, now, t.ID).Exec(ctx)
	}
	p, err := a.principal(ctx, t.UserID, t.OrgID)
	if err != nil {
		return nil, err
	}
	p.TokenID = t.ID
	return p, nil
}

// PurgeExpiredSessions deletes sessions past their expiry, and the reveals
// past theirs.
func (a *Accounts) PurgeExpiredSessions(ctx context.Context) (int64, error) {
	res, err := a.s.DB.NewRaw(`DELETE FROM sessions WHERE expires_at < ?`, a.s.Now()).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("purge sessions: %w", err)
	}
	// Secrets nobody came back for (see StashReveal).
	if _, err := a.s.DB.NewRaw(`DELETE FROM session_reveals WHERE expires_at < ?`, a.s.Now()).Exec(ctx); err != nil {
		return 0, fmt.Errorf("purge reveals: %w", err)
	}
	return res.RowsAffected()
}
