package webhook

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/forge"
	"anvil/domain/internal/dbutil"
	"anvil/domain/internal/ttlcache"
	"anvil/domain/project"
	"anvil/domain/run"
)

// Webhooks owns webhook configuration, secret custody and the delivery
// ledger (docs/contracts/webhooks.md). The web tier verifies raw deliveries with the
// material (Cached)VerificationMaterial hands it in memory, and then calls
// Deliver with the verified, normalized payload and the Verification only.
type Webhooks struct {
	s     *domain.Store
	queue *run.Queue
	seals *sealCache
	// OnDelivered, set by the wiring, reads a decided delivery for the fix
	// chain (release.Fixes.FromDelivery: merged and closed repairs,
	// "Fixes SHOP-12" in a push; docs/releases.md). It must be idempotent:
	// it is called for a replayed delivery too.
	OnDelivered func(ctx context.Context, projectID uuid.UUID, pl forge.Payload) error
}

// NewWebhooks builds the service.
func NewWebhooks(s *domain.Store, q *run.Queue) *Webhooks {
	return &Webhooks{s: s, queue: q, seals: ttlcache.New[sealKey, run.SealedSecrets](sealTTL, maxCachedSeals)}
}

// Providers is the order in which pages and lists show the providers.
var Providers = []forge.Provider{forge.GitHub, forge.GitLab, forge.Gitea}

// Secret length bounds for secrets a person brings. Generated secrets are 64
// hex characters. Sixteen characters is the least we accept as a shared
// HMAC key; 256 is far more than any forge's form allows.
const (
	minSecretLen = 16
	maxSecretLen = 256
)

// webhookRow is one project_webhooks row. The sealed columns never leave the
// domain.
type webhookRow struct {
	bun.BaseModel   `bun:"table:project_webhooks"`
	ProjectID       uuid.UUID     `bun:"project_id,pk,type:uuid"`
	Provider        string        `bun:"provider,pk"`
	Enabled         bool          `bun:"enabled"`
	SecretEnc       string        `bun:"secret_enc"`
	SigningTokenEnc string        `bun:"signing_token_enc"`
	Config          WebhookConfig `bun:"config,type:jsonb"`
	CreatedAt       time.Time     `bun:"created_at"`
	UpdatedAt       time.Time     `bun:"updated_at"`
}

// WebhookConfig is the provider config of a webhook. Its only option today
// is GitLab's signing token: {"signing_token": true} makes anvil generate a
// Standard-Webhooks token ("whsec_…"), returned once, and from then on every
// GitLab delivery must carry a valid webhook-signature besides
// X-Gitlab-Token. A flag rather than a token value, so that the token is
// always generated with full entropy and only ever travels outwards, once.
type WebhookConfig struct {
	SigningToken bool `json:"signing_token"`
}

// WebhookConfigInput is a requested config change; nil fields are kept.
type WebhookConfigInput struct {
	SigningToken *bool `json:"signing_token"`
}

// WebhookInput is the body of PUT …/webhooks/:provider. Secret is only
// allowed when the webhook is created: replacing a secret goes through
// RotateSecret, which generates one, so a secret is never chosen twice.
type WebhookInput struct {
	Enabled *bool               `json:"enabled"`
	Secret  *string             `json:"secret"`
	Config  *WebhookConfigInput `json:"config"`
}

// Webhook is a webhook's state as lists and pages show it: never a secret.
type Webhook struct {
	ProjectID  uuid.UUID      `json:"project_id"`
	Provider   forge.Provider `json:"provider"`
	Configured bool           `json:"configured"`
	Enabled    bool           `json:"enabled"`
	Config     WebhookConfig  `json:"config"`
	CreatedAt  *time.Time     `json:"created_at"`
	UpdatedAt  *time.Time     `json:"updated_at"`
}

// WebhookSecrets is what create and rotate return, exactly once: the
// plaintext the person pastes into the forge. Nothing else ever returns it.
type WebhookSecrets struct {
	Secret       string `json:"secret,omitempty"`
	SigningToken string `json:"signing_token,omitempty"`
}

// WebhookResult is the answer of a change: the new state, whether it created
// the row, and the secrets to show once (empty unless created or rotated).
type WebhookResult struct {
	Webhook Webhook
	Created bool
	Secrets WebhookSecrets
}

func (r *webhookRow) view() Webhook {
	c, u := r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	return Webhook{ProjectID: r.ProjectID, Provider: forge.Provider(r.Provider), Configured: true, Enabled: r.Enabled,
		Config: r.Config, CreatedAt: &c, UpdatedAt: &u}
}

// secretAAD and signingTokenAAD bind sealed values to their row; the same
// expressions appear in sealedColumns for key rotation.
func secretAAD(projectID uuid.UUID, p forge.Provider) []byte {
	return []byte("webhook:" + projectID.String() + ":" + string(p) + ":secret")
}

func signingTokenAAD(projectID uuid.UUID, p forge.Provider) []byte {
	return []byte("webhook:" + projectID.String() + ":" + string(p) + ":signing_token")
}

// parseProvider maps a provider name to a refusal a client can act on.
func parseProvider(name string) (forge.Provider, error) {
	p, err := forge.ParseProvider(name)
	if err != nil {
		return "", &domain.Error{Kind: domain.ErrNotFound, Code: "unknown_provider",
			Message: fmt.Sprintf("provider %q is not supported; use github, gitlab or gitea (Forgejo uses gitea)", name)}
	}
	return p, nil
}

func errWebhookNotFound(p forge.Provider) error {
	return &domain.Error{Kind: domain.ErrNotFound, Code: "webhook_not_found", Message: fmt.Sprintf("no %s webhook is configured for this project", p)}
}

// validateSecret checks a secret a person brings. The value is never echoed.
func validateSecret(s string) error {
	switch {
	case len(s) < minSecretLen:
		return domain.Invalid("invalid_secret", "secret must be at least %d characters; leave it out to have a strong one generated", minSecretLen)
	case len(s) > maxSecretLen:
		return domain.Invalid("invalid_secret", "secret must be at most %d characters", maxSecretLen)
	case strings.TrimSpace(s) != s:
		return domain.Invalid("invalid_secret", "secret must not begin or end with whitespace (forges and proxies strip it from headers)")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return domain.Invalid("invalid_secret", "secret must not contain control characters")
		}
	}
	return nil
}

// withOwnProject takes the project lock for a principal's write, refusing
// viewers and other organisations' projects (as not found). Once it is done
// this process's cached material of the project is dropped, so the next
// delivery reads what the write left (other processes learn it from
// Deliver's check; see sealCache).
func (w *Webhooks) withOwnProject(ctx context.Context, pr *domain.Principal, projectID uuid.UUID, fn func(ctx context.Context, tx bun.Tx, p *domain.Project) error) error {
	if err := domain.RequireRole(pr, domain.RoleAdmin); err != nil {
		return err
	}
	defer func() {
		for _, p := range Providers {
			w.seals.Delete(sealKey{projectID, p})
		}
	}()
	return w.s.WithProject(ctx, projectID, func(ctx context.Context, tx bun.Tx, p *domain.Project) error {
		if p.OrgID != pr.OrgID {
			return domain.NotFound("project")
		}
		return fn(ctx, tx, p)
	})
}

func (w *Webhooks) loadRow(ctx context.Context, db bun.IDB, projectID uuid.UUID, p forge.Provider) (*webhookRow, error) {
	row := new(webhookRow)
	err := db.NewSelect().Model(row).Where("project_id = ? AND provider = ?", projectID, string(p)).Scan(ctx)
	if dbutil.IsNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load %s webhook of %s: %w", p, projectID, err)
	}
	return row, nil
}

// seal encrypts a secret for its row.
func (w *Webhooks) seal(plain string, aad []byte) (string, error) {
	enc, err := w.s.Keys.Seal([]byte(plain), aad)
	if err != nil {
		return "", fmt.Errorf("seal webhook secret: %w", err)
	}
	return enc, nil
}

// Put creates the provider's webhook or updates it (docs/contracts/private-api.md,
// "Webhooks"). On create
// the body must say whether it is enabled and may bring a secret; without
// one a secret is generated; either way it is returned once. On update only
// enabled and config change, and a secret is refused: secrets change through
// RotateSecret.
func (w *Webhooks) Put(ctx context.Context, pr *domain.Principal, projectID uuid.UUID, providerName string, in WebhookInput) (WebhookResult, error) {
	var res WebhookResult
	p, err := parseProvider(providerName)
	if err != nil {
		return res, err
	}
	if in.Config != nil && in.Config.SigningToken != nil && *in.Config.SigningToken && p != forge.GitLab {
		return res, domain.Invalid("invalid_config", "config.signing_token applies to gitlab webhooks only")
	}
	err = w.withOwnProject(ctx, pr, projectID, func(ctx context.Context, tx bun.Tx, proj *domain.Project) error {
		row, err := w.loadRow(ctx, tx, projectID, p)
		if err != nil {
			return err
		}
		now := w.s.Now()
		if row != nil {
			if in.Secret != nil {
				return domain.Invalid("secret_not_updatable", "a webhook's secret cannot be replaced by PUT; use POST /api/private/projects/%s/webhooks/%s/rotate-secret to generate a new one", projectID, p)
			}
			if in.Enabled != nil {
				row.Enabled = *in.Enabled
			}
			if err := w.applyConfig(row, in.Config, &res.Secrets); err != nil {
				return err
			}
			row.UpdatedAt = now
			if _, err := tx.NewUpdate().Model(row).WherePK().Column("enabled", "signing_token_enc", "config", "updated_at").Exec(ctx); err != nil {
				return fmt.Errorf("update %s webhook: %w", p, err)
			}
			res.Webhook = row.view()
			return nil
		}
		if in.Enabled == nil {
			return domain.Invalid("missing_enabled", "enabled (true or false) is required to create a webhook")
		}
		secret := forge.GenerateSecret()
		if in.Secret != nil {
			if err := validateSecret(*in.Secret); err != nil {
				return err
			}
			secret = *in.Secret
		}
		row = &webhookRow{ProjectID: projectID, Provider: string(p), Enabled: *in.Enabled, CreatedAt: now, UpdatedAt: now}
		if row.SecretEnc, err = w.seal(secret, secretAAD(projectID, p)); err != nil {
			return err
		}
		if err := w.applyConfig(row, in.Config, &res.Secrets); err != nil {
			return err
		}
		if _, err := tx.NewInsert().Model(row).Exec(ctx); err != nil {
			return fmt.Errorf("create %s webhook: %w", p, err)
		}
		res.Webhook, res.Created, res.Secrets.Secret = row.view(), true, secret
		return domain.RecordAudit(ctx, tx, pr, domain.AuditWebhookCreated, proj.Slug+"/"+string(p), nil)
	})
	if err != nil {
		return WebhookResult{}, err
	}
	return res, nil
}

// SetEnabled enables or disables an existing webhook and never creates one
// (the settings page's toggle: a webhook deleted in another tab stays
// deleted instead of coming back with a secret nobody saw).
func (w *Webhooks) SetEnabled(ctx context.Context, pr *domain.Principal, projectID uuid.UUID, providerName string, enabled bool) (Webhook, error) {
	var out Webhook
	p, err := parseProvider(providerName)
	if err != nil {
		return out, err
	}
	err = w.withOwnProject(ctx, pr, projectID, func(ctx context.Context, tx bun.Tx, proj *domain.Project) error {
		row, err := w.loadRow(ctx, tx, projectID, p)
		if err != nil {
			return err
		}
		if row == nil {
			return errWebhookNotFound(p)
		}
		row.Enabled, row.UpdatedAt = enabled, w.s.Now()
		if _, err := tx.NewUpdate().Model(row).WherePK().Column("enabled", "updated_at").Exec(ctx); err != nil {
			return fmt.Errorf("update %s webhook: %w", p, err)
		}
		out = row.view()
		return nil
	})
	return out, err
}

// applyConfig applies a config change; turning the signing token on
// generates one (returned once in out), turning it off deletes it. Turning
// it on when it is already on keeps the existing token: rotation is
// RotateSecret's job.
func (w *Webhooks) applyConfig(row *webhookRow, in *WebhookConfigInput, out *WebhookSecrets) error {
	if in == nil || in.SigningToken == nil {
		return nil
	}
	switch want := *in.SigningToken; {
	case want && row.SigningTokenEnc == "":
		tok := forge.GenerateSigningToken()
		enc, err := w.seal(tok, signingTokenAAD(row.ProjectID, forge.Provider(row.Provider)))
		if err != nil {
			return err
		}
		row.SigningTokenEnc, out.SigningToken = enc, tok
	case !want:
		row.SigningTokenEnc = ""
	}
	row.Config.SigningToken = row.SigningTokenEnc != ""
	return nil
}

// Delete hard-deletes the webhook row and its sealed secrets. The ledger
// stays (it is history, and ages out in 72 h); deliveries are refused from
// the moment this commits.
func (w *Webhooks) Delete(ctx context.Context, pr *domain.Principal, projectID uuid.UUID, providerName string) error {
	p, err := parseProvider(providerName)
	if err != nil {
		return err
	}
	return w.withOwnProject(ctx, pr, projectID, func(ctx context.Context, tx bun.Tx, proj *domain.Project) error {
		res, err := tx.NewDelete().Model((*webhookRow)(nil)).Where("project_id = ? AND provider = ?", projectID, string(p)).Exec(ctx)
		if err != nil {
			return fmt.Errorf("delete %s webhook: %w", p, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errWebhookNotFound(p)
		}
		return domain.RecordAudit(ctx, tx, pr, domain.AuditWebhookDeleted, proj.Slug+"/"+string(p), nil)
	})
}

// RotateSecret replaces the secret (and GitLab's signing token, when one is
// configured) with newly generated ones and returns them once. There is no
// overlap window: the old material stops verifying when this commits.
func (w *Webhooks) RotateSecret(ctx context.Context, pr *domain.Principal, projectID uuid.UUID, providerName string) (WebhookResult, error) {
	var res WebhookResult
	p, err := parseProvider(providerName)
	if err != nil {
		return res, err
	}
	err = w.withOwnProject(ctx, pr, projectID, func(ctx context.Context, tx bun.Tx, proj *domain.Project) error {
		row, err := w.loadRow(ctx, tx, projectID, p)
		if err != nil {
			return err
		}
		if row == nil {
			return errWebhookNotFound(p)
		}
		res.Secrets.Secret = forge.GenerateSecret()
		if row.SecretEnc, err = w.seal(res.Secrets.Secret, secretAAD(projectID, p)); err != nil {
			return err
		}
		if row.SigningTokenEnc != "" {
			res.Secrets.SigningToken = forge.GenerateSigningToken()
			if row.SigningTokenEnc, err = w.seal(res.Secrets.SigningToken, signingTokenAAD(projectID, p)); err != nil {
				return err
			}
		}
		row.UpdatedAt = w.s.Now()
		if _, err := tx.NewUpdate().Model(row).WherePK().Column("secret_enc", "signing_token_enc", "updated_at").Exec(ctx); err != nil {
			return fmt.Errorf("rotate %s webhook secret: %w", p, err)
		}
		res.Webhook = row.view()
		return domain.RecordAudit(ctx, tx, pr, domain.AuditWebhookRotated, proj.Slug+"/"+string(p), nil)
	})
	if err != nil {
		return WebhookResult{}, err
	}
	return res, nil
}

// List returns every provider's webhook state for a project of the caller's
// organisation, configured or not, in Providers order.
func (w *Webhooks) List(ctx context.Context, pr *domain.Principal, projectID uuid.UUID) ([]Webhook, error) {
	if _, err := project.NewProjects(w.s).Get(ctx, pr.OrgID, projectID); err != nil {
		return nil, err
	}
	var rows []webhookRow
	if err := w.s.DB.NewSelect().Model(&rows).Where("project_id = ?", projectID).Scan(ctx); err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	out := make([]Webhook, 0, len(Providers))
	for _, p := range Providers {
		wh := Webhook{ProjectID: projectID, Provider: p}
		for i := range rows {
			if rows[i].Provider == string(p) {
				wh = rows[i].view()
			}
		}
		out = append(out, wh)
	}
	return out, nil
}

// Material is a webhook's verification material, decrypted for one request
// and held in memory only (docs/contracts/webhooks.md, "Secrets"): the web tier verifies with it and
// drops it, keeping only its Verification for Deliver. It never reaches a
// log (String hides it).
type Material struct {
	Provider forge.Provider
	Enabled  bool
	Secrets  forge.Secrets
	v        Verification
	cached   bool
}

// Cached reports whether m was opened from cached sealed secrets, which
// another process may have rotated since: a delivery that does not verify
// with it deserves a second look with VerificationMaterial.
func (m Material) Cached() bool { return m.cached }

// String keeps the material out of any log line that prints it.
func (m Material) String() string {
	return fmt.Sprintf("webhook material for %s (enabled %t, redacted)", m.Provider, m.Enabled)
}

// GoString makes %#v as safe as %v.
func (m Material) GoString() string { return m.String() }

// Verification says which webhook, and which of its stored secrets, a
// delivery was verified with — the secrets as sealed at rest, never their
// plaintext. Deliver compares it with the webhook's row under the project
// lock, so a delivery verified with a secret that has been rotated away (or
// deleted) in the meantime is never accepted: there is no overlap window.
type Verification struct {
	projectID uuid.UUID
	provider  forge.Provider
	sealed    run.SealedSecrets
}

// Verification is what Deliver needs of m once the delivery is verified.
func (m Material) Verification() Verification { return m.v }

// sealCache keeps, for a short while, the sealed secrets of enabled
// webhooks, so that verifying a delivery costs no database round trip. It
// holds ciphertexts only — what the row holds — and every delivery still
// decrypts in memory for itself. A cached entry may be stale (another
// process rotated the secret): a delivery that does not verify with cached
// material is verified again with fresh material, and one that does is
// checked by Deliver under the project lock (ErrStaleMaterial), so the old
// secret is never accepted after a rotation, and the new one always is.
// Disabled, missing and unknown webhooks are never cached: their answers
// are read every time.
type sealCache = ttlcache.Cache[sealKey, run.SealedSecrets]

type sealKey struct {
	project  uuid.UUID
	provider forge.Provider
}

const (
	// sealTTL bounds how long a cached entry is used without a read.
	sealTTL = time.Minute
	// maxCachedSeals bounds the cache; when it is full it starts over.
	maxCachedSeals = 10000
)

// VerificationMaterial loads and decrypts what the web tier needs to verify
// a delivery for one project and provider. An unknown project is not found;
// a missing or deleted webhook is ErrWebhookNotConfigured. A disabled
// webhook's material is still returned, with Enabled false, so the web tier
// can tell a caller who proves the secret that the webhook is disabled while
// telling everybody else only that the delivery is unverified; Deliver
// refuses it regardless. It reads the database, and caches the sealed
// secrets of an enabled webhook for CachedVerificationMaterial.
func (w *Webhooks) VerificationMaterial(ctx context.Context, projectID uuid.UUID, providerName string) (Material, error) {
	p, err := parseProvider(providerName)
	if err != nil {
		return Material{}, err
	}
	return w.loadMaterial(ctx, sealKey{projectID, p}, time.Now())
}

// CachedVerificationMaterial is VerificationMaterial from the sealed
// secrets cached within the last sealTTL when there are some (see
// sealCache); the material says so (Material.Cached).
func (w *Webhooks) CachedVerificationMaterial(ctx context.Context, projectID uuid.UUID, providerName string) (Material, error) {
	p, err := parseProvider(providerName)
	if err != nil {
		return Material{}, err
	}
	key, now := sealKey{projectID, p}, time.Now()
	if sealed, ok := w.seals.Get(key, now); ok {
		if m, err := w.open(projectID, p, true, sealed); err == nil {
			m.cached = true
			return m, nil
		}
		w.seals.Delete(key) // what the row holds now decides
	}
	return w.loadMaterial(ctx, key, now)
}

// loadMaterial reads, opens and caches the material of key.
func (w *Webhooks) loadMaterial(ctx context.Context, key sealKey, now time.Time) (Material, error) {
	projectID, p := key.project, key.provider
	var row struct {
		Exists          bool   `bun:"exists"`
		Enabled         *bool  `bun:"enabled"`
		SecretEnc       string `bun:"secret_enc"`
		SigningTokenEnc string `bun:"signing_token_enc"`
	}
	// One round trip: the project's existence and the webhook row together.
	err := w.s.DB.NewRaw(`SELECT true AS exists, w.enabled, COALESCE(w.secret_enc, '') AS secret_enc,
			COALESCE(w.signing_token_enc, '') AS signing_token_enc
		FROM `+domain.LiveProjects+` pr LEFT JOIN project_webhooks w ON w.project_id = pr.id AND w.provider = ?
		WHERE pr.id = ?`, string(p), projectID).Scan(ctx, &row)
	if dbutil.IsNoRows(err) {
		w.seals.Delete(key)
		return Material{}, domain.NotFound("project")
	}
	if err != nil {
		return Material{}, fmt.Errorf("load webhook material: %w", err)
	}
	if row.Enabled == nil {
		w.seals.Delete(key)
		return Material{}, domain.ErrWebhookNotConfigured
	}
	sealed := run.SealedSecrets{Secret: row.SecretEnc, SigningToken: row.SigningTokenEnc}
	m, err := w.open(projectID, p, *row.Enabled, sealed)
	if err != nil {
		return Material{}, err
	}
	if m.Enabled {
		w.seals.Put(key, sealed, now)
	} else {
		w.seals.Delete(key)
	}
	return m, nil
}

// open decrypts sealed material for one request.
func (w *Webhooks) open(projectID uuid.UUID, p forge.Provider, enabled bool, sealed run.SealedSecrets) (Material, error) {
	m := Material{Provider: p, Enabled: enabled, v: Verification{projectID: projectID, provider: p, sealed: sealed}}
	var err error
	m.Secrets.Secret, err = w.s.Keys.Open(sealed.Secret, secretAAD(projectID, p))
	if err != nil {
		return Material{}, fmt.Errorf("open %s webhook secret of %s: %w", p, projectID, err)
	}
	if sealed.SigningToken != "" {
		tok, err := w.s.Keys.Open(sealed.SigningToken, signingTokenAAD(projectID, p))
		if err != nil {
			return Material{}, fmt.Errorf("open %s signing token of %s: %w", p, projectID, err)
		}
		m.Secrets.SigningToken = string(tok)
	}
	return m, nil
}

// Deliver decides a verified, normalized delivery under the project lock,
// as part of an acceptance group (decideDelivery tells the rules; a replay
// is the stored decision, never a reprocessing). v is the Verification of
// the material the delivery was verified with. A full queue stores
// queue_full and returns an error of kind ErrWebhookQueueFull alongside the
// result (the route answers 503 with Retry-After), having committed the
// ledger row.
//
// The project lock, and within a group the shared ledger entry, serialize
// concurrent copies of one delivery, so they make exactly one run; the
// ledger's primary key backs that up. A missing or disabled webhook is
// refused here as well, and nothing is recorded: it may have been deleted
// or disabled since it was verified. So is a delivery verified with secrets
// the webhook no longer has (ErrStaleMaterial): the cached material is
// dropped, and the caller verifies again.
func (w *Webhooks) Deliver(ctx context.Context, v Verification, pl forge.Payload) (run.DeliveryResult, error) {
	if v.provider == "" || v.projectID == uuid.Nil {
		return run.DeliveryResult{}, domain.Invalid("unverified_delivery", "a delivery must be verified with the webhook's material first")
	}
	p := v.provider
	if pl.Provider != p || pl.DeliveryID == "" {
		return run.DeliveryResult{}, domain.Invalid("invalid_payload", "the payload does not belong to this %s delivery", p)
	}
	res, err := w.queue.Deliver(v.projectID, p, pl, v.sealed)
	if err != nil {
		if errors.Is(err, domain.ErrStaleMaterial) {
			w.seals.Delete(sealKey{v.projectID, p})
		}
		return run.DeliveryResult{}, err
	}
	if w.OnDelivered != nil && res.Outcome != forge.OutcomeQueueFull {
		if err := w.OnDelivered(ctx, v.projectID, pl); err != nil {
			return run.DeliveryResult{}, fmt.Errorf("webhook: fix chain of delivery %s: %w", pl.DeliveryID, err)
		}
	}
	if res.Outcome == forge.OutcomeQueueFull {
		return res, &domain.Error{Kind: domain.ErrWebhookQueueFull, Code: "project_queue_full",
			Message: fmt.Sprintf("the project's queue already holds %d runs; the delivery is recorded as queue_full and will be re-evaluated when it is sent again", run.MaxQueued)}
	}
	return res, nil
}

// MaxListedDeliveries bounds one page of the ledger.
const MaxListedDeliveries = 200

// ListDeliveries returns the latest deliveries of a project of the caller's
// organisation, newest first; provider "" means every provider.
func (w *Webhooks) ListDeliveries(ctx context.Context, pr *domain.Principal, projectID uuid.UUID, providerName string, limit int) ([]run.Delivery, error) {
	var p forge.Provider
	if providerName != "" {
		var err error
		if p, err = parseProvider(providerName); err != nil {
			return nil, err
		}
	}
	if _, err := project.NewProjects(w.s).Get(ctx, pr.OrgID, projectID); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > MaxListedDeliveries {
		limit = MaxListedDeliveries
	}
	out := []run.Delivery{}
	q := w.s.DB.NewSelect().Model(&out).Where("project_id = ?", projectID)
	if p != "" {
		q = q.Where("provider = ?", string(p))
	}
	if err := q.Order("received_at DESC", "delivery_id").Limit(int64(limit)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	return out, nil
}

// DeleteExpiredDeliveries removes ledger rows received more than
// DeliveryRetention ago, returning how many went, and refusal counters as
// old. It takes no project lock:
// a row old enough to delete is no longer consulted for dedupe.
func (w *Webhooks) DeleteExpiredDeliveries(ctx context.Context) (int64, error) {
	res, err := w.s.DB.NewRaw(`DELETE FROM project_webhook_deliveries WHERE received_at < ?`, w.s.Now().Add(-run.DeliveryRetention)).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("delete expired deliveries: %w", err)
	}
	// The refusal counters (see CountRefusal) live as long as the ledger.
	if _, err := w.s.DB.NewRaw(`DELETE FROM webhook_refusals WHERE hour < ?`, w.s.Now().Add(-run.DeliveryRetention)).Exec(ctx); err != nil {
		return 0, fmt.Errorf("delete expired refusals: %w", err)
	}
	return res.RowsAffected()
}

// Forget drops this process's cached material of a project's webhooks (the
// project was deleted, docs/erasure.md); other processes' copies are
// refused under the project's lock by Deliver.
func (w *Webhooks) Forget(projectID uuid.UUID) {
	for _, p := range Providers {
		w.seals.Delete(sealKey{projectID, p})
	}
}
