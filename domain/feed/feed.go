package feed

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/card"
	"anvil/domain/event"
	"anvil/domain/internal/coalesce"
	"anvil/domain/internal/dbutil"
	"anvil/domain/internal/tokens"
	"anvil/domain/internal/ttlcache"
)

// Feed owns the Anvil Feed ingest: connections, bindings and event storage
// (docs/contracts/feed.md), and the first steps of the incident store the events group
// into.
type Feed struct {
	s *domain.Store
	// cards asks for the card refreshes of the projects whose groups
	// committed, in paced rounds (see Feed.refreshCard).
	cards *coalesce.Loop[uuid.UUID]
	// folds folds the incident deltas the process's groups appended, at
	// most one round per FoldGap (deltas.go).
	folds *coalesce.Loop[struct{}]
	// SyncFold folds before the answer: for tests that read an incident's
	// count right after an ingest. Never set in production, where a fold
	// on the request path would put the incident's row lock back on it.
	SyncFold bool
	// duringFold, when set, runs inside a fold transaction once it has
	// deleted its deltas and before it adds them, with the fold's backend
	// pid: a test seam for a fold cut off half-way.
	duringFold func(pid int)
	comb       combiner
	// copySlot lets copySlots groups of the process at a time COPY their
	// events, and each form itself while it waits (see storeGroup).
	copySlot chan struct{}
	// incidents remembers the incidents' ids (see incidentCache).
	incidents incidentCache
	// senders remembers what tokens resolved to (see newSenderCache).
	senders *ttlcache.Cache[string, *FeedSender]
	// StoreTimeout bounds one ingest's storage: a store that hangs becomes
	// a 503 the sender retries, never a request that waits for ever.
	StoreTimeout time.Duration
	// OnQueued is the hook through which an incident that the `auto` policy
	// moved to QUEUED gets its repair run. It runs inside the ingest's
	// transaction, so whatever it enqueues exists exactly when the incident
	// commits. wiring.NewServices sets it to Incidents.RequestRepairs; nil means no
	// repair run is started (the incident stays QUEUED and is visible as such).
	OnQueued func(ctx context.Context, tx bun.Tx, projectID uuid.UUID, incidentIDs []uuid.UUID) error
	// Symbolicate maps an event's minified frames back to their original
	// source before it is scrubbed and fingerprinted (docs/sourcemap.md);
	// it never fails an event. wiring.NewServices sets it to
	// sourcemap.Service.Symbolicate; nil leaves frames as they came.
	Symbolicate func(ctx context.Context, projectID uuid.UUID, ev *event.Event)
	// scrub is event.Scrub; a test seam, because no validated event makes
	// the real scrubber give up (Validate already bounds what it cannot walk).
	scrub func(*event.Event) error
	// afterLookup, when set, runs right after a group has learnt its
	// incidents' ids — looked up, or known from an earlier group — and
	// before it stores its events (general: on the general path); a test
	// seam for the races with other processes that the paths must survive.
	afterLookup func(general bool)
	// generalOnly sends every group down the general path (storeBatch),
	// never storeFast: a test seam for the differential test that holds
	// the fast path to its slow twin. Never set in production.
	generalOnly bool
}

// NewFeed builds the service; Start starts its card-refresh requests.
func NewFeed(s *domain.Store) *Feed {
	f := &Feed{s: s, StoreTimeout: 10 * time.Second, scrub: event.Scrub, copySlot: make(chan struct{}, copySlots),
		senders: newSenderCache(), incidents: newIncidentCache()}
	f.cards = coalesce.New(card.RefreshGap, maxCardRequests, f.requestCardRefreshes)
	f.folds = coalesce.New(FoldGap, 1, f.foldRound)
	return f
}

// Start starts the feed's card-refresh requests and its folds.
func (f *Feed) Start(ctx context.Context) {
	f.cards.Start(ctx)
	f.folds.Start(ctx)
}

// Stop folds what is pending, asks for the card refreshes still pending
// and stops.
func (f *Feed) Stop(ctx context.Context) error {
	if err := f.folds.Stop(ctx); err != nil {
		return fmt.Errorf("feed: stop the folds: %w", err)
	}
	if err := f.cards.Stop(ctx); err != nil {
		return fmt.Errorf("feed: stop the card-refresh requests: %w", err)
	}
	return nil
}

// WildcardEnvironment is the binding that admits every environment without
// a binding of its own.
const WildcardEnvironment = "*"

// FeedConnection is one sender's credential for one project, as listed
// (never its token).
type FeedConnection struct {
	bun.BaseModel `bun:"table:feed_connections"`
	ID            uuid.UUID  `bun:"id,pk,type:uuid,default:gen_random_uuid()" json:"connection_id"`
	OrgID         uuid.UUID  `bun:"org_id" json:"-"`
	ProjectID     uuid.UUID  `bun:"project_id" json:"project_id"`
	Name          string     `bun:"name" json:"name"`
	Prefix        string     `bun:"prefix" json:"prefix"`
	Hash          []byte     `bun:"hash" json:"-"`
	CreatedAt     time.Time  `bun:"created_at,nullzero,default:now()" json:"created_at"`
	LastUsedAt    *time.Time `bun:"last_used_at" json:"last_used_at"`
	RevokedAt     *time.Time `bun:"revoked_at" json:"revoked_at"`
	// Kind is KindServer or KindBrowser (feed_browser.go); AllowedOrigins
	// the browser connection's normalised origins; TokenEnc a browser
	// token, sealed (never listed).
	Kind           string   `bun:"kind" json:"kind"`
	AllowedOrigins []string `bun:"allowed_origins,array" json:"allowed_origins"`
	TokenEnc       string   `bun:"token_enc" json:"-"`
}

// FeedBinding admits a project's events of one environment (or '*').
type FeedBinding struct {
	bun.BaseModel `bun:"table:feed_bindings"`
	ProjectID     uuid.UUID `bun:"project_id,pk" json:"-"`
	Environment   string    `bun:"environment,pk" json:"environment"`
	RepairPolicy  string    `bun:"repair_policy" json:"repair_policy"`
	CreatedAt     time.Time `bun:"created_at" json:"created_at"`
	UpdatedAt     time.Time `bun:"updated_at" json:"updated_at"`
}

// NormalizeEnvironment checks a binding's environment: a label as events
// spell it (compared case-insensitively, stored lower-case) or '*'.
func NormalizeEnvironment(env string) (string, error) {
	env = strings.ToLower(strings.TrimSpace(env))
	if env == WildcardEnvironment {
		return env, nil
	}
	if !domain.ValidEnvironment(env) {
		return "", domain.Invalid("invalid_environment", "environment %q must be a label (letters, digits, '.', '_', '-', at most 64, starting with a letter or digit) or '*'", domain.ClipString(env, 80))
	}
	return env, nil
}

func validPolicy(p string) error {
	switch p {
	case domain.PolicyOff, domain.PolicyObserve, domain.PolicyApprove, domain.PolicyAuto:
		return nil
	}
	return domain.Invalid("invalid_repair_policy", "repair_policy must be one of off, observe, approve, auto; got %q", domain.ClipString(p, 40))
}

// project returns a project of the caller's organisation (404 otherwise).
func (f *Feed) project(ctx context.Context, p *domain.Principal, id uuid.UUID) (*domain.Project, error) {
	pr := new(domain.Project)
	err := domain.SelectLiveProjects(f.s.DB, pr).Where("id = ? AND org_id = ?", id, p.OrgID).Scan(ctx)
	if dbutil.IsNoRows(err) {
		return nil, domain.NotFound("project")
	}
	if err != nil {
		return nil, fmt.Errorf("feed: project %s: %w", id, err)
	}
	return pr, nil
}

// CreateConnection issues a connection for a project and returns it with its
// token, which exists in plaintext only in this return value.
func (f *Feed) CreateConnection(ctx context.Context, p *domain.Principal, projectID uuid.UUID, name string) (*FeedConnection, string, error) {
	return f.CreateConnectionOf(ctx, p, projectID, ConnectionSpec{Name: name})
}

// CreateConnectionOf issues a connection of either kind (feed_browser.go).
func (f *Feed) CreateConnectionOf(ctx context.Context, p *domain.Principal, projectID uuid.UUID, spec ConnectionSpec) (*FeedConnection, string, error) {
	if err := domain.RequireRole(p, domain.RoleAdmin); err != nil {
		return nil, "", err
	}
	kind, origins, err := spec.check()
	if err != nil {
		return nil, "", err
	}
	name := spec.Name
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return nil, "", domain.Invalid("invalid_name", "connection name is required")
	case len(name) > 100:
		return nil, "", domain.Invalid("invalid_name", "connection name must be at most 100 characters")
	}
	pr, err := f.project(ctx, p, projectID)
	if err != nil {
		return nil, "", err
	}
	c, tok, err := f.newConnection(pr, name, kind, origins)
	if err != nil {
		return nil, "", err
	}
	lookup := c.Prefix
	if err := f.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(c).Returning("*").Exec(ctx); err != nil {
			return err
		}
		return domain.RecordAudit(ctx, tx, p, domain.AuditConnectionCreated, pr.Slug+"/"+name, map[string]any{"prefix": lookup, "kind": kind, "allowed_origins": origins})
	}); err != nil {
		return nil, "", fmt.Errorf("feed: create connection: %w", err)
	}
	return c, tok, nil
}

// ListConnections lists a project's connections, live ones first.
func (f *Feed) ListConnections(ctx context.Context, p *domain.Principal, projectID uuid.UUID) ([]FeedConnection, error) {
	if _, err := f.project(ctx, p, projectID); err != nil {
		return nil, err
	}
	cs := []FeedConnection{}
	err := f.s.DB.NewSelect().Model(&cs).Where("project_id = ? AND org_id = ?", projectID, p.OrgID).
		OrderExpr("revoked_at IS NOT NULL, created_at DESC").Scan(ctx)
	return cs, err
}

// RevokeConnection revokes one connection; its next request is a 401. It
// returns the connection's project. Revoking twice is no error.
func (f *Feed) RevokeConnection(ctx context.Context, p *domain.Principal, id uuid.UUID) (uuid.UUID, error) {
	if err := domain.RequireRole(p, domain.RoleAdmin); err != nil {
		return uuid.Nil, err
	}
	var projectID uuid.UUID
	err := f.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var name string
		var was *time.Time
		if err := tx.NewRaw(`SELECT project_id, name, revoked_at FROM feed_connections WHERE id = ? AND org_id = ? FOR UPDATE`,
			id, p.OrgID).Scan(ctx, &projectID, &name, &was); err != nil || was != nil {
			return err
		}
		if _, err := tx.NewRaw(`UPDATE feed_connections SET revoked_at = ? WHERE id = ?`, f.s.Now(), id).Exec(ctx); err != nil {
			return err
		}
		return domain.RecordAudit(ctx, tx, p, domain.AuditConnectionRevoked, name, map[string]any{"connection_id": id.String()})
	})
	if dbutil.IsNoRows(err) {
		return uuid.Nil, domain.NotFound("connection")
	}
	if err != nil {
		return uuid.Nil, fmt.Errorf("feed: revoke connection %s: %w", id, err)
	}
	f.senders.Clear()
	return projectID, nil
}

// PutBinding creates or changes the binding of a project's environment.
func (f *Feed) PutBinding(ctx context.Context, p *domain.Principal, projectID uuid.UUID, environment, policy string) (*FeedBinding, error) {
	if err := domain.RequireRole(p, domain.RoleAdmin); err != nil {
		return nil, err
	}
	env, err := NormalizeEnvironment(environment)
	if err != nil {
		return nil, err
	}
	policy = strings.ToLower(strings.TrimSpace(policy))
	if err := validPolicy(policy); err != nil {
		return nil, err
	}
	pr, err := f.project(ctx, p, projectID)
	if err != nil {
		return nil, err
	}
	if err := repairPossible(pr, policy); err != nil {
		return nil, err
	}
	now := f.s.Now()
	b := &FeedBinding{ProjectID: projectID, Environment: env, RepairPolicy: policy, CreatedAt: now, UpdatedAt: now}
	err = f.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var from []string
		if err := tx.NewRaw(`SELECT repair_policy FROM feed_bindings WHERE project_id = ? AND environment = ? FOR UPDATE`, projectID, env).Scan(ctx, &from); err != nil && !dbutil.IsNoRows(err) {
			return err
		}
		if _, err := tx.NewInsert().Model(b).On("CONFLICT (project_id, environment) DO UPDATE").
			Set("repair_policy = EXCLUDED.repair_policy, updated_at = EXCLUDED.updated_at").Returning("*").Exec(ctx); err != nil {
			return err
		}
		detail := map[string]any{"project_id": projectID.String(), "project": pr.Slug, "repair_policy": policy}
		if len(from) > 0 {
			if from[0] == policy {
				return nil // saved unchanged: nothing to record
			}
			detail["from"] = from[0]
		}
		return domain.RecordAudit(ctx, tx, p, domain.AuditBindingChanged, env, detail)
	})
	if err != nil {
		return nil, fmt.Errorf("feed: put binding: %w", err)
	}
	f.senders.Clear()
	return b, nil
}

// AddBinding creates the binding of an environment that has none. Unlike
// PutBinding it never changes an existing one: a form that adds a binding
// must not silently replace the policy somebody chose (approve, say) with
// its own default; the existing binding is changed where it is listed.
func (f *Feed) AddBinding(ctx context.Context, p *domain.Principal, projectID uuid.UUID, environment, policy string) (*FeedBinding, error) {
	if err := domain.RequireWrite(p); err != nil {
		return nil, err
	}
	env, err := NormalizeEnvironment(environment)
	if err != nil {
		return nil, err
	}
	policy = strings.ToLower(strings.TrimSpace(policy))
	if err := validPolicy(policy); err != nil {
		return nil, err
	}
	pr, err := f.project(ctx, p, projectID)
	if err != nil {
		return nil, err
	}
	if err := repairPossible(pr, policy); err != nil {
		return nil, err
	}
	now := f.s.Now()
	b := &FeedBinding{ProjectID: projectID, Environment: env, RepairPolicy: policy, CreatedAt: now, UpdatedAt: now}
	var added bool
	err = f.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		res, err := tx.NewInsert().Model(b).On("CONFLICT (project_id, environment) DO NOTHING").Exec(ctx)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		added = true
		return domain.RecordAudit(ctx, tx, p, domain.AuditBindingChanged, env,
			map[string]any{"project_id": projectID.String(), "project": pr.Slug, "repair_policy": policy, "added": true})
	})
	if err != nil {
		return nil, fmt.Errorf("feed: add binding: %w", err)
	}
	if !added {
		var current string
		if err := f.s.DB.NewRaw(`SELECT repair_policy FROM feed_bindings WHERE project_id = ? AND environment = ?`, projectID, env).Scan(ctx, &current); err != nil && !dbutil.IsNoRows(err) {
			return nil, fmt.Errorf("feed: add binding: %w", err)
		}
		return nil, domain.Conflict("binding_exists", "environment %q already has a binding with repair policy %s; change it in its row of the list", env, current)
	}
	f.senders.Clear()
	return b, nil
}

// repairPossible refuses a policy that starts repair runs (approve, auto) on
// a project that has no repair command to run: its incidents would wait for
// a repair that can never start.
func repairPossible(pr *domain.Project, policy string) error {
	if (policy == domain.PolicyApprove || policy == domain.PolicyAuto) && strings.TrimSpace(pr.RepairCommand) == "" {
		return domain.Invalid("repair_command_required", "repair policy %s starts repair runs, but project %s has no repair command; set one in the project's settings first, or choose observe", policy, pr.Name)
	}
	return nil
}

// ListBindings lists a project's bindings, the wildcard last.
func (f *Feed) ListBindings(ctx context.Context, p *domain.Principal, projectID uuid.UUID) ([]FeedBinding, error) {
	if _, err := f.project(ctx, p, projectID); err != nil {
		return nil, err
	}
	bs := []FeedBinding{}
	err := f.s.DB.NewSelect().Model(&bs).Where("project_id = ?", projectID).
		OrderExpr("environment = '*', environment").Scan(ctx)
	return bs, err
}

// DeleteBinding removes a binding: the environment's events are then
// refused as no_binding (unless a wildcard binding admits them).
func (f *Feed) DeleteBinding(ctx context.Context, p *domain.Principal, projectID uuid.UUID, environment string) error {
	if err := domain.RequireRole(p, domain.RoleAdmin); err != nil {
		return err
	}
	env, err := NormalizeEnvironment(environment)
	if err != nil {
		return err
	}
	pr, err := f.project(ctx, p, projectID)
	if err != nil {
		return err
	}
	err = f.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var from []string
		if err := tx.NewRaw(`DELETE FROM feed_bindings WHERE project_id = ? AND environment = ? RETURNING repair_policy`, projectID, env).Scan(ctx, &from); err != nil && !dbutil.IsNoRows(err) {
			return fmt.Errorf("feed: delete binding: %w", err)
		}
		if len(from) == 0 {
			return domain.NotFound("binding")
		}
		return domain.RecordAudit(ctx, tx, p, domain.AuditBindingChanged, env,
			map[string]any{"project_id": projectID.String(), "project": pr.Slug, "deleted": true, "from": from[0]})
	})
	f.senders.Clear()
	return err
}

// FeedSender is a resolved, live connection: who is sending (the token
// carries its organisation and project; nothing in the URL or body is ever
// read for that) and the project's bindings at the time of the request.
type FeedSender struct {
	ConnectionID uuid.UUID
	OrgID        uuid.UUID
	ProjectID    uuid.UUID
	// ProjectNumber is the project's number (the Sentry door's key must
	// belong to a project with the number of its path) and ConnectionName
	// the connection's name (the Sentry door's last resort for a service).
	ProjectNumber  int64
	ConnectionName string
	// Browser is a browser connection's (anv_pub_) sender, admitted only
	// from AllowedOrigins (see Admits).
	Browser        bool
	AllowedOrigins []string
	bindings       map[string]string // environment (or '*') → repair policy
}

// senderQuery resolves a token prefix together with its project's bindings,
// in one round trip. It is sent through database/sql with $n placeholders
// and a constant text, so pgx prepares it once per connection.
const senderQuery = `SELECT c.id, c.org_id, c.project_id, c.hash, c.revoked_at IS NOT NULL, c.last_used_at,
	COALESCE((SELECT json_object_agg(b.environment, b.repair_policy) FROM feed_bindings b WHERE b.project_id = c.project_id), '{}'),
	(SELECT p.number FROM ` + domain.AllProjects + ` p WHERE p.id = c.project_id), c.name, c.kind, array_to_json(c.allowed_origins)
	FROM feed_connections c WHERE c.prefix = $1`

// Authenticate resolves a bearer server token. Every way of failing —
// malformed, unknown prefix, wrong secret, revoked — is the same
// ErrUnauthorized, after the same work, so the answer tells an attacker
// nothing about which prefixes exist. Other errors are store failures.
// The whole token's answer is remembered for a second (see senderCache).
func (f *Feed) Authenticate(ctx context.Context, bearer string) (*FeedSender, error) {
	lookup, hash, ok := tokens.Split(tokens.ServerTokenPrefix, bearer)
	if !ok {
		lookup, hash, ok = tokens.Split(tokens.PublicTokenPrefix, bearer)
	}
	if !ok {
		return nil, domain.ErrUnauthorized
	}
	snd, cached, gen := f.senders.Lookup(string(hash), f.s.Now())
	switch {
	case cached && snd == nil:
		return nil, domain.ErrUnauthorized
	case cached:
		return snd, nil
	}
	ctx, cancel := context.WithTimeout(ctx, f.StoreTimeout)
	defer cancel()
	var (
		connID, orgID, projectID pgtype.UUID
		stored                   []byte
		revoked                  bool
		lastUsed                 pgtype.Timestamptz
		bindings                 []byte
		number                   int64
		connName, kind           string
		origins                  []byte
	)
	// Straight through pgx when there is a pool: every request resolves its
	// token, and database/sql's detour (a connection wrapped per query,
	// values converted twice) cost more than the query.
	var row interface{ Scan(...any) error }
	if f.s.Pool != nil {
		row = f.s.Pool.QueryRow(ctx, senderQuery, lookup)
	} else {
		row = f.s.DB.DB.QueryRowContext(ctx, senderQuery, lookup)
	}
	err := row.Scan(&connID, &orgID, &projectID, &stored, &revoked, &lastUsed, &bindings, &number, &connName, &kind, &origins)
	if dbutil.IsNoRows(err) {
		tokens.HashEqual(hash, hash) // the same comparison as a found prefix costs
		return nil, domain.ErrUnauthorized
	}
	if err != nil {
		return nil, fmt.Errorf("feed: resolve token: %w", err)
	}
	now := f.s.Now()
	if !tokens.HashEqual(stored, hash) {
		return nil, domain.ErrUnauthorized
	}
	if revoked {
		f.senders.PutIf(string(hash), nil, now, gen)
		return nil, domain.ErrUnauthorized
	}
	snd = &FeedSender{ConnectionID: connID.Bytes, OrgID: orgID.Bytes, ProjectID: projectID.Bytes,
		ProjectNumber: number, ConnectionName: connName, Browser: kind == KindBrowser}
	if err := json.Unmarshal(origins, &snd.AllowedOrigins); err != nil {
		return nil, fmt.Errorf("feed: allowed origins of %s: %w", snd.ConnectionID, err)
	}
	// A token's prefix says its kind; a row of the other kind behind it
	// (impossible by construction) is no credential.
	if snd.Browser != strings.HasPrefix(bearer, tokens.PublicTokenPrefix) {
		return nil, domain.ErrUnauthorized
	}
	if err := json.Unmarshal(bindings, &snd.bindings); err != nil {
		return nil, fmt.Errorf("feed: bindings of %s: %w", snd.ProjectID, err)
	}
	// last_used_at at minute resolution: at most one write per connection
	// per minute, whatever the request rate.
	if !lastUsed.Valid || now.Sub(lastUsed.Time) >= time.Minute {
		_, _ = f.s.DB.DB.ExecContext(ctx, `UPDATE feed_connections SET last_used_at = $1 WHERE id = $2`, now, snd.ConnectionID)
	}
	f.senders.PutIf(string(hash), snd, now, gen)
	return snd, nil
}

// policyFor returns the binding's policy for an environment: the exact
// binding, else the wildcard; ok is false when neither exists.
func (snd *FeedSender) policyFor(env string) (string, bool) {
	if p, ok := snd.bindings[env]; ok {
		return p, true
	}
	p, ok := snd.bindings[WildcardEnvironment]
	return p, ok
}

// ForgetSenders drops what this process remembers of feed tokens, after
// connections were revoked outside the feed (a project's deletion,
// docs/erasure.md); other processes' copies live a second.
func (f *Feed) ForgetSenders() { f.senders.Clear() }
