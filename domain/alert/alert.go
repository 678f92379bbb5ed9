// Package alert tells a team when something needs them: destinations per
// organisation (a Standard Webhooks signed webhook, a Slack-compatible
// incoming webhook, or e-mail to a few addresses through the operator's
// SMTP server, docs/mail.md), rules per project, and the delivery of each alert as a
// River job enqueued in the transaction of the change that caused it.
//
// The base package only names the causes (domain/alert_hook.go); this
// package decides who receives them (Jobs), builds and signs the messages,
// bounds storms and keeps the delivery log (deliver.go).
package alert

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"anvil/domain"
	"anvil/domain/mail"
	"anvil/domain/run"
)

// Destination kinds.
const (
	KindWebhook = "webhook"
	KindSlack   = "slack"
	KindEmail   = "email"
)

// KindTest is the kind of a test alert.
const KindTest = "test"

// DeliverArgs is one alert to one destination. Uniqueness by (destination,
// kind, incident or run) for 10 minutes is the storm bound "at most one
// alert per incident per kind per 10 minutes"; test alerts carry a fresh
// message id and are never folded into each other.
type DeliverArgs struct {
	DestinationID uuid.UUID `json:"destination_id" river:"unique"`
	Alert         string    `json:"kind" river:"unique"`
	OrgID         uuid.UUID `json:"org_id"`
	ProjectID     uuid.UUID `json:"project_id,omitzero"`
	IncidentID    uuid.UUID `json:"incident_id,omitzero" river:"unique"`
	RunID         uuid.UUID `json:"run_id,omitzero" river:"unique"`
	MessageID     string    `json:"message_id"`
	Nonce         string    `json:"nonce,omitempty" river:"unique"` // test alerts only
}

// Kind is River's job kind.
func (DeliverArgs) Kind() string { return "deliver_alert" }

// StormWindow is how long one incident's alert of one kind is not repeated.
const StormWindow = 10 * time.Minute

// RetryFor is how long a delivery is retried.
const RetryFor = 24 * time.Hour

// InsertOpts puts deliveries on the alerts queue, with a day of retries,
// unique per storm window.
func (DeliverArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: MaxAttempts,
		UniqueOpts: river.UniqueOpts{ByArgs: true, ByPeriod: StormWindow}}
}

// DigestArgs sends the digest of the alerts folded for one destination in
// one minute; unique per destination per minute.
type DigestArgs struct {
	DestinationID uuid.UUID `json:"destination_id"`
}

// Kind is River's job kind.
func (DigestArgs) Kind() string { return "alert_digest" }

// InsertOpts makes one digest per destination per minute.
func (DigestArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: MaxAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true, ByPeriod: time.Minute}}
}

// Queue is the River queue of deliveries: their own, so that a failing
// destination never holds up a run or any other job.
const Queue = "alerts"

// QueueConfig is the alerts queue of a worker process: ten deliveries at
// once, so that a few slow destinations (10 s timeouts) do not hold the
// others up, fetched at most five times a second, so that a burst of
// alerts (at most 50/s per process) leaves the database to the ingest.
var QueueConfig = river.QueueConfig{MaxWorkers: 10, FetchCooldown: 200 * time.Millisecond, FetchPollInterval: time.Second}

// MaxAttempts bounds the attempts: enough for the back-off to reach the
// end of the 24 h window, which ends them.
const MaxAttempts = 60

// Service is the alerts capability on one store.
type Service struct {
	s         *domain.Store
	PublicURL string
	HTTP      *http.Client
	Now       func() time.Time

	mu    sync.Mutex
	cache map[uuid.UUID]*orgRules
	// TTL is how long one process trusts its copy of an organisation's
	// destinations and rules; writes in this process drop it at once.
	TTL time.Duration
	// PerMinute is how many alerts one destination receives in a minute;
	// the rest of that minute fold into one digest (ANVIL_ALERTS_PER_MINUTE).
	PerMinute int
	// Resolver resolves destination hosts when they are saved; nil means
	// net.DefaultResolver.
	Resolver     Resolver
	allowPrivate atomic.Bool
	// Mail sends e-mail destinations' alerts; nil when the operator set
	// no SMTP server (ANVIL_SMTP_URL), and then no e-mail destination can
	// be added.
	Mail *mail.Mailer
}

// New builds the alert service on s and installs its hooks on s and q. The
// wiring (domain/wiring) builds it once and passes it to the web tier and
// the workers: a second service on the same store would install its hooks
// twice, so nothing else calls New.
func New(s *domain.Store, q *run.Queue, publicURL string) *Service {
	a := &Service{s: s, PublicURL: publicURL, Now: s.Now, TTL: 5 * time.Second, PerMinute: PerMinute,
		cache: map[uuid.UUID]*orgRules{}}
	a.HTTP = a.newHTTPClient()
	s.UseAlerts(a)
	if s.Pool != nil {
		// An insert-only client on River's pgx driver: the feed's fast
		// path holds its transaction on a pgx connection.
		if c, err := river.NewClient(riverpgxv5.New(s.Pool), &river.Config{}); err == nil {
			s.UseFastJobs(fastInserter{c})
		}
	}
	q.OnTerminal(a.runTerminal)
	return a
}

// Destination is a destination as it leaves the domain.
type Destination struct {
	ID      uuid.UUID `json:"destination_id" bun:"id"`
	Name    string    `json:"name" bun:"name"`
	Kind    string    `json:"kind" bun:"kind"`
	URLHint string    `json:"url" bun:"url_hint"`
	// Recipients are an e-mail destination's addresses.
	Recipients   []string   `json:"recipients,omitempty" bun:"recipients,array"`
	FailingSince *time.Time `json:"failing_since" bun:"failing_since"`
	LastSuccess  *time.Time `json:"last_success" bun:"last_success"`
	Failing      bool       `json:"failing" bun:"-"`
	CreatedAt    time.Time  `json:"created_at" bun:"created_at"`
}

func (a *Service) finish(d *Destination) {
	d.Failing = d.FailingSince != nil && a.Now().Sub(*d.FailingSince) >= RetryFor
}

// Input is what a person sets on a destination.
type Input struct {
	Name *string `json:"name"`
	Kind *string `json:"kind"`
	URL  *string `json:"url"`
	// Recipients are an e-mail destination's 1 to 20 addresses.
	Recipients *[]string `json:"recipients"`
}

// checkRecipients validates an e-mail destination's addresses, and that
// the server can send mail at all.
func (a *Service) checkRecipients(list []string) ([]string, error) {
	if a.Mail == nil {
		return nil, domain.Invalid("mail_not_configured", "this server sends no e-mail: the operator sets ANVIL_SMTP_URL and ANVIL_MAIL_FROM (docs/mail.md)")
	}
	out, err := mail.CheckAddresses(list)
	if err != nil {
		return nil, domain.Invalid("invalid_recipients", "recipients: %v", err)
	}
	return out, nil
}

func checkName(n string) (string, error) {
	n = strings.TrimSpace(n)
	if n == "" || len(n) > 100 {
		return "", domain.Invalid("invalid_name", "name is required, at most 100 characters")
	}
	return n, nil
}

// checkURL accepts an absolute http(s) URL without credentials.
func checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, domain.Invalid("invalid_url", "url must be an absolute http:// or https:// URL")
	}
	if u.User != nil {
		return nil, domain.Invalid("invalid_url", "url must not carry a user or password")
	}
	if len(raw) > 2000 {
		return nil, domain.Invalid("invalid_url", "url is longer than 2000 characters")
	}
	return u, nil
}

// hint is what may be shown of a URL: its scheme and host (the path of an
// incoming webhook is its secret).
func hint(u *url.URL) string { return u.Scheme + "://" + u.Host + "/…" }

func aad(id uuid.UUID, what string) []byte {
	return []byte("alert_destination:" + id.String() + ":" + what)
}

// NewSecret is a Standard Webhooks secret: whsec_ and 24 random bytes.
func NewSecret() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

func admin(p *domain.Principal) error {
	if !p.AtLeast(domain.RoleAdmin) {
		return domain.Forbidden("you are a %s in this organisation; managing alerts needs the admin role or higher", p.Role)
	}
	return nil
}

// Create adds a destination. For a webhook it returns the signing secret,
// shown this once.
func (a *Service) Create(ctx context.Context, p *domain.Principal, in Input) (*Destination, string, error) {
	if err := admin(p); err != nil {
		return nil, "", err
	}
	if in.Kind != nil && *in.Kind == KindEmail {
		return a.createEmail(ctx, p, in)
	}
	if in.Name == nil || in.Kind == nil || in.URL == nil {
		return nil, "", domain.Invalid("invalid_destination", "name, kind and url are required")
	}
	name, err := checkName(*in.Name)
	if err != nil {
		return nil, "", err
	}
	kind := *in.Kind
	if kind != KindWebhook && kind != KindSlack {
		return nil, "", domain.Invalid("invalid_kind", "kind must be webhook, slack or email")
	}
	if in.Recipients != nil {
		return nil, "", domain.Invalid("invalid_destination", "recipients are for kind email; a %s destination has a url", kind)
	}
	u, err := checkURL(*in.URL)
	if err != nil {
		return nil, "", err
	}
	if err := a.checkAddress(ctx, u); err != nil {
		return nil, "", err
	}
	id := uuid.New()
	urlEnc, err := a.s.Keys.Seal([]byte(u.String()), aad(id, "url"))
	if err != nil {
		return nil, "", fmt.Errorf("alerts: seal url: %w", err)
	}
	var sec, secEnc string
	if kind == KindWebhook {
		sec = NewSecret()
		if secEnc, err = a.s.Keys.Seal([]byte(sec), aad(id, "secret")); err != nil {
			return nil, "", fmt.Errorf("alerts: seal secret: %w", err)
		}
	}
	err = a.s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewRaw(`INSERT INTO alert_destinations (id, org_id, name, kind, url_enc, url_hint, secret_enc, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, id, p.OrgID, name, kind, urlEnc, hint(u), secEnc, a.Now(), a.Now()).Exec(ctx); err != nil {
			if strings.Contains(err.Error(), "23505") || strings.Contains(err.Error(), "duplicate key") {
				return domain.Conflict("name_taken", "a destination named %q exists already", name)
			}
			return fmt.Errorf("alerts: create destination: %w", err)
		}
		return domain.RecordAudit(ctx, tx, p, domain.AuditAlertDestinationCreated, name, map[string]any{"destination_id": id.String(), "name": name, "kind": kind, "url": hint(u)})
	})
	if err != nil {
		return nil, "", err
	}
	a.forget(p.OrgID)
	d, err := a.Get(ctx, p, id)
	return d, sec, err
}

// createEmail adds an e-mail destination: a name and its recipients, no
// URL and no secret.
func (a *Service) createEmail(ctx context.Context, p *domain.Principal, in Input) (*Destination, string, error) {
	if in.Name == nil || in.Recipients == nil {
		return nil, "", domain.Invalid("invalid_destination", "name and recipients are required for kind email")
	}
	if in.URL != nil && *in.URL != "" {
		return nil, "", domain.Invalid("invalid_destination", "an email destination has recipients, not a url")
	}
	name, err := checkName(*in.Name)
	if err != nil {
		return nil, "", err
	}
	to, err := a.checkRecipients(*in.Recipients)
	if err != nil {
		return nil, "", err
	}
	id := uuid.New()
	err = a.s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewRaw(`INSERT INTO alert_destinations (id, org_id, name, kind, url_enc, url_hint, recipients, created_at, updated_at)
			VALUES (?, ?, ?, ?, '', '', ?, ?, ?)`, id, p.OrgID, name, KindEmail, pgdialect.Array(to), a.Now(), a.Now()).Exec(ctx); err != nil {
			if strings.Contains(err.Error(), "23505") || strings.Contains(err.Error(), "duplicate key") {
				return domain.Conflict("name_taken", "a destination named %q exists already", name)
			}
			return fmt.Errorf("alerts: create destination: %w", err)
		}
		return domain.RecordAudit(ctx, tx, p, domain.AuditAlertDestinationCreated, name, map[string]any{"destination_id": id.String(), "name": name, "kind": KindEmail, "recipients": to})
	})
	if err != nil {
		return nil, "", err
	}
	a.forget(p.OrgID)
	d, err := a.Get(ctx, p, id)
	return d, "", err
}

// List returns the organisation's destinations.
func (a *Service) List(ctx context.Context, p *domain.Principal) ([]Destination, error) {
	var ds []Destination
	err := a.s.DB.NewRaw(`SELECT id, name, kind, url_hint, recipients, failing_since, last_success, created_at FROM alert_destinations
		WHERE org_id = ? ORDER BY name`, p.OrgID).Scan(ctx, &ds)
	if err != nil {
		return nil, fmt.Errorf("alerts: list destinations: %w", err)
	}
	for i := range ds {
		a.finish(&ds[i])
	}
	if ds == nil {
		ds = []Destination{}
	}
	return ds, nil
}

// Get returns one destination of the caller's organisation.
func (a *Service) Get(ctx context.Context, p *domain.Principal, id uuid.UUID) (*Destination, error) {
	var ds []Destination
	if err := a.s.DB.NewRaw(`SELECT id, name, kind, url_hint, recipients, failing_since, last_success, created_at FROM alert_destinations
		WHERE org_id = ? AND id = ?`, p.OrgID, id).Scan(ctx, &ds); err != nil {
		return nil, fmt.Errorf("alerts: get destination: %w", err)
	}
	if len(ds) == 0 {
		return nil, domain.NotFound("destination")
	}
	a.finish(&ds[0])
	return &ds[0], nil
}

// Update renames a destination or points it at another URL.
func (a *Service) Update(ctx context.Context, p *domain.Principal, id uuid.UUID, in Input) (*Destination, error) {
	if err := admin(p); err != nil {
		return nil, err
	}
	if in.Kind != nil {
		return nil, domain.Invalid("invalid_kind", "a destination's kind cannot change; add a new destination")
	}
	if in.Name == nil && in.URL == nil && in.Recipients == nil {
		return nil, domain.Invalid("invalid_destination", "nothing to change: give name, url or recipients")
	}
	was, err := a.Get(ctx, p, id)
	if err != nil {
		return nil, err
	}
	var to []string
	switch {
	case was.Kind == KindEmail && in.URL != nil:
		return nil, domain.Invalid("invalid_destination", "an email destination has recipients, not a url")
	case was.Kind != KindEmail && in.Recipients != nil:
		return nil, domain.Invalid("invalid_destination", "recipients are for kind email; a %s destination has a url", was.Kind)
	case in.Recipients != nil:
		if to, err = a.checkRecipients(*in.Recipients); err != nil {
			return nil, err
		}
	}
	var u *url.URL
	if in.URL != nil {
		var err error
		if u, err = checkURL(*in.URL); err != nil {
			return nil, err
		}
		if err := a.checkAddress(ctx, u); err != nil {
			return nil, err
		}
	}
	err = a.s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		detail := map[string]any{"destination_id": id.String(), "kind": was.Kind}
		target := was.Name
		if in.Name != nil {
			name, err := checkName(*in.Name)
			if err != nil {
				return err
			}
			if _, err := tx.NewRaw(`UPDATE alert_destinations SET name = ?, updated_at = ? WHERE id = ?`, name, a.Now(), id).Exec(ctx); err != nil {
				if strings.Contains(err.Error(), "23505") || strings.Contains(err.Error(), "duplicate key") {
					return domain.Conflict("name_taken", "a destination named %q exists already", name)
				}
				return fmt.Errorf("alerts: rename destination: %w", err)
			}
			if name != was.Name {
				detail["name"], detail["from_name"] = name, was.Name
			}
			target = name
		}
		if u != nil {
			enc, err := a.s.Keys.Seal([]byte(u.String()), aad(id, "url"))
			if err != nil {
				return fmt.Errorf("alerts: seal url: %w", err)
			}
			if _, err := tx.NewRaw(`UPDATE alert_destinations SET url_enc = ?, url_hint = ?, failing_since = NULL, updated_at = ? WHERE id = ?`,
				enc, hint(u), a.Now(), id).Exec(ctx); err != nil {
				return fmt.Errorf("alerts: change url: %w", err)
			}
			detail["url"], detail["from_url"] = hint(u), was.URLHint
		}
		if to != nil {
			if _, err := tx.NewRaw(`UPDATE alert_destinations SET recipients = ?, failing_since = NULL, updated_at = ? WHERE id = ?`,
				pgdialect.Array(to), a.Now(), id).Exec(ctx); err != nil {
				return fmt.Errorf("alerts: change recipients: %w", err)
			}
			detail["recipients"], detail["from_recipients"] = to, was.Recipients
		}
		return domain.RecordAudit(ctx, tx, p, domain.AuditAlertDestinationUpdated, target, detail)
	})
	if err != nil {
		return nil, err
	}
	a.forget(p.OrgID)
	return a.Get(ctx, p, id)
}

// Delete removes a destination and its log; deliveries still queued for it
// end without sending.
func (a *Service) Delete(ctx context.Context, p *domain.Principal, id uuid.UUID) error {
	if err := admin(p); err != nil {
		return err
	}
	err := a.s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var gone []struct {
			Name    string `bun:"name"`
			Kind    string `bun:"kind"`
			URLHint string `bun:"url_hint"`
		}
		if err := tx.NewRaw(`DELETE FROM alert_destinations WHERE org_id = ? AND id = ? RETURNING name, kind, url_hint`, p.OrgID, id).Scan(ctx, &gone); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("alerts: delete destination: %w", err)
		}
		if len(gone) == 0 {
			return domain.NotFound("destination")
		}
		return domain.RecordAudit(ctx, tx, p, domain.AuditAlertDestinationDeleted, gone[0].Name,
			map[string]any{"destination_id": id.String(), "name": gone[0].Name, "kind": gone[0].Kind, "url": gone[0].URLHint})
	})
	if err == nil {
		a.forget(p.OrgID)
	}
	return err
}

// Test enqueues a test alert to a destination.
func (a *Service) Test(ctx context.Context, p *domain.Principal, id uuid.UUID) (string, error) {
	if err := admin(p); err != nil {
		return "", err
	}
	d, err := a.Get(ctx, p, id)
	if err != nil {
		return "", err
	}
	msg := "msg_" + uuid.NewString()
	args := DeliverArgs{DestinationID: id, Alert: KindTest, OrgID: p.OrgID, MessageID: msg, Nonce: msg}
	err = a.s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := a.s.EnqueueJobsTx(ctx, tx, []river.InsertManyParams{{Args: args}}); err != nil {
			return err
		}
		return domain.RecordAudit(ctx, tx, p, domain.AuditAlertDestinationTested, d.Name,
			map[string]any{"destination_id": id.String(), "name": d.Name, "kind": d.Kind, "url": d.URLHint, "message_id": msg})
	})
	return msg, err
}

// Delivery is one line of the delivery log.
type Delivery struct {
	ID         int64  `json:"id" bun:"id"`
	MessageID  string `json:"message_id" bun:"message_id"`
	Kind       string `json:"kind" bun:"kind"`
	Status     string `json:"status" bun:"status"`
	StatusCode *int   `json:"status_code" bun:"status_code"`
	LatencyMS  *int   `json:"latency_ms" bun:"latency_ms"`
	Error      string `json:"error" bun:"error"`
	// Answer is what an SMTP server said when it accepted an e-mail.
	Answer  string    `json:"answer" bun:"answer"`
	Attempt int       `json:"attempt" bun:"attempt"`
	At      time.Time `json:"at" bun:"created_at"`
}

// Deliveries returns the last 50 deliveries to a destination, newest first.
func (a *Service) Deliveries(ctx context.Context, p *domain.Principal, id uuid.UUID) ([]Delivery, error) {
	if _, err := a.Get(ctx, p, id); err != nil {
		return nil, err
	}
	ds := []Delivery{}
	if err := a.s.DB.NewRaw(`SELECT id, message_id, kind, status, status_code, latency_ms, error, answer, attempt, created_at
		FROM alert_deliveries WHERE destination_id = ? ORDER BY id DESC LIMIT 50`, id).Scan(ctx, &ds); err != nil {
		return nil, fmt.Errorf("alerts: deliveries: %w", err)
	}
	return ds, nil
}

type fastInserter struct{ c *river.Client[pgx.Tx] }

func (f fastInserter) InsertManyTx(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams) error {
	_, err := f.c.InsertManyTx(ctx, tx, params)
	return err
}
