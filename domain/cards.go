package domain

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/uptrace/bun"
)

// Cards owns the production cards of the portfolio dashboard (seed 004):
// one per project, replaced whole — from the incident store, or, once a
// project's dashboard config is external, by the producer holding its token.
type Cards struct{ s *Store }

// NewCards builds the service.
func NewCards(s *Store) *Cards { return &Cards{s: s} }

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

// CardStateOf maps an incident status onto the card (the seed's table);
// ok is false for CLOSED and IGNORED, which are not on the card at all.
// NEEDS_HUMAN is OPEN, never MITIGATED: nothing has been mitigated, the
// machine is waiting for a person.
func CardStateOf(status string) (state string, ok bool) {
	switch status {
	case IncidentObserved, IncidentTriaged, IncidentWaitingApproval, IncidentQueued, IncidentNeedsHuman:
		return CardOpen, true
	case IncidentRunning, IncidentPROpen:
		return CardInvestigating, true
	}
	return "", false
}

// cardStateSQL is CardStateOf as a SQL CASE over i.status, built from the
// Go mapping so the two cannot disagree.
var cardStateSQL = func() string {
	var b strings.Builder
	b.WriteString("CASE i.status")
	for _, st := range IncidentStatuses {
		if cs, ok := CardStateOf(st); ok {
			fmt.Fprintf(&b, " WHEN '%s' THEN '%s'", st, cs)
		}
	}
	b.WriteString(" END")
	return b.String()
}()

var offCardSQL = func() string {
	var off []string
	for _, st := range IncidentStatuses {
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

// RefreshCardAgainArgs is the follow-up refresh of a project's card. River
// keeps a running job unique too, so a change that commits while
// RefreshCardArgs is running would otherwise be coalesced into a refresh
// that has already read the store; EnqueueCardRefresh then inserts this
// follow-up instead, unique per project as well.
type RefreshCardAgainArgs struct {
	ProjectID uuid.UUID `json:"project_id" river:"unique"`
}

// Kind implements river.JobArgs.
func (RefreshCardAgainArgs) Kind() string { return "refresh_card_again" }

// InsertOpts makes the follow-up unique per project.
func (RefreshCardAgainArgs) InsertOpts() river.InsertOpts {
	return RefreshCardArgs{}.InsertOpts()
}

// EnqueueCardRefresh inserts the project's card refresh in tx: one job per
// project however many changes arrive while it waits, and a follow-up when
// the one that exists is already running. Call it last in a transaction,
// so the window between the insert and the commit is as short as it gets.
func EnqueueCardRefresh(ctx context.Context, s *Store, tx bun.Tx, projectID uuid.UUID) error {
	if s.jobs == nil {
		return fmt.Errorf("domain: no job inserter configured for refresh_card")
	}
	res, err := s.jobs.InsertTx(ctx, tx.Tx, RefreshCardArgs{ProjectID: projectID}, nil)
	if err != nil {
		return fmt.Errorf("domain: enqueue refresh_card: %w", err)
	}
	if res.UniqueSkippedAsDuplicate && res.Job != nil && res.Job.State == rivertype.JobStateRunning {
		if _, err := s.jobs.InsertTx(ctx, tx.Tx, RefreshCardAgainArgs{ProjectID: projectID}, nil); err != nil {
			return fmt.Errorf("domain: enqueue refresh_card_again: %w", err)
		}
	}
	return nil
}

// enqueueCardRefreshApart is EnqueueCardRefresh outside any transaction of
// the caller: each insert commits on its own, so it locks one job row at a
// time and cannot deadlock with River completing those rows.
func enqueueCardRefreshApart(ctx context.Context, s *Store, projectID uuid.UUID) error {
	var running bool
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		res, err := s.jobs.InsertTx(ctx, tx.Tx, RefreshCardArgs{ProjectID: projectID}, nil)
		if err == nil {
			running = res.UniqueSkippedAsDuplicate && res.Job != nil && res.Job.State == rivertype.JobStateRunning
		}
		return err
	})
	if err != nil || !running {
		return err
	}
	return s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		_, err := s.jobs.InsertTx(ctx, tx.Tx, RefreshCardAgainArgs{ProjectID: projectID}, nil)
		return err
	})
}

// Refresh replaces a project's card from the incident store: every incident
// not CLOSED or IGNORED, mapped onto the card's states, oldest first — the
// empty list included, so the last close clears the card. A card owned by
// an external producer is left alone. A project that no longer exists has
// no card to feed: not an error, a DEBUG line.
//
// It is one statement (the snapshot, the mapping and the upsert), so the
// card of a project with a thousand open incidents is replaced in a few
// milliseconds.
func (c *Cards) Refresh(ctx context.Context, projectID uuid.UUID) error {
	return c.s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error { return c.refreshTx(ctx, tx, projectID) })
}

func (c *Cards) refreshTx(ctx context.Context, tx bun.Tx, projectID uuid.UUID) error {
	var orgIDs []uuid.UUID
	err := tx.NewRaw(`INSERT INTO project_cards AS c (project_id, org_id, source, incidents, updated_at)
		SELECT p.id, p.org_id, ?,
		       COALESCE((SELECT jsonb_agg(jsonb_build_object('id', i.id, 'title', i.title, 'state', `+cardStateSQL+`,
		                     'since', to_char(i.first_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'))
		                  ORDER BY i.first_seen, i.id)
		                 FROM incidents i WHERE i.project_id = p.id AND i.status NOT IN (`+offCardSQL+`)), '[]'::jsonb),
		       ?
		FROM projects p WHERE p.id = ?
		ON CONFLICT (project_id) DO UPDATE SET source = EXCLUDED.source, incidents = EXCLUDED.incidents, updated_at = EXCLUDED.updated_at
		WHERE NOT c.external
		RETURNING c.org_id`, CardSourceFeed, c.s.Now(), projectID).Scan(ctx, &orgIDs)
	if err != nil {
		return fmt.Errorf("cards: refresh %s: %w", projectID, err)
	}
	if len(orgIDs) == 0 {
		c.s.Log.Debug("cards: nothing to refresh (project deleted, or the card is owned by an external producer)", "project_id", projectID)
		return nil
	}
	return publishCard(ctx, tx, orgIDs[0], projectID)
}

func publishCard(ctx context.Context, tx bun.IDB, orgID, projectID uuid.UUID) error {
	b, _ := json.Marshal(map[string]any{"kind": "card", "org_id": orgID, "project_id": projectID})
	return notify(ctx, tx, string(b))
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
	if err := c.s.DB.NewRaw(`SELECT EXISTS (SELECT 1 FROM projects WHERE id = ? AND org_id = ?)`, projectID, orgID).Scan(ctx, &exists); err != nil {
		return nil, fmt.Errorf("cards: project: %w", err)
	}
	if !exists {
		return nil, NotFound("project")
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
	if err := c.s.DB.NewSelect().Model(&rows).Where("project_id IN (?)", bun.In(ids)).Scan(ctx); err != nil {
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
func (c *Cards) SetExternal(ctx context.Context, pr *Principal, projectID uuid.UUID, external bool) (DashboardConfig, error) {
	var out DashboardConfig
	if err := requireWrite(pr); err != nil {
		return out, err
	}
	err := c.s.WithProject(ctx, projectID, func(ctx context.Context, tx bun.Tx, p *Project) error {
		if p.OrgID != pr.OrgID {
			return NotFound("project")
		}
		var prefix *string
		var hash []byte
		if external {
			tok, lookup, h := newToken(DashboardTokenPrefix)
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
		if !external {
			return c.refreshTx(ctx, tx, p.ID)
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
		return nil, nil, Invalid("missing_incidents", `"incidents" is required: a list of {id, title, state, since} (since may be left out; an empty list clears the card)`)
	}
	if len(*in) > MaxCardIncidents {
		return nil, nil, Invalid("too_many_incidents", "a card holds at most %d incidents; got %d", MaxCardIncidents, len(*in))
	}
	out = make([]CardIncident, 0, len(*in))
	seen := map[string]bool{}
	for i, e := range *in {
		at := func(field string) string { return fmt.Sprintf("incidents[%d].%s", i, field) }
		switch {
		case e.ID == nil || strings.TrimSpace(*e.ID) == "":
			return nil, nil, Invalid("invalid_incident", "%s is required", at("id"))
		case len(*e.ID) > 200:
			return nil, nil, Invalid("invalid_incident", "%s must be at most 200 characters", at("id"))
		case seen[*e.ID]:
			return nil, nil, Invalid("invalid_incident", "%s %q appears twice", at("id"), clipString(*e.ID, 40))
		case e.Title == nil || strings.TrimSpace(*e.Title) == "":
			return nil, nil, Invalid("invalid_incident", "%s is required", at("title"))
		case len(*e.Title) > 500:
			return nil, nil, Invalid("invalid_incident", "%s must be at most 500 characters", at("title"))
		case e.State == nil:
			return nil, nil, Invalid("invalid_incident", "%s is required (OPEN, INVESTIGATING, MITIGATED or RESOLVED)", at("state"))
		}
		switch *e.State {
		case CardOpen, CardInvestigating, CardMitigated, CardResolved:
		default:
			return nil, nil, Invalid("invalid_incident", "%s must be one of OPEN, INVESTIGATING, MITIGATED, RESOLVED; got %q", at("state"), clipString(*e.State, 40))
		}
		var since time.Time
		if e.Since == nil {
			noSince = append(noSince, i)
		} else if since, err = time.Parse(time.RFC3339, *e.Since); err != nil {
			return nil, nil, Invalid("invalid_incident", "%s must be an RFC 3339 time such as 2026-09-16T10:11:12Z; got %q", at("since"), clipString(*e.Since, 40))
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
var ErrCardAuth = newError(ErrUnauthorized, "unauthorized", "a valid dashboard token is required")

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
	_, presented, shapeOK := splitToken(DashboardTokenPrefix, bearer)
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
		case !isNoRows(err):
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
	if !hashEqual(row.Hash, presented) || !found || !shapeOK {
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
	return c.s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if len(noSince) > 0 {
			// The card's row lock orders concurrent PUTs, so the since a
			// later one keeps is the one an earlier one committed.
			var raw string
			err := tx.NewRaw(`SELECT incidents::text FROM project_cards WHERE project_id = ? AND external AND token_hash = ? FOR UPDATE`,
				prod.projectID, prod.hash).Scan(ctx, &raw)
			if isNoRows(err) {
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

// CardSweepArgs is the periodic job that catches card refreshes lost
// between an ingest's commit and its refresh enqueue (a crash there).
type CardSweepArgs struct{}

// Kind implements river.JobArgs.
func (CardSweepArgs) Kind() string { return "card_sweep" }

// SweepStale enqueues a refresh for every project whose incidents changed
// after its card (recently: the sweep runs every minute) and whose card the
// incident store owns. It returns how many it enqueued.
func (c *Cards) SweepStale(ctx context.Context, window time.Duration) (int, error) {
	var ids []uuid.UUID
	err := c.s.DB.NewRaw(`SELECT DISTINCT i.project_id FROM incidents i
		LEFT JOIN project_cards pc ON pc.project_id = i.project_id
		WHERE i.updated_at > ? AND (pc.project_id IS NULL OR (NOT pc.external AND i.updated_at > pc.updated_at))
		LIMIT 1000`, c.s.Now().Add(-window)).Scan(ctx, &ids)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	err = c.s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		for _, id := range ids {
			if err := EnqueueCardRefresh(ctx, c.s, tx, id); err != nil {
				return err
			}
		}
		return nil
	})
	return len(ids), err
}
