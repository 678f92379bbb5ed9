package card

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/internal/dbutil"
	"anvil/domain/internal/tokens"
)

// Cards owns the production cards of the portfolio dashboard
// (docs/architecture.md, "Incidents and cards"):
// one per project, replaced whole — from the incident store, or, once a
// project's dashboard config is external, by the producer holding its token.
type Cards struct{ s *domain.Store }

// NewCards builds the service.
func NewCards(s *domain.Store) *Cards { return &Cards{s: s} }

// Card states and sources.
const (
	CardOpen          = "OPEN"
	CardInvestigating = "INVESTIGATING"
	CardMitigated     = "MITIGATED"
	CardResolved      = "RESOLVED"

	CardSourceFeed     = "anvil-feed"
	CardSourceExternal = "external"

	// DashboardTokenPrefix starts an external producer's token.
	DashboardTokenPrefix = "anv_dsh_"
)

// CardStateOf maps an incident status onto the card (docs/architecture.md,
// "Incidents and cards");
// ok is false for CLOSED and IGNORED, which are not on the card at all.
// NEEDS_HUMAN is OPEN, never MITIGATED: nothing has been mitigated, the
// machine is waiting for a person.
func CardStateOf(status string) (state string, ok bool) {
	switch status {
	case domain.IncidentObserved, domain.IncidentTriaged, domain.IncidentWaitingApproval, domain.IncidentQueued, domain.IncidentNeedsHuman:
		return CardOpen, true
	case domain.IncidentRunning, domain.IncidentPROpen:
		return CardInvestigating, true
	}
	return "", false
}

// cardStateSQL is CardStateOf as a SQL CASE over i.status, built from the
// Go mapping so the two cannot disagree.
var cardStateSQL = func() string {
	var b strings.Builder
	b.WriteString("CASE i.status")
	for _, st := range domain.IncidentStatuses {
		if cs, ok := CardStateOf(st); ok {
			fmt.Fprintf(&b, " WHEN '%s' THEN '%s'", st, cs)
		}
	}
	b.WriteString(" END")
	return b.String()
}()

var offCardSQL = func() string {
	var off []string
	for _, st := range domain.IncidentStatuses {
		if _, ok := CardStateOf(st); !ok {
			off = append(off, "'"+st+"'")
		}
	}
	return strings.Join(off, ", ")
}()

// CardIncident is one incident on a card.
type CardIncident struct {
	ID    string    `json:"id"`
	Title string    `json:"title"`
	State string    `json:"state"`
	Since time.Time `json:"since"`
}

// Card is a project's production card as the API returns it.
type Card struct {
	Source    string         `json:"source"`
	Incidents []CardIncident `json:"incidents"`
	External  bool           `json:"external"`
	// ConfigID names the external producer's config (its ingest URL), when
	// the card is handed to one.
	ConfigID  *uuid.UUID `json:"config_id,omitempty"`
	UpdatedAt *time.Time `json:"updated_at"`
}

// A project's card changes are counted in card_changes (migration
// 20261203000050): every change that must reach the card bumps version in
// its own transaction, and queued says that a refresh job is responsible
// for catching up with it. A refresh writes the card from one snapshot that
// includes version, then checks version again with a statement that waits
// for every transaction that has bumped it; while it moved, the refresh
// reads again. So a change can never be left to a refresh that read the
// store before the change committed — the race a job's uniqueness alone
// lost (a job that existed when the change enqueued, and started before the
// change committed).

// markCardChangedSQL bumps a project's version and makes a refresh
// responsible; it returns whether one already was.
const markCardChangedSQL = `WITH old AS (SELECT queued FROM card_changes WHERE project_id = ? FOR UPDATE)
	INSERT INTO card_changes AS c (project_id, version, queued, changed_at) VALUES (?, 1, true, ?)
	ON CONFLICT (project_id) DO UPDATE SET version = c.version + 1, queued = true, changed_at = EXCLUDED.changed_at
	RETURNING COALESCE((SELECT queued FROM old), false)`

// BumpVersionSQL counts a change without asking for a refresh (the
// feed asks after its commit, see QueueRefresh). $1 the project, $2
// the time.
const BumpVersionSQL = `INSERT INTO card_changes AS c (project_id, version, changed_at) VALUES ($1, 1, $2)
	ON CONFLICT (project_id) DO UPDATE SET version = c.version + 1, changed_at = EXCLUDED.changed_at`

// EnqueueRefresh records a change of the project's card in tx and,
// unless a refresh is already responsible for the project, inserts one:
// one job per project however many changes arrive while it waits or runs
// (the job reads again while changes keep committing).
func EnqueueRefresh(ctx context.Context, s *domain.Store, tx bun.Tx, projectID uuid.UUID) error {
	var was bool
	if err := tx.NewRaw(markCardChangedSQL, projectID, projectID, s.Now()).Scan(ctx, &was); err != nil {
		return fmt.Errorf("domain: count the card change of %s: %w", projectID, err)
	}
	if was {
		return nil
	}
	return s.InsertJob(ctx, tx, domain.RefreshCardArgs{ProjectID: projectID})
}

// QueueRefresh inserts the project's refresh, after changes have been
// counted (BumpVersionSQL) and committed, unless one is responsible already
// or the card has read every change.
func QueueRefresh(ctx context.Context, s *domain.Store, projectID uuid.UUID) error {
	return s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var ids []uuid.UUID
		err := tx.NewRaw(`UPDATE card_changes SET queued = true WHERE project_id = ? AND NOT queued AND version > refreshed
			RETURNING project_id`, projectID).Scan(ctx, &ids)
		if err != nil || len(ids) == 0 {
			return err
		}
		return s.InsertJob(ctx, tx, domain.RefreshCardArgs{ProjectID: projectID})
	})
}

// forceCardRefresh makes a refresh responsible for the project and inserts
// it, whatever card_changes says (the sweep's repair).
func forceCardRefresh(ctx context.Context, s *domain.Store, tx bun.Tx, projectID uuid.UUID) error {
	if _, err := tx.NewRaw(`INSERT INTO card_changes AS c (project_id, queued) VALUES (?, true)
		ON CONFLICT (project_id) DO UPDATE SET queued = true`, projectID).Exec(ctx); err != nil {
		return fmt.Errorf("domain: queue the card refresh of %s: %w", projectID, err)
	}
	return s.InsertJob(ctx, tx, domain.RefreshCardArgs{ProjectID: projectID})
}

// RefreshGap is the least time between two reads of one project's
// store by a refresh, and between two request rounds of the feed: a steady
// stream of changes would otherwise replace the card as fast as the
// database answers, each time with nearly the same snapshot; with the gap
// a busy project's card is replaced at most ten times a second and still
// follows its last change within the gap.
const RefreshGap = 100 * time.Millisecond

// maxRefreshRounds bounds one refresh job; a project that keeps changing
// gets a new job to continue with.
const maxRefreshRounds = 20

// Refresh replaces a project's card from the incident store: every incident
// not CLOSED or IGNORED, mapped onto the card's states, oldest first — the
// empty list included, so the last close clears the card. A card owned by
// an external producer is left alone. A project that no longer exists has
// no card to feed: not an error, a DEBUG line.
//
// Each round is one statement (the snapshot with the project's change
// version, the mapping and the upsert), so the card of a project with a
// thousand open incidents is replaced in a few milliseconds. After it, the
// version is read again, waiting for the changes being committed; while it
// moved, the refresh reads again (rounds RefreshGap apart), and hands
// the project to a new job after maxRefreshRounds.
func (c *Cards) Refresh(ctx context.Context, projectID uuid.UUID) error {
	for round := 1; ; round++ {
		var read int64
		if err := c.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) (err error) {
			read, err = c.refreshTx(ctx, tx, projectID)
			return err
		}); err != nil {
			return err
		}
		current, err := c.caughtUp(ctx, projectID, read, round >= maxRefreshRounds)
		if err != nil || current {
			return err
		}
		t := time.NewTimer(RefreshGap)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// caughtUp records that the card has read version read and reports
// whether that is still the project's version. The UPDATE waits for every
// transaction that has bumped the version and not yet committed. When it
// moved and handOver is set, a new job continues.
func (c *Cards) caughtUp(ctx context.Context, projectID uuid.UUID, read int64, handOver bool) (bool, error) {
	current := true
	err := c.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var now []int64
		if err := tx.NewRaw(`UPDATE card_changes SET queued = queued AND version <> ?, refreshed = GREATEST(refreshed, ?)
			WHERE project_id = ? RETURNING version`, read, read, projectID).Scan(ctx, &now); err != nil {
			return fmt.Errorf("cards: check the version of %s: %w", projectID, err)
		}
		current = len(now) == 0 || now[0] == read
		if current || !handOver {
			return nil
		}
		current = true // the new job carries on
		return forceCardRefresh(ctx, c.s, tx, projectID)
	})
	return current, err
}

// refreshTx replaces the card in tx and returns the change version the
// snapshot it read holds.
func (c *Cards) refreshTx(ctx context.Context, tx bun.Tx, projectID uuid.UUID) (int64, error) {
	var rows []struct {
		OrgID   *uuid.UUID `bun:"org_id"`
		Version int64      `bun:"version"`
	}
	err := tx.NewRaw(`WITH v AS (SELECT COALESCE((SELECT version FROM card_changes WHERE project_id = ?), 0) AS version),
		up AS (INSERT INTO project_cards AS c (project_id, org_id, source, incidents, updated_at)
		SELECT p.id, p.org_id, ?,
		       COALESCE((SELECT jsonb_agg(jsonb_build_object('id', i.id, 'title', i.title, 'state', `+cardStateSQL+`,
		                     'since', to_char(i.first_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'))
		                  ORDER BY i.first_seen, i.id)
		                 FROM incidents i WHERE i.project_id = p.id AND i.status NOT IN (`+offCardSQL+`)), '[]'::jsonb),
		       ?
		FROM `+domain.LiveProjects+` p WHERE p.id = ?
		ON CONFLICT (project_id) DO UPDATE SET source = EXCLUDED.source, incidents = EXCLUDED.incidents, updated_at = EXCLUDED.updated_at
		WHERE NOT c.external
		RETURNING c.org_id)
		SELECT (SELECT org_id FROM up) AS org_id, v.version FROM v`, projectID, CardSourceFeed, c.s.Now(), projectID).Scan(ctx, &rows)
	if err != nil {
		return 0, fmt.Errorf("cards: refresh %s: %w", projectID, err)
	}
	if len(rows) == 0 || rows[0].OrgID == nil {
		c.s.Log.Debug("cards: nothing to refresh (project deleted, or the card is owned by an external producer)", "project_id", projectID)
		if len(rows) == 0 {
			return 0, nil
		}
		return rows[0].Version, nil
	}
	return rows[0].Version, publishCard(ctx, tx, *rows[0].OrgID, projectID)
}

func publishCard(ctx context.Context, tx bun.IDB, orgID, projectID uuid.UUID) error {
	b, _ := json.Marshal(map[string]any{"kind": "card", "org_id": orgID, "project_id": projectID})
	return domain.Notify(ctx, tx, string(b))
}

type cardRow struct {
	bun.BaseModel `bun:"table:project_cards"`
	ProjectID     uuid.UUID       `bun:"project_id,pk,type:uuid"`
	OrgID         uuid.UUID       `bun:"org_id,type:uuid"`
	ConfigID      uuid.UUID       `bun:"config_id,type:uuid"`
	Source        string          `bun:"source"`
	Incidents     json.RawMessage `bun:"incidents,type:jsonb"`
	External      bool            `bun:"external"`
	TokenPrefix   *string         `bun:"token_prefix"`
	TokenHash     []byte          `bun:"token_hash"`
	UpdatedAt     time.Time       `bun:"updated_at"`
}

func (r *cardRow) card() (*Card, error) {
	out := &Card{Source: r.Source, External: r.External, Incidents: []CardIncident{}}
	if r.External {
		id := r.ConfigID
		out.ConfigID = &id
	}
	u := r.UpdatedAt.UTC()
	out.UpdatedAt = &u
	if err := json.Unmarshal(r.Incidents, &out.Incidents); err != nil {
		return nil, fmt.Errorf("cards: decode card of %s: %w", r.ProjectID, err)
	}
	return out, nil
}

// Get returns a project's card; a project whose card was never written
// shows the incident store's empty card.
func (c *Cards) Get(ctx context.Context, orgID, projectID uuid.UUID) (*Card, error) {
	var exists bool
	if err := c.s.DB.NewRaw(`SELECT EXISTS (SELECT 1 FROM `+domain.LiveProjects+` p WHERE id = ? AND org_id = ?)`, projectID, orgID).Scan(ctx, &exists); err != nil {
		return nil, fmt.Errorf("cards: project: %w", err)
	}
	if !exists {
		return nil, domain.NotFound("project")
	}
	cards, err := c.ForProjects(ctx, []uuid.UUID{projectID})
	if err != nil {
		return nil, err
	}
	return cards[projectID], nil
}

// ForProjects returns the cards of many projects (the dashboard), an empty
// anvil-feed card for each project without one.
func (c *Cards) ForProjects(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]*Card, error) {
	out := make(map[uuid.UUID]*Card, len(ids))
	for _, id := range ids {
		out[id] = &Card{Source: CardSourceFeed, Incidents: []CardIncident{}}
	}
	if len(ids) == 0 {
		return out, nil
	}
	var rows []cardRow
	if err := c.s.DB.NewSelect().Model(&rows).Where("project_id IN (?)", bun.List(ids)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("cards: read: %w", err)
	}
	for i := range rows {
		card, err := rows[i].card()
		if err != nil {
			return nil, err
		}
		out[rows[i].ProjectID] = card
	}
	return out, nil
}

// DashboardConfig is the answer to setting a project's dashboard config.
// Token is set only when a new external token was just issued: it exists in
// plaintext in this value and nowhere else.
type DashboardConfig struct {
	ConfigID uuid.UUID `json:"config_id"`
	External bool      `json:"external"`
	Token    string    `json:"token,omitempty"`
}

// SetExternal hands a project's card to an external producer (a fresh
// token each time; an earlier one stops working) or back to the incident
// store, which replaces the card at once.
func (c *Cards) SetExternal(ctx context.Context, pr *domain.Principal, projectID uuid.UUID, external bool) (DashboardConfig, error) {
	var out DashboardConfig
	if err := domain.RequireRole(pr, domain.RoleAdmin); err != nil {
		return out, err
	}
	err := c.s.WithProject(ctx, projectID, func(ctx context.Context, tx bun.Tx, p *domain.Project) error {
		if p.OrgID != pr.OrgID {
			return domain.NotFound("project")
		}
		var prefix *string
		var hash []byte
		if external {
			tok, lookup, h := tokens.New(DashboardTokenPrefix)
			out.Token, prefix, hash = tok, &lookup, h
		}
		source := CardSourceFeed
		if external {
			source = CardSourceExternal
		}
		err := tx.NewRaw(`INSERT INTO project_cards AS c (project_id, org_id, source, external, token_prefix, token_hash, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (project_id) DO UPDATE SET external = EXCLUDED.external, token_prefix = EXCLUDED.token_prefix,
				token_hash = EXCLUDED.token_hash,
				source = CASE WHEN EXCLUDED.external AND NOT c.external THEN EXCLUDED.source ELSE c.source END,
				incidents = CASE WHEN EXCLUDED.external AND NOT c.external THEN '[]'::jsonb ELSE c.incidents END
			RETURNING config_id`, p.ID, p.OrgID, source, external, prefix, hash, c.s.Now()).Scan(ctx, &out.ConfigID)
		if err != nil {
			return fmt.Errorf("cards: set external: %w", err)
		}
		out.External = external
		if err := domain.RecordAudit(ctx, tx, pr, domain.AuditCardExternal, p.Slug, map[string]any{"external": external}); err != nil {
			return err
		}
		if !external {
			_, err := c.refreshTx(ctx, tx, p.ID)
			return err
		}
		return publishCard(ctx, tx, p.OrgID, p.ID)
	})
	return out, err
}

// ExternalIncident is one incident as an external producer sends it.
type ExternalIncident struct {
	ID    *string `json:"id"`
	Title *string `json:"title"`
	State *string `json:"state"`
	Since *string `json:"since"`
}

// MaxCardIncidents bounds an external card.
const MaxCardIncidents = 1000

// ValidateExternal checks a producer's incidents; the first problem is a
// 422 naming the element and the field. An incident without since is
// valid: its Since is left zero and its index is in noSince, for
// ReplaceExternal to fill in.
func ValidateExternal(in *[]ExternalIncident) (out []CardIncident, noSince []int, err error) {
	if in == nil {
		return nil, nil, domain.Invalid("missing_incidents", `"incidents" is required: a list of {id, title, state, since} (since may be left out; an empty list clears the card)`)
	}
	if len(*in) > MaxCardIncidents {
		return nil, nil, domain.Invalid("too_many_incidents", "a card holds at most %d incidents; got %d", MaxCardIncidents, len(*in))
	}
	out = make([]CardIncident, 0, len(*in))
	seen := map[string]bool{}
	for i, e := range *in {
		at := func(field string) string { return fmt.Sprintf("incidents[%d].%s", i, field) }
		switch {
		case e.ID == nil || strings.TrimSpace(*e.ID) == "":
			return nil, nil, domain.Invalid("invalid_incident", "%s is required", at("id"))
		case len(*e.ID) > 200:
			return nil, nil, domain.Invalid("invalid_incident", "%s must be at most 200 characters", at("id"))
		case seen[*e.ID]:
			return nil, nil, domain.Invalid("invalid_incident", "%s %q appears twice", at("id"), domain.ClipString(*e.ID, 40))
		case e.Title == nil || strings.TrimSpace(*e.Title) == "":
			return nil, nil, domain.Invalid("invalid_incident", "%s is required", at("title"))
		case len(*e.Title) > 500:
			return nil, nil, domain.Invalid("invalid_incident", "%s must be at most 500 characters", at("title"))
		case e.State == nil:
			return nil, nil, domain.Invalid("invalid_incident", "%s is required (OPEN, INVESTIGATING, MITIGATED or RESOLVED)", at("state"))
		}
		switch *e.State {
		case CardOpen, CardInvestigating, CardMitigated, CardResolved:
		default:
			return nil, nil, domain.Invalid("invalid_incident", "%s must be one of OPEN, INVESTIGATING, MITIGATED, RESOLVED; got %q", at("state"), domain.ClipString(*e.State, 40))
		}
		var since time.Time
		if e.Since == nil {
			noSince = append(noSince, i)
		} else if since, err = time.Parse(time.RFC3339, *e.Since); err != nil {
			return nil, nil, domain.Invalid("invalid_incident", "%s must be an RFC 3339 time such as 2026-09-16T10:11:12Z; got %q", at("since"), domain.ClipString(*e.Since, 40))
		}
		seen[*e.ID] = true
		out = append(out, CardIncident{ID: *e.ID, Title: *e.Title, State: *e.State, Since: since.UTC()})
	}
	return out, noSince, nil
}

// ErrCardAuth is every refusal of the external ingest's credentials —
// unknown tenant, unknown or malformed config, a config that is not
// external, a missing or wrong token — on purpose one answer, so the
// endpoint tells nobody which configs exist.
var ErrCardAuth = domain.NewError(domain.ErrUnauthorized, "unauthorized", "a valid dashboard token is required")

// Producer is an external producer whose credentials held.
type Producer struct {
	projectID, orgID uuid.UUID
	hash             []byte
}

// AuthorizeProducer checks the external ingest's credentials: the tenant
// (organisation slug), the config id and the Bearer token, whose hash is
// compared in constant time (against a dummy when there is no such config).
// Every failure is ErrCardAuth.
func (c *Cards) AuthorizeProducer(ctx context.Context, tenant, configID, bearer string) (*Producer, error) {
	cfg, perr := uuid.Parse(configID)
	_, presented, shapeOK := tokens.Split(DashboardTokenPrefix, bearer)
	var row struct {
		ProjectID uuid.UUID `bun:"project_id"`
		OrgID     uuid.UUID `bun:"org_id"`
		Hash      []byte    `bun:"token_hash"`
	}
	found := false
	if perr == nil {
		err := c.s.DB.NewRaw(`SELECT c.project_id, c.org_id, c.token_hash FROM project_cards c
			JOIN organizations o ON o.id = c.org_id
			WHERE c.config_id = ? AND o.slug = ? AND c.external`, cfg, tenant).Scan(ctx, &row)
		switch {
		case err == nil:
			found = true
		case !dbutil.IsNoRows(err):
			return nil, fmt.Errorf("cards: find config: %w", err)
		}
	}
	if !found {
		dummy := sha256.Sum256([]byte("anvil-no-such-config"))
		row.Hash = dummy[:]
	}
	if !shapeOK {
		presented = make([]byte, sha256.Size)
	}
	if !tokens.HashEqual(row.Hash, presented) || !found || !shapeOK {
		return nil, ErrCardAuth
	}
	return &Producer{projectID: row.ProjectID, orgID: row.OrgID, hash: row.Hash}, nil
}

// ReplaceExternal replaces a producer's card with its incidents (validated
// first; a bad body changes nothing). An incident sent without since gets
// the time the card first listed its id: the since the card already holds
// for that id, or now when the card did not list it — so a producer that
// does not track when an incident began need not invent it, and the time
// does not move on every PUT.
func (c *Cards) ReplaceExternal(ctx context.Context, prod *Producer, in *[]ExternalIncident) error {
	incidents, noSince, err := ValidateExternal(in)
	if err != nil {
		return err
	}
	return c.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if len(noSince) > 0 {
			// The card's row lock orders concurrent PUTs, so the since a
			// later one keeps is the one an earlier one committed.
			var raw string
			err := tx.NewRaw(`SELECT incidents::text FROM project_cards WHERE project_id = ? AND external AND token_hash = ? FOR UPDATE`,
				prod.projectID, prod.hash).Scan(ctx, &raw)
			if dbutil.IsNoRows(err) {
				return ErrCardAuth // handed back (or the token replaced) meanwhile
			}
			if err != nil {
				return fmt.Errorf("cards: read external card: %w", err)
			}
			var stored []CardIncident
			if err := json.Unmarshal([]byte(raw), &stored); err != nil {
				return fmt.Errorf("cards: decode card of %s: %w", prod.projectID, err)
			}
			listed := make(map[string]time.Time, len(stored))
			for _, inc := range stored {
				listed[inc.ID] = inc.Since
			}
			now := c.s.Now().UTC().Truncate(time.Second)
			for _, i := range noSince {
				if since, ok := listed[incidents[i].ID]; ok && !since.IsZero() {
					incidents[i].Since = since.UTC()
				} else {
					incidents[i].Since = now
				}
			}
		}
		raw, err := json.Marshal(incidents)
		if err != nil {
			return err
		}
		res, err := tx.NewRaw(`UPDATE project_cards SET incidents = ?::jsonb, source = ?, updated_at = ?
			WHERE project_id = ? AND external AND token_hash = ?`, string(raw), CardSourceExternal, c.s.Now(), prod.projectID, prod.hash).Exec(ctx)
		if err != nil {
			return fmt.Errorf("cards: replace external: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrCardAuth // handed back (or the token replaced) meanwhile
		}
		return publishCard(ctx, tx, prod.orgID, prod.projectID)
	})
}

// SweepStale enqueues a refresh for every project whose card the incident
// store owns and has not read every change: changes counted but never
// handed to a refresh (a crash between a feed group's commit and its
// request), and changes older than window that a refresh was responsible
// for (its job was lost). It returns how many it enqueued.
func (c *Cards) SweepStale(ctx context.Context, window time.Duration) (int, error) {
	var ids []uuid.UUID
	since := c.s.Now().Add(-window)
	err := c.s.DB.NewRaw(`SELECT cc.project_id FROM card_changes cc
		WHERE cc.version > cc.refreshed AND (NOT cc.queued OR cc.changed_at < ?)
		  AND NOT EXISTS (SELECT 1 FROM project_cards pc WHERE pc.project_id = cc.project_id AND pc.external)
		LIMIT 1000`, since).Scan(ctx, &ids)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	err = c.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		for _, id := range ids {
			if err := forceCardRefresh(ctx, c.s, tx, id); err != nil {
				return err
			}
		}
		return nil
	})
	return len(ids), err
}

// TombstoneTx is the card's part of a project's deletion
// (docs/erasure.md), in the caller's transaction: an external producer's
// token stops working, and open dashboards re-read their cards (the
// project is gone from them).
func TombstoneTx(ctx context.Context, tx bun.IDB, orgID, projectID uuid.UUID) error {
	if _, err := tx.NewRaw(`UPDATE project_cards SET external = false, token_prefix = NULL, token_hash = NULL WHERE project_id = ?`, projectID).Exec(ctx); err != nil {
		return fmt.Errorf("cards: card of deleted project %s: %w", projectID, err)
	}
	return publishCard(ctx, tx, orgID, projectID)
}
