package domain_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/domain"
)

// incidentBundle adds the incident store, cards and the feed to testBundle.
type incidentBundle struct {
	*testBundle
	incidents *domain.Incidents
	cards     *domain.Cards
	feed      *domain.Feed
	proj      *domain.Project
	sender    *domain.FeedSender
}

func setupIncidents(t *testing.T, policy string) *incidentBundle {
	t.Helper()
	b := setup(t)
	ib := &incidentBundle{testBundle: b, incidents: domain.NewIncidents(b.store, b.queue), cards: domain.NewCards(b.store), feed: newFeed(t, b.store)}
	ib.feed.OnQueued = ib.incidents.RequestRepairs
	ctx := context.Background()
	p, err := b.projects.Create(ctx, b.owner, domain.ProjectInput{Slug: strp("shop"), RepoURL: strp("https://git.example/shop.git"),
		DefaultBranch: strp("main"), RunCommand: strp("make test"), RepairCommand: strp("./fix.sh")})
	if err != nil {
		t.Fatal(err)
	}
	ib.proj = p
	if _, err := ib.feed.PutBinding(ctx, b.owner, p.ID, "production", policy); err != nil {
		t.Fatal(err)
	}
	_, tok, err := ib.feed.CreateConnection(ctx, b.owner, p.ID, "api")
	if err != nil {
		t.Fatal(err)
	}
	if ib.sender, err = ib.feed.Authenticate(ctx, tok); err != nil {
		t.Fatal(err)
	}
	return ib
}

// send ingests one event with the given title and returns its incident.
func (ib *incidentBundle) send(t *testing.T, title string) *domain.Incident {
	t.Helper()
	ev := map[string]any{"schema_version": "1.0", "event_id": uuid.NewString(), "timestamp": time.Now().UTC().Format(time.RFC3339),
		"title": title, "level": "error", "environment": "production", "service": "api", "sdk": map[string]any{"name": "t"},
		"exception": map[string]any{"type": "E" + title, "message": "boom"}}
	raw, _ := json.Marshal(ev)
	res, err := ib.feed.Ingest(context.Background(), ib.sender, "127.0.0.1", []json.RawMessage{raw})
	if err != nil || len(res.Accepted) != 1 {
		t.Fatalf("ingest: %v %+v", err, res)
	}
	var id uuid.UUID
	if err := ib.db.Bun.NewRaw(`SELECT incident_id FROM feed_events WHERE event_id_key = ?`, ev["event_id"]).Scan(context.Background(), &id); err != nil {
		t.Fatal(err)
	}
	return ib.incident(t, id)
}

func (ib *incidentBundle) incident(t *testing.T, id uuid.UUID) *domain.Incident {
	t.Helper()
	inc, err := ib.incidents.Get(context.Background(), ib.owner.OrgID, id)
	if err != nil {
		t.Fatal(err)
	}
	return inc
}

// force puts an incident into a status directly (fixtures for the table).
func (ib *incidentBundle) force(t *testing.T, id uuid.UUID, status string) {
	t.Helper()
	if _, err := ib.db.Bun.NewRaw(`UPDATE incidents SET status = ? WHERE id = ?`, status, id).Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (ib *incidentBundle) lastTransition(t *testing.T, id uuid.UUID) (from, to, actor, actorID, reason string) {
	t.Helper()
	var f *string
	err := ib.db.Bun.QueryRowContext(context.Background(), `SELECT from_status, to_status, actor_kind, actor_id, reason
		FROM incident_transitions WHERE incident_id = ? ORDER BY id DESC LIMIT 1`, id).Scan(&f, &to, &actor, &actorID, &reason)
	if err != nil {
		t.Fatal(err)
	}
	if f != nil {
		from = *f
	}
	return
}

func errCode(err error) string {
	var de *domain.Error
	if errors.As(err, &de) {
		return de.Code
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestDecisionTable drives every decision from every status: the allowed
// ones move and are recorded with the person as actor; the others are 409
// invalid_decision naming the status, and change nothing.
func TestDecisionTable(t *testing.T) {
	t.Parallel()
	ib := setupIncidents(t, domain.PolicyObserve)
	allowed := map[string][]string{
		domain.DecisionApprove: {domain.IncidentTriaged, domain.IncidentWaitingApproval, domain.IncidentNeedsHuman},
		domain.DecisionReopen:  {domain.IncidentClosed, domain.IncidentIgnored},
		domain.DecisionClose:   {"OBSERVED", "TRIAGED", "WAITING_APPROVAL", "QUEUED", "RUNNING", "PR_OPEN", "NEEDS_HUMAN", "IGNORED"},
		domain.DecisionIgnore:  {"OBSERVED", "TRIAGED", "WAITING_APPROVAL", "QUEUED", "RUNNING", "PR_OPEN", "NEEDS_HUMAN", "CLOSED"},
	}
	target := map[string]string{"approve": "QUEUED", "reopen": "TRIAGED", "close": "CLOSED", "ignore": "IGNORED"}
	for i, from := range domain.IncidentStatuses {
		for _, d := range []string{"approve", "reopen", "close", "ignore"} {
			inc := ib.send(t, fmt.Sprintf("T%d%s", i, d))
			ib.force(t, inc.ID, from)
			ok := false
			for _, s := range allowed[d] {
				ok = ok || s == from
			}
			got, err := ib.incidents.Decide(context.Background(), ib.owner, inc.ID, d)
			after := ib.incident(t, inc.ID)
			if ok {
				if err != nil || got.Status != target[d] || after.Status != target[d] {
					t.Fatalf("%s from %s: %v, status %s", d, from, err, after.Status)
				}
				f, to, actor, actorID, _ := ib.lastTransition(t, inc.ID)
				if f != from || to != target[d] || actor != domain.ActorPerson || actorID != ib.owner.UserID.String() {
					t.Fatalf("%s from %s recorded %s→%s by %s %s", d, from, f, to, actor, actorID)
				}
				if d == "approve" && (after.RepairRunID == nil || ib.run(t, *after.RepairRunID).Trigger != domain.TriggerRepair) {
					t.Fatalf("approve queued no repair run")
				}
				continue
			}
			want := fmt.Sprintf("cannot %s an incident that is %s", d, from)
			var de *domain.Error
			if !errors.As(err, &de) || de.Code != "invalid_decision" || de.Message != want || !errors.Is(err, domain.ErrConflict) {
				t.Fatalf("%s from %s: want 409 %q, got %v", d, from, want, err)
			}
			if after.Status != from {
				t.Fatalf("refused %s from %s changed the status to %s", d, from, after.Status)
			}
		}
	}
}

func TestDecisionRefusals(t *testing.T) {
	t.Parallel()
	ib := setupIncidents(t, domain.PolicyApprove)
	ctx := context.Background()
	inc := ib.send(t, "Refusals")
	if inc.Status != domain.IncidentWaitingApproval {
		t.Fatalf("approve policy: %s", inc.Status)
	}
	if _, err := ib.incidents.Decide(ctx, ib.owner, inc.ID, "merge"); errCode(err) != "unknown_decision" || !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("unknown decision: %v", err)
	}
	// Viewers are refused; another organisation sees nothing.
	if _, err := ib.accounts.AddMember(ctx, ib.owner, "viewer@acme.test", "correct horse battery", domain.RoleViewer); err != nil {
		t.Fatal(err)
	}
	_, viewer, err := ib.accounts.Login(ctx, "viewer@acme.test", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ib.incidents.Decide(ctx, viewer, inc.ID, "close"); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("viewer: %v", err)
	}
	other, _ := ib.accounts.Bootstrap(ctx, "globex", "x@globex.test", "correct horse battery")
	op, _ := ib.accounts.Authenticate(ctx, other.Token)
	if _, err := ib.incidents.Decide(ctx, op, inc.ID, "close"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("other org: %v", err)
	}
	// No repair command: 409, nothing changes.
	if _, err := ib.projects.Update(ctx, ib.owner, ib.proj.ID, domain.ProjectInput{RepairCommand: strp("")}); err != nil {
		t.Fatal(err)
	}
	if _, err := ib.incidents.Decide(ctx, ib.owner, inc.ID, "approve"); errCode(err) != "no_repair_command" || !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("no repair command: %v", err)
	}
	if got := ib.incident(t, inc.ID); got.Status != domain.IncidentWaitingApproval || got.RepairRunID != nil {
		t.Fatalf("refused approval changed the incident: %+v", got)
	}
	// A full queue: 409 project_queue_full, nothing changes.
	if _, err := ib.projects.Update(ctx, ib.owner, ib.proj.ID, domain.ProjectInput{RepairCommand: strp("./fix.sh")}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < domain.MaxQueued; i++ {
		if _, err := ib.queue.AcceptManual(ctx, ib.owner, ib.proj.ID, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ib.incidents.Decide(ctx, ib.owner, inc.ID, "approve"); errCode(err) != "project_queue_full" || !errors.Is(err, domain.ErrQueueFull) {
		t.Fatalf("full queue: %v", err)
	}
	if got := ib.incident(t, inc.ID); got.Status != domain.IncidentWaitingApproval || got.RepairRunID != nil {
		t.Fatalf("refused approval changed the incident: %+v", got)
	}
}

// TestRepairLifecycle: approval queues a repair run; the repair worker's
// moves (started, PR opened, needs a person) and the terminal hook.
func TestRepairLifecycle(t *testing.T) {
	t.Parallel()
	ib := setupIncidents(t, domain.PolicyApprove)
	ctx := context.Background()
	inc := ib.send(t, "Lifecycle")
	got, err := ib.incidents.Decide(ctx, ib.owner, inc.ID, "approve")
	if err != nil || got.Status != domain.IncidentQueued || got.RepairRunID == nil {
		t.Fatalf("approve: %v %+v", err, got)
	}
	run := ib.run(t, *got.RepairRunID)
	if run.IncidentID == nil || *run.IncidentID != inc.ID || run.Branch != "main" {
		t.Fatalf("repair run: %+v", run)
	}
	if err := ib.incidents.RepairStarted(ctx, run); err != nil {
		t.Fatal(err)
	}
	if s := ib.incident(t, inc.ID).Status; s != domain.IncidentRunning {
		t.Fatalf("started: %s", s)
	}
	if _, to, actor, actorID, _ := ib.lastTransition(t, inc.ID); to != "RUNNING" || actor != "repair" || actorID != run.ID.String() {
		t.Fatalf("started recorded %s by %s %s", to, actor, actorID)
	}
	if err := ib.incidents.RepairPROpened(ctx, run, "https://git.example/pr/1"); err != nil {
		t.Fatal(err)
	}
	if i := ib.incident(t, inc.ID); i.Status != domain.IncidentPROpen || i.PRURL != "https://git.example/pr/1" {
		t.Fatalf("pr opened: %+v", i)
	}
	// Close, reopen, approve again: a second run; the old run's news no
	// longer moves the incident.
	for _, d := range []string{"close", "reopen", "approve"} {
		if _, err := ib.incidents.Decide(ctx, ib.owner, inc.ID, d); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
	}
	if err := ib.incidents.RepairNeedsHuman(ctx, run, "stale"); err != nil {
		t.Fatal(err)
	}
	i2 := ib.incident(t, inc.ID)
	if i2.Status != domain.IncidentQueued || *i2.RepairRunID == run.ID || i2.PRURL != "" {
		t.Fatalf("second approval: %+v", i2)
	}
	// The terminal hook: the second run canceled while queued → NEEDS_HUMAN.
	if _, err := ib.queue.RequestCancel(ctx, ib.owner, run.ID); err != nil && !errors.Is(err, domain.ErrConflict) {
		t.Fatal(err)
	}
	if _, err := ib.queue.RequestCancel(ctx, ib.owner, *i2.RepairRunID); err != nil {
		t.Fatal(err)
	}
	i3 := ib.incident(t, inc.ID)
	if i3.Status != domain.IncidentNeedsHuman || i3.NeedsHumanReason == "" {
		t.Fatalf("canceled repair: %+v", i3)
	}
	// The repair's own report names its reason.
	if _, err := ib.incidents.Decide(ctx, ib.owner, inc.ID, "approve"); err != nil {
		t.Fatal(err)
	}
	run3 := ib.run(t, *ib.incident(t, inc.ID).RepairRunID)
	if err := ib.incidents.RepairNeedsHuman(ctx, run3, "the repair command changed nothing"); err != nil {
		t.Fatal(err)
	}
	if i := ib.incident(t, inc.ID); i.Status != domain.IncidentNeedsHuman || i.NeedsHumanReason != "the repair command changed nothing" {
		t.Fatalf("needs human: %+v", i)
	}
	d, err := ib.incidents.Detail(ctx, ib.owner.OrgID, inc.ID)
	if err != nil || len(d.Transitions) < 10 || d.Latest == nil || d.Hourly[23] != 1 || d.RepairRun == nil {
		t.Fatalf("detail: %v %+v", err, d)
	}
}

// TestAutoPolicyQueuesRepair: the auto policy's QUEUED incident gets its
// repair run through the dispatch job; a regression of a closed incident
// reopens it under its policy.
func TestAutoPolicyQueuesRepair(t *testing.T) {
	t.Parallel()
	ib := setupIncidents(t, domain.PolicyAuto)
	ctx := context.Background()
	inc := ib.send(t, "Auto")
	if inc.Status != domain.IncidentQueued {
		t.Fatalf("auto: %s", inc.Status)
	}
	var n int
	if err := ib.db.Bun.NewRaw(`SELECT count(*) FROM river_job WHERE kind = 'dispatch_repair'`).Scan(ctx, &n); err != nil || n != 1 {
		t.Fatalf("dispatch jobs: %d %v", n, err)
	}
	if err := ib.incidents.DispatchRepair(ctx, inc.ID); err != nil {
		t.Fatal(err)
	}
	if err := ib.incidents.DispatchRepair(ctx, inc.ID); err != nil { // idempotent
		t.Fatal(err)
	}
	got := ib.incident(t, inc.ID)
	var runs int
	_ = ib.db.Bun.NewRaw(`SELECT count(*) FROM project_runs WHERE incident_id = ?`, inc.ID).Scan(ctx, &runs)
	if got.RepairRunID == nil || runs != 1 {
		t.Fatalf("dispatch: %+v runs=%d", got, runs)
	}
	// Regression: close it, a new event reopens it (TRIAGED, then policy).
	if _, err := ib.queue.RequestCancel(ctx, ib.owner, *got.RepairRunID); err != nil {
		t.Fatal(err)
	}
	if _, err := ib.incidents.Decide(ctx, ib.owner, inc.ID, "close"); err != nil {
		t.Fatal(err)
	}
	again := ib.send(t, "Auto")
	if again.ID != inc.ID || again.Status != domain.IncidentQueued || again.EventCount != 2 {
		t.Fatalf("regression: %+v", again)
	}
	// A project without a repair command: the dispatch hands it to a person.
	if _, err := ib.projects.Update(ctx, ib.owner, ib.proj.ID, domain.ProjectInput{RepairCommand: strp("")}); err != nil {
		t.Fatal(err)
	}
	if err := ib.incidents.DispatchRepair(ctx, inc.ID); err != nil {
		t.Fatal(err)
	}
	if i := ib.incident(t, inc.ID); i.Status != domain.IncidentNeedsHuman || i.NeedsHumanReason == "" {
		t.Fatalf("no repair command: %+v", i)
	}
}

func TestInboxListAndBulk(t *testing.T) {
	t.Parallel()
	ib := setupIncidents(t, domain.PolicyObserve)
	ctx := context.Background()
	var ids []uuid.UUID
	for i := 0; i < 5; i++ {
		ids = append(ids, ib.send(t, fmt.Sprintf("List%d", i)).ID)
		ib.clock.Advance(time.Second)
	}
	pg, err := ib.incidents.List(ctx, ib.owner.OrgID, domain.IncidentFilter{Limit: 2})
	if err != nil || len(pg.Incidents) != 2 || !pg.HasMore || pg.Incidents[0].ID != ids[4] || pg.Counts["TRIAGED"] != 5 {
		t.Fatalf("list: %v %+v", err, pg)
	}
	res, err := ib.incidents.DecideMany(ctx, ib.owner, ids[:3], "ignore")
	if err != nil || len(res.Done) != 3 {
		t.Fatalf("bulk: %v %+v", err, res)
	}
	res, _ = ib.incidents.DecideMany(ctx, ib.owner, ids[:1], "ignore")
	if len(res.Refused) != 1 {
		t.Fatalf("bulk refusal: %+v", res)
	}
	if _, err := ib.incidents.DecideMany(ctx, ib.owner, ids, "approve"); errCode(err) != "unknown_decision" {
		t.Fatalf("bulk approve: %v", err)
	}
	pg, _ = ib.incidents.List(ctx, ib.owner.OrgID, domain.IncidentFilter{Status: "ignored"})
	if len(pg.Incidents) != 3 || pg.Counts["IGNORED"] != 3 || pg.Counts["TRIAGED"] != 2 {
		t.Fatalf("status filter: %+v", pg)
	}
	for _, f := range []domain.IncidentFilter{{Status: "NOPE"}, {Environment: "Not A Label!"}, {Page: -1}, {Limit: 500}} {
		if _, err := ib.incidents.List(ctx, ib.owner.OrgID, f); !errors.Is(err, domain.ErrInvalid) {
			t.Fatalf("filter %+v: %v", f, err)
		}
	}
}

// TestCardRefresh: the seed's mapping, oldest first, CLOSED and IGNORED
// off the card, REPLACE with the empty list; the external producer owns its
// card until handed back.
func TestCardRefresh(t *testing.T) {
	t.Parallel()
	ib := setupIncidents(t, domain.PolicyObserve)
	ctx := context.Background()
	want := map[string]string{}
	for i, st := range domain.IncidentStatuses {
		inc := ib.send(t, "Card"+st)
		ib.force(t, inc.ID, st)
		if cs, ok := domain.CardStateOf(st); ok {
			want[inc.ID.String()] = cs
		}
		_ = i
		ib.clock.Advance(time.Second)
	}
	if err := ib.cards.Refresh(ctx, ib.proj.ID); err != nil {
		t.Fatal(err)
	}
	card, err := ib.cards.Get(ctx, ib.owner.OrgID, ib.proj.ID)
	if err != nil || card.Source != "anvil-feed" || len(card.Incidents) != 7 {
		t.Fatalf("card: %v %+v", err, card)
	}
	for _, ci := range card.Incidents {
		if want[ci.ID] != ci.State || ci.Since.IsZero() || ci.Title == "" {
			t.Fatalf("card incident %+v, want state %s", ci, want[ci.ID])
		}
	}
	if s, _ := domain.CardStateOf("NEEDS_HUMAN"); s != "OPEN" {
		t.Fatal("NEEDS_HUMAN must be OPEN")
	}
	// Close everything: the card is replaced by the empty list.
	if _, err := ib.db.Bun.NewRaw(`UPDATE incidents SET status = 'CLOSED'`).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ib.cards.Refresh(ctx, ib.proj.ID); err != nil {
		t.Fatal(err)
	}
	var raw string
	_ = ib.db.Bun.NewRaw(`SELECT incidents::text FROM project_cards WHERE project_id = ?`, ib.proj.ID).Scan(ctx, &raw)
	if raw != "[]" {
		t.Fatalf("empty card stored as %q", raw)
	}
	// External producer.
	cfg, err := ib.cards.SetExternal(ctx, ib.owner, ib.proj.ID, true)
	if err != nil || cfg.Token == "" || cfg.ConfigID == uuid.Nil {
		t.Fatalf("set external: %v %+v", err, cfg)
	}
	prod, err := ib.cards.AuthorizeProducer(ctx, "acme", cfg.ConfigID.String(), cfg.Token)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(id, title, state, since string) domain.ExternalIncident {
		return domain.ExternalIncident{ID: &id, Title: &title, State: &state, Since: &since}
	}
	list := []domain.ExternalIncident{mk("x1", "Checkout down", "MITIGATED", "2026-09-16T10:11:12Z")}
	if err := ib.cards.ReplaceExternal(ctx, prod, &list); err != nil {
		t.Fatal(err)
	}
	ib.force(t, ib.send(t, "After external").ID, "TRIAGED")
	if err := ib.cards.Refresh(ctx, ib.proj.ID); err != nil { // left alone
		t.Fatal(err)
	}
	card, _ = ib.cards.Get(ctx, ib.owner.OrgID, ib.proj.ID)
	if !card.External || card.Source != "external" || len(card.Incidents) != 1 || card.Incidents[0].State != "MITIGATED" {
		t.Fatalf("external card: %+v", card)
	}
	// Bad credentials: one answer for all.
	for _, c := range []struct{ tenant, cfg, tok string }{
		{"acme", cfg.ConfigID.String(), "anv_dsh_" + "00000000000000000000000000000000"},
		{"globex", cfg.ConfigID.String(), cfg.Token},
		{"acme", uuid.NewString(), cfg.Token},
		{"acme", "not-a-uuid", cfg.Token},
		{"acme", cfg.ConfigID.String(), ""},
	} {
		if _, err := ib.cards.AuthorizeProducer(ctx, c.tenant, c.cfg, c.tok); err != domain.ErrCardAuth {
			t.Fatalf("%+v: %v", c, err)
		}
	}
	// Bad bodies: specific 422s, nothing changes.
	bad := map[string][]domain.ExternalIncident{
		"state":  {mk("a", "t", "BROKEN", "2026-09-16T10:11:12Z")},
		"since":  {mk("a", "t", "OPEN", "yesterday")},
		"title":  {mk("a", "", "OPEN", "2026-09-16T10:11:12Z")},
		"twice":  {mk("a", "t", "OPEN", "2026-09-16T10:11:12Z"), mk("a", "t", "OPEN", "2026-09-16T10:11:12Z")},
		"absent": {{}},
	}
	for name, l := range bad {
		l := l
		if err := ib.cards.ReplaceExternal(ctx, prod, &l); !errors.Is(err, domain.ErrInvalid) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if err := ib.cards.ReplaceExternal(ctx, prod, nil); errCode(err) != "missing_incidents" {
		t.Fatalf("missing list: %v", err)
	}
	// A new token replaces the old one; handing back refreshes from the store.
	cfg2, _ := ib.cards.SetExternal(ctx, ib.owner, ib.proj.ID, true)
	if cfg2.ConfigID != cfg.ConfigID {
		t.Fatal("config id changed")
	}
	if _, err := ib.cards.AuthorizeProducer(ctx, "acme", cfg.ConfigID.String(), cfg.Token); err != domain.ErrCardAuth {
		t.Fatalf("old token still works: %v", err)
	}
	back, err := ib.cards.SetExternal(ctx, ib.owner, ib.proj.ID, false)
	if err != nil || back.Token != "" {
		t.Fatalf("hand back: %v %+v", err, back)
	}
	card, _ = ib.cards.Get(ctx, ib.owner.OrgID, ib.proj.ID)
	if card.External || card.Source != "anvil-feed" || len(card.Incidents) != 1 || card.Incidents[0].Title != "After external" {
		t.Fatalf("handed back: %+v", card)
	}
	// A deleted project is no error.
	if err := ib.cards.Refresh(ctx, uuid.New()); err != nil {
		t.Fatal(err)
	}
}

// TestCardRefreshCoalesces: a burst of changes while one refresh waits is
// one job; the refresh reads them all and leaves nothing queued.
func TestCardRefreshCoalesces(t *testing.T) {
	t.Parallel()
	ib := setupIncidents(t, domain.PolicyObserve)
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		ib.send(t, fmt.Sprintf("Burst%d", i%3))
	}
	// The refresh is asked for after each batch's commit, by the feed's
	// request loop: flush it, then check that the burst made exactly one.
	if err := ib.feed.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if n := ib.jobs(t, "refresh_card"); n != 1 {
		t.Fatalf("%d refresh jobs after a burst, want 1", n)
	}
	if err := ib.cards.Refresh(ctx, ib.proj.ID); err != nil {
		t.Fatal(err)
	}
	card, _ := ib.cards.Get(ctx, ib.owner.OrgID, ib.proj.ID)
	if len(card.Incidents) != 3 {
		t.Fatalf("card after the burst: %+v", card.Incidents)
	}
	if v, r, q := ib.cardChanges(t); v != r || q {
		t.Fatalf("after the refresh: version %d, refreshed %d, queued %v", v, r, q)
	}
}

// jobs counts the jobs of a kind.
func (ib *incidentBundle) jobs(t *testing.T, kind string) int {
	t.Helper()
	var n int
	if err := ib.db.Bun.NewRaw(`SELECT count(*) FROM river_job WHERE kind = ? AND state = 'available'`, kind).Scan(context.Background(), &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// cardChanges reads the project's row of card_changes.
func (ib *incidentBundle) cardChanges(t *testing.T) (version, refreshed int64, queued bool) {
	t.Helper()
	if err := ib.db.Bun.NewRaw(`SELECT version, refreshed, queued FROM card_changes WHERE project_id = ?`, ib.proj.ID).
		Scan(context.Background(), &version, &refreshed, &queued); err != nil {
		t.Fatal(err)
	}
	return
}

// TestCardRefreshReadsAChangeCommittedWhileItRan is the race of issue 11:
// a change enqueues its card refresh while a refresh job of the project
// already exists (so none is added), that job starts and reads the store
// before the change commits, and the change commits. The card must still
// end up showing the change, with no periodic sweep.
func TestCardRefreshReadsAChangeCommittedWhileItRan(t *testing.T) {
	t.Parallel()
	ib := setupIncidents(t, domain.PolicyApprove)
	ctx := context.Background()
	inc := ib.send(t, "raced")
	if err := ib.feed.Stop(ctx); err != nil { // the waiting refresh job exists
		t.Fatal(err)
	}
	if n := ib.jobs(t, "refresh_card"); n != 1 {
		t.Fatalf("%d refresh jobs waiting, want 1", n)
	}
	// The change: the incident moves on (as a repair's pull request does),
	// in a transaction that stays open while the refresh runs.
	tx, err := ib.db.Bun.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	if _, err := tx.ExecContext(ctx, `UPDATE incidents SET status = ? WHERE id = ?`, domain.IncidentPROpen, inc.ID); err != nil {
		t.Fatal(err)
	}
	if err := domain.EnqueueCardRefresh(ctx, ib.store, tx, ib.proj.ID); err != nil {
		t.Fatal(err)
	}
	// The waiting job starts now, before the change commits.
	refreshed := make(chan error, 1)
	go func() { refreshed <- ib.cards.Refresh(ctx, ib.proj.ID) }()
	// Let it read the store (it waits for the change, or returns).
	for deadline := time.Now().Add(10 * time.Second); ; {
		var waiting bool
		if err := ib.db.Bun.NewRaw(`SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND query LIKE '%card_changes%')`).Scan(ctx, &waiting); err != nil {
			t.Fatal(err)
		}
		if waiting || len(refreshed) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the refresh neither waited for the change nor returned")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-refreshed; err != nil {
		t.Fatal(err)
	}
	// The job that ran is done; nothing else is waiting to fix the card.
	if _, err := ib.db.Bun.NewRaw(`DELETE FROM river_job WHERE kind = 'refresh_card'`).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	card, _ := ib.cards.Get(ctx, ib.owner.OrgID, ib.proj.ID)
	if len(card.Incidents) != 1 || card.Incidents[0].State != domain.CardInvestigating {
		t.Fatalf("the card missed the change that committed while it refreshed: %+v", card.Incidents)
	}
	if v, r, q := ib.cardChanges(t); v != r || q {
		t.Fatalf("after the refresh: version %d, refreshed %d, queued %v", v, r, q)
	}
	// A change after the refresh finished gets a job of its own, even
	// while the finished job is still marked running.
	if _, err := ib.incidents.Decide(ctx, ib.owner, inc.ID, domain.DecisionClose); err != nil {
		t.Fatal(err)
	}
	if n := ib.jobs(t, "refresh_card"); n != 1 {
		t.Fatalf("%d refresh jobs after a later change, want 1", n)
	}
}

// TestCardSweepCatchesLostRefreshes: an ingest asks for its card refresh
// after the commit; when that request is lost (a crash in between), the
// periodic sweep finds the project and enqueues it; so it does for a job
// lost while responsible for changes older than its window.
func TestCardSweepCatchesLostRefreshes(t *testing.T) {
	t.Parallel()
	ib := setupIncidents(t, domain.PolicyObserve)
	ctx := context.Background()
	// A crash before the feed's request round: the change is counted,
	// nothing asked for its refresh.
	if err := ib.feed.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	ib.send(t, "lost")
	if n := ib.jobs(t, "refresh_card"); n != 0 {
		t.Fatalf("%d jobs with the request loop stopped", n)
	}
	n, err := ib.cards.SweepStale(ctx, 3*time.Minute)
	if err != nil || n != 1 || ib.jobs(t, "refresh_card") != 1 {
		t.Fatalf("sweep: %d %v, %d jobs", n, err, ib.jobs(t, "refresh_card"))
	}
	// The job is lost too: the sweep leaves it its window, then repeats it.
	ib.db.Bun.NewRaw(`DELETE FROM river_job WHERE kind = 'refresh_card'`).Exec(ctx)
	if n, err := ib.cards.SweepStale(ctx, 3*time.Minute); err != nil || n != 0 {
		t.Fatalf("sweep within the window of a queued refresh: %d %v", n, err)
	}
	ib.clock.Advance(4 * time.Minute)
	if n, err := ib.cards.SweepStale(ctx, 3*time.Minute); err != nil || n != 1 || ib.jobs(t, "refresh_card") != 1 {
		t.Fatalf("sweep after the window: %d %v", n, err)
	}
	// Once the card is current the sweep finds nothing.
	if err := ib.cards.Refresh(ctx, ib.proj.ID); err != nil {
		t.Fatal(err)
	}
	ib.db.Bun.NewRaw(`DELETE FROM river_job WHERE kind = 'refresh_card'`).Exec(ctx)
	if n, err := ib.cards.SweepStale(ctx, 3*time.Minute); err != nil || n != 0 {
		t.Fatalf("sweep of a current card: %d %v", n, err)
	}
}

// TestClosingWithdrawsTheQueuedRepair: closing (or ignoring) an incident
// whose repair run still waits in the queue cancels that run; the incident
// stays closed (the run's end does not send it to NEEDS_HUMAN).
func TestClosingWithdrawsTheQueuedRepair(t *testing.T) {
	t.Parallel()
	for _, decision := range []string{domain.DecisionClose, domain.DecisionIgnore} {
		ib := setupIncidents(t, domain.PolicyApprove)
		ctx := context.Background()
		inc := ib.send(t, "withdraw-"+decision)
		approved, err := ib.incidents.Decide(ctx, ib.owner, inc.ID, domain.DecisionApprove)
		if err != nil || approved.RepairRunID == nil {
			t.Fatalf("approve: %v %+v", err, approved)
		}
		done, err := ib.incidents.Decide(ctx, ib.owner, inc.ID, decision)
		if err != nil {
			t.Fatalf("%s: %v", decision, err)
		}
		run := ib.run(t, *approved.RepairRunID)
		if run.Status() != domain.StatusCanceled || run.FailureReason == nil || *run.FailureReason != "incident_"+decision+"d" {
			t.Fatalf("%s: repair run %s %v", decision, run.Status(), run.FailureReason)
		}
		if why := domain.WhyEnded(run, "", 0, 0); !strings.Contains(why, "its incident was") || strings.Contains(why, "_") {
			t.Fatalf("%s: the run page would say %q", decision, why)
		}
		if got := ib.incident(t, inc.ID); got.Status != done.Status || (got.Status != domain.IncidentClosed && got.Status != domain.IncidentIgnored) {
			t.Fatalf("%s: incident ended %s", decision, got.Status)
		}
	}
}

// TestConcurrentBatchesAreStoredTogether: batches of one project that
// arrive together are combined into shared transactions; every event is
// stored exactly once with its own connection, and the incident counts
// every distinct event.
func TestConcurrentBatchesAreStoredTogether(t *testing.T) {
	t.Parallel()
	ib := setupIncidents(t, domain.PolicyObserve)
	ctx := context.Background()
	const senders, batches, perBatch = 6, 8, 10
	var snds []*domain.FeedSender
	for i := 0; i < senders; i++ {
		_, tok, err := ib.feed.CreateConnection(ctx, ib.owner, ib.proj.ID, fmt.Sprintf("s%d", i))
		if err != nil {
			t.Fatal(err)
		}
		snd, err := ib.feed.Authenticate(ctx, tok)
		if err != nil {
			t.Fatal(err)
		}
		snds = append(snds, snd)
	}
	shared := uuid.NewString() // every sender also sends this one id
	var wg sync.WaitGroup
	for s := 0; s < senders; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			for b := 0; b < batches; b++ {
				raws := make([]json.RawMessage, 0, perBatch+1)
				for e := 0; e < perBatch; e++ {
					raws = append(raws, feedEvent(uuid.NewString(), "storm"))
				}
				raws = append(raws, feedEvent(shared, "storm"))
				res, err := ib.feed.Ingest(ctx, snds[s], "127.0.0.1", raws)
				if err != nil || len(res.Accepted) != perBatch+1 {
					t.Errorf("ingest: %v %d accepted", err, len(res.Accepted))
					return
				}
			}
		}(s)
	}
	wg.Wait()
	want := senders*batches*perBatch + 1
	var stored, conns, counted int
	if err := ib.db.Bun.NewRaw(`SELECT count(*), count(DISTINCT connection_id) FROM feed_events WHERE project_id = ?`, ib.proj.ID).Scan(ctx, &stored, &conns); err != nil {
		t.Fatal(err)
	}
	if err := ib.db.Bun.NewRaw(`SELECT COALESCE(sum(event_count), 0) FROM incidents WHERE project_id = ?`, ib.proj.ID).Scan(ctx, &counted); err != nil {
		t.Fatal(err)
	}
	if stored != want || counted != want || conns != senders {
		t.Fatalf("stored %d, counted %d, from %d connections; want %d, %d, %d", stored, counted, conns, want, want, senders)
	}
}

func feedEvent(id, title string) json.RawMessage {
	raw, _ := json.Marshal(map[string]any{"schema_version": "1.0", "event_id": id, "timestamp": time.Now().UTC().Format(time.RFC3339),
		"title": title, "level": "error", "environment": "production", "service": "api", "sdk": map[string]any{"name": "t"},
		"exception": map[string]any{"type": "E" + title, "message": "boom"}})
	return raw
}

// TestEventsGoWithTheirIncidents: an incident's stored events are deleted
// with it — directly, and when its project or organisation is deleted
// (migration 12's trigger, in place of a per-row foreign key) — and no
// other incident's events go with them.
func TestEventsGoWithTheirIncidents(t *testing.T) {
	t.Parallel()
	ib := setupIncidents(t, domain.PolicyObserve)
	ctx := context.Background()
	a, bb := ib.send(t, "first fault"), ib.send(t, "second fault")
	ib.send(t, "first fault")
	count := func(where string, args ...any) int {
		t.Helper()
		n, err := ib.db.Bun.NewSelect().Table("feed_events").Where(where, args...).Count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return int(n)
	}
	if count("incident_id = ?", a.ID) != 2 || count("incident_id = ?", bb.ID) != 1 {
		t.Fatal("events not stored as expected")
	}
	if _, err := ib.db.Bun.NewRaw(`DELETE FROM incidents WHERE id = ?`, a.ID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if count("incident_id = ?", a.ID) != 0 || count("incident_id = ?", bb.ID) != 1 {
		t.Fatal("deleting an incident left its events, or took another's")
	}
	if _, err := ib.db.Bun.NewRaw(`DELETE FROM projects WHERE id = ?`, ib.proj.ID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count("true"); n != 0 {
		t.Fatalf("deleting the project left %d events", n)
	}
}
