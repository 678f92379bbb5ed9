package incident_test

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
	cards "anvil/domain/card"
	"anvil/domain/feed"
	"anvil/domain/incident"
	"anvil/domain/project"
	runs "anvil/domain/run"
)

// TestDecisionTable drives every decision from every status: the allowed
// ones move and are recorded with the person as actor; the others are 409
// invalid_decision naming the status, and change nothing.
func TestDecisionTable(t *testing.T) {
	t.Parallel()
	ib := setupIncidents(t, domain.PolicyObserve)
	allowed := map[string][]string{
		incident.DecisionApprove: {domain.IncidentTriaged, domain.IncidentWaitingApproval, domain.IncidentNeedsHuman},
		incident.DecisionReopen:  {domain.IncidentClosed, domain.IncidentIgnored},
		incident.DecisionClose:   {"OBSERVED", "TRIAGED", "WAITING_APPROVAL", "QUEUED", "RUNNING", "PR_OPEN", "NEEDS_HUMAN", "IGNORED"},
		incident.DecisionIgnore:  {"OBSERVED", "TRIAGED", "WAITING_APPROVAL", "QUEUED", "RUNNING", "PR_OPEN", "NEEDS_HUMAN", "CLOSED"},
	}
	target := map[string]string{"approve": "QUEUED", "reopen": "TRIAGED", "close": "CLOSED", "ignore": "IGNORED"}
	for i, from := range domain.IncidentStatuses {
		for _, d := range []string{"approve", "reopen", "close", "ignore"} {
			inc := ib.Send(t, fmt.Sprintf("T%d%s", i, d))
			ib.Force(t, inc.ID, from)
			ok := false
			for _, s := range allowed[d] {
				ok = ok || s == from
			}
			got, err := ib.Incidents.Decide(context.Background(), ib.Owner, inc.ID, d)
			after := ib.Incident(t, inc.ID)
			if ok {
				if err != nil || got.Status != target[d] || after.Status != target[d] {
					t.Fatalf("%s from %s: %v, status %s", d, from, err, after.Status)
				}
				f, to, actor, actorID, _ := ib.LastTransition(t, inc.ID)
				if f != from || to != target[d] || actor != domain.ActorPerson || actorID != ib.Owner.UserID.String() {
					t.Fatalf("%s from %s recorded %s→%s by %s %s", d, from, f, to, actor, actorID)
				}
				if d == "approve" && (after.RepairRunID == nil || ib.Run(t, *after.RepairRunID).Trigger != runs.TriggerRepair) {
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
	inc := ib.Send(t, "Refusals")
	if inc.Status != domain.IncidentWaitingApproval {
		t.Fatalf("approve policy: %s", inc.Status)
	}
	if _, err := ib.Incidents.Decide(ctx, ib.Owner, inc.ID, "merge"); errCode(err) != "unknown_decision" || !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("unknown decision: %v", err)
	}
	// Viewers are refused; another organisation sees nothing.
	if _, err := ib.Accounts.AddMember(ctx, ib.Owner, "viewer@acme.test", "correct horse battery", domain.RoleViewer); err != nil {
		t.Fatal(err)
	}
	_, viewer, err := ib.Accounts.Login(ctx, "viewer@acme.test", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ib.Incidents.Decide(ctx, viewer, inc.ID, "close"); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("viewer: %v", err)
	}
	other, _ := ib.Accounts.Bootstrap(ctx, "globex", "x@globex.test", "correct horse battery")
	op, _ := ib.Accounts.Authenticate(ctx, other.Token)
	if _, err := ib.Incidents.Decide(ctx, op, inc.ID, "close"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("other org: %v", err)
	}
	// No repair command: 409, nothing changes.
	if _, err := ib.Projects.Update(ctx, ib.Owner, ib.Proj.ID, project.ProjectInput{RepairCommand: strp("")}); err != nil {
		t.Fatal(err)
	}
	if _, err := ib.Incidents.Decide(ctx, ib.Owner, inc.ID, "approve"); errCode(err) != "no_repair_command" || !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("no repair command: %v", err)
	}
	if got := ib.Incident(t, inc.ID); got.Status != domain.IncidentWaitingApproval || got.RepairRunID != nil {
		t.Fatalf("refused approval changed the incident: %+v", got)
	}
	// A full queue: 409 project_queue_full, nothing changes.
	if _, err := ib.Projects.Update(ctx, ib.Owner, ib.Proj.ID, project.ProjectInput{RepairCommand: strp("./fix.sh")}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < runs.MaxQueued; i++ {
		if _, err := ib.Queue.AcceptManual(ctx, ib.Owner, ib.Proj.ID, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ib.Incidents.Decide(ctx, ib.Owner, inc.ID, "approve"); errCode(err) != "project_queue_full" || !errors.Is(err, domain.ErrQueueFull) {
		t.Fatalf("full queue: %v", err)
	}
	if got := ib.Incident(t, inc.ID); got.Status != domain.IncidentWaitingApproval || got.RepairRunID != nil {
		t.Fatalf("refused approval changed the incident: %+v", got)
	}
}

// TestRepairLifecycle: approval queues a repair run; the repair worker's
// moves (started, PR opened, needs a person) and the terminal hook.
func TestRepairLifecycle(t *testing.T) {
	t.Parallel()
	ib := setupIncidents(t, domain.PolicyApprove)
	ctx := context.Background()
	inc := ib.Send(t, "Lifecycle")
	got, err := ib.Incidents.Decide(ctx, ib.Owner, inc.ID, "approve")
	if err != nil || got.Status != domain.IncidentQueued || got.RepairRunID == nil {
		t.Fatalf("approve: %v %+v", err, got)
	}
	run := ib.Run(t, *got.RepairRunID)
	if run.IncidentID == nil || *run.IncidentID != inc.ID || run.Branch != "main" {
		t.Fatalf("repair run: %+v", run)
	}
	if err := ib.Incidents.RepairStarted(ctx, run); err != nil {
		t.Fatal(err)
	}
	if s := ib.Incident(t, inc.ID).Status; s != domain.IncidentRunning {
		t.Fatalf("started: %s", s)
	}
	if _, to, actor, actorID, _ := ib.LastTransition(t, inc.ID); to != "RUNNING" || actor != "repair" || actorID != run.ID.String() {
		t.Fatalf("started recorded %s by %s %s", to, actor, actorID)
	}
	if err := ib.Incidents.RepairPROpened(ctx, run, "https://git.example/pr/1"); err != nil {
		t.Fatal(err)
	}
	if i := ib.Incident(t, inc.ID); i.Status != domain.IncidentPROpen || i.PRURL != "https://git.example/pr/1" {
		t.Fatalf("pr opened: %+v", i)
	}
	// Close, reopen, approve again: a second run; the old run's news no
	// longer moves the incident.
	for _, d := range []string{"close", "reopen", "approve"} {
		if _, err := ib.Incidents.Decide(ctx, ib.Owner, inc.ID, d); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
	}
	if err := ib.Incidents.RepairNeedsHuman(ctx, run, "stale"); err != nil {
		t.Fatal(err)
	}
	i2 := ib.Incident(t, inc.ID)
	if i2.Status != domain.IncidentQueued || *i2.RepairRunID == run.ID || i2.PRURL != "" {
		t.Fatalf("second approval: %+v", i2)
	}
	// The terminal hook: the second run canceled while queued → NEEDS_HUMAN.
	if _, err := ib.Queue.RequestCancel(ctx, ib.Owner, run.ID); err != nil && !errors.Is(err, domain.ErrConflict) {
		t.Fatal(err)
	}
	if _, err := ib.Queue.RequestCancel(ctx, ib.Owner, *i2.RepairRunID); err != nil {
		t.Fatal(err)
	}
	i3 := ib.Incident(t, inc.ID)
	if i3.Status != domain.IncidentNeedsHuman || i3.NeedsHumanReason == "" {
		t.Fatalf("canceled repair: %+v", i3)
	}
	// The repair's own report names its reason.
	if _, err := ib.Incidents.Decide(ctx, ib.Owner, inc.ID, "approve"); err != nil {
		t.Fatal(err)
	}
	run3 := ib.Run(t, *ib.Incident(t, inc.ID).RepairRunID)
	if err := ib.Incidents.RepairNeedsHuman(ctx, run3, "the repair command changed nothing"); err != nil {
		t.Fatal(err)
	}
	if i := ib.Incident(t, inc.ID); i.Status != domain.IncidentNeedsHuman || i.NeedsHumanReason != "the repair command changed nothing" {
		t.Fatalf("needs human: %+v", i)
	}
	d, err := ib.Incidents.Detail(ctx, ib.Owner.OrgID, inc.ID)
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
	inc := ib.Send(t, "Auto")
	if inc.Status != domain.IncidentQueued {
		t.Fatalf("auto: %s", inc.Status)
	}
	var n int
	if err := ib.DB.Bun.NewRaw(`SELECT count(*) FROM river_job WHERE kind = 'dispatch_repair'`).Scan(ctx, &n); err != nil || n != 1 {
		t.Fatalf("dispatch jobs: %d %v", n, err)
	}
	if err := ib.Incidents.DispatchRepair(ctx, inc.ID); err != nil {
		t.Fatal(err)
	}
	if err := ib.Incidents.DispatchRepair(ctx, inc.ID); err != nil { // idempotent
		t.Fatal(err)
	}
	got := ib.Incident(t, inc.ID)
	var runs int
	_ = ib.DB.Bun.NewRaw(`SELECT count(*) FROM project_runs WHERE incident_id = ?`, inc.ID).Scan(ctx, &runs)
	if got.RepairRunID == nil || runs != 1 {
		t.Fatalf("dispatch: %+v runs=%d", got, runs)
	}
	// Regression: close it, a new event reopens it (TRIAGED, then policy).
	if _, err := ib.Queue.RequestCancel(ctx, ib.Owner, *got.RepairRunID); err != nil {
		t.Fatal(err)
	}
	if _, err := ib.Incidents.Decide(ctx, ib.Owner, inc.ID, "close"); err != nil {
		t.Fatal(err)
	}
	again := ib.Send(t, "Auto")
	if again.ID != inc.ID || again.Status != domain.IncidentQueued || again.EventCount != 2 {
		t.Fatalf("regression: %+v", again)
	}
	// A project without a repair command: the dispatch hands it to a person.
	if _, err := ib.Projects.Update(ctx, ib.Owner, ib.Proj.ID, project.ProjectInput{RepairCommand: strp("")}); err != nil {
		t.Fatal(err)
	}
	if err := ib.Incidents.DispatchRepair(ctx, inc.ID); err != nil {
		t.Fatal(err)
	}
	if i := ib.Incident(t, inc.ID); i.Status != domain.IncidentNeedsHuman || i.NeedsHumanReason == "" {
		t.Fatalf("no repair command: %+v", i)
	}
}

func TestInboxListAndBulk(t *testing.T) {
	t.Parallel()
	ib := setupIncidents(t, domain.PolicyObserve)
	ctx := context.Background()
	var ids []uuid.UUID
	for i := 0; i < 5; i++ {
		ids = append(ids, ib.Send(t, fmt.Sprintf("List%d", i)).ID)
		ib.Clock.Advance(time.Second)
	}
	pg, err := ib.Incidents.List(ctx, ib.Owner.OrgID, incident.IncidentFilter{Limit: 2})
	if err != nil || len(pg.Incidents) != 2 || !pg.HasMore || pg.Incidents[0].ID != ids[4] || pg.Counts["TRIAGED"] != 5 {
		t.Fatalf("list: %v %+v", err, pg)
	}
	res, err := ib.Incidents.DecideMany(ctx, ib.Owner, ids[:3], "ignore")
	if err != nil || len(res.Done) != 3 {
		t.Fatalf("bulk: %v %+v", err, res)
	}
	res, _ = ib.Incidents.DecideMany(ctx, ib.Owner, ids[:1], "ignore")
	if len(res.Refused) != 1 {
		t.Fatalf("bulk refusal: %+v", res)
	}
	if _, err := ib.Incidents.DecideMany(ctx, ib.Owner, ids, "approve"); errCode(err) != "unknown_decision" {
		t.Fatalf("bulk approve: %v", err)
	}
	pg, _ = ib.Incidents.List(ctx, ib.Owner.OrgID, incident.IncidentFilter{Status: "ignored"})
	if len(pg.Incidents) != 3 || pg.Counts["IGNORED"] != 3 || pg.Counts["TRIAGED"] != 2 {
		t.Fatalf("status filter: %+v", pg)
	}
	for _, f := range []incident.IncidentFilter{{Status: "NOPE"}, {Environment: "Not A Label!"}, {Page: -1}, {Limit: 500}} {
		if _, err := ib.Incidents.List(ctx, ib.Owner.OrgID, f); !errors.Is(err, domain.ErrInvalid) {
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
		inc := ib.Send(t, "Card"+st)
		ib.Force(t, inc.ID, st)
		if cs, ok := cards.CardStateOf(st); ok {
			want[inc.ID.String()] = cs
		}
		_ = i
		ib.Clock.Advance(time.Second)
	}
	if err := ib.Cards.Refresh(ctx, ib.Proj.ID); err != nil {
		t.Fatal(err)
	}
	card, err := ib.Cards.Get(ctx, ib.Owner.OrgID, ib.Proj.ID)
	if err != nil || card.Source != "anvil-feed" || len(card.Incidents) != 7 {
		t.Fatalf("card: %v %+v", err, card)
	}
	for _, ci := range card.Incidents {
		if want[ci.ID] != ci.State || ci.Since.IsZero() || ci.Title == "" {
			t.Fatalf("card incident %+v, want state %s", ci, want[ci.ID])
		}
	}
	if s, _ := cards.CardStateOf("NEEDS_HUMAN"); s != "OPEN" {
		t.Fatal("NEEDS_HUMAN must be OPEN")
	}
	// Close everything: the card is replaced by the empty list.
	if _, err := ib.DB.Bun.NewRaw(`UPDATE incidents SET status = 'CLOSED'`).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ib.Cards.Refresh(ctx, ib.Proj.ID); err != nil {
		t.Fatal(err)
	}
	var raw string
	_ = ib.DB.Bun.NewRaw(`SELECT incidents::text FROM project_cards WHERE project_id = ?`, ib.Proj.ID).Scan(ctx, &raw)
	if raw != "[]" {
		t.Fatalf("empty card stored as %q", raw)
	}
	// External producer.
	cfg, err := ib.Cards.SetExternal(ctx, ib.Owner, ib.Proj.ID, true)
	if err != nil || cfg.Token == "" || cfg.ConfigID == uuid.Nil {
		t.Fatalf("set external: %v %+v", err, cfg)
	}
	prod, err := ib.Cards.AuthorizeProducer(ctx, "acme", cfg.ConfigID.String(), cfg.Token)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(id, title, state, since string) cards.ExternalIncident {
		return cards.ExternalIncident{ID: &id, Title: &title, State: &state, Since: &since}
	}
	list := []cards.ExternalIncident{mk("x1", "Checkout down", "MITIGATED", "2026-09-16T10:11:12Z")}
	if err := ib.Cards.ReplaceExternal(ctx, prod, &list); err != nil {
		t.Fatal(err)
	}
	ib.Force(t, ib.Send(t, "After external").ID, "TRIAGED")
	if err := ib.Cards.Refresh(ctx, ib.Proj.ID); err != nil { // left alone
		t.Fatal(err)
	}
	card, _ = ib.Cards.Get(ctx, ib.Owner.OrgID, ib.Proj.ID)
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
		if _, err := ib.Cards.AuthorizeProducer(ctx, c.tenant, c.cfg, c.tok); err != cards.ErrCardAuth {
			t.Fatalf("%+v: %v", c, err)
		}
	}
	// Bad bodies: specific 422s, nothing changes.
	bad := map[string][]cards.ExternalIncident{
		"state":  {mk("a", "t", "BROKEN", "2026-09-16T10:11:12Z")},
		"since":  {mk("a", "t", "OPEN", "yesterday")},
		"title":  {mk("a", "", "OPEN", "2026-09-16T10:11:12Z")},
		"twice":  {mk("a", "t", "OPEN", "2026-09-16T10:11:12Z"), mk("a", "t", "OPEN", "2026-09-16T10:11:12Z")},
		"absent": {{}},
	}
	for name, l := range bad {
		l := l
		if err := ib.Cards.ReplaceExternal(ctx, prod, &l); !errors.Is(err, domain.ErrInvalid) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if err := ib.Cards.ReplaceExternal(ctx, prod, nil); errCode(err) != "missing_incidents" {
		t.Fatalf("missing list: %v", err)
	}
	// A new token replaces the old one; handing back refreshes from the store.
	cfg2, _ := ib.Cards.SetExternal(ctx, ib.Owner, ib.Proj.ID, true)
	if cfg2.ConfigID != cfg.ConfigID {
		t.Fatal("config id changed")
	}
	if _, err := ib.Cards.AuthorizeProducer(ctx, "acme", cfg.ConfigID.String(), cfg.Token); err != cards.ErrCardAuth {
		t.Fatalf("old token still works: %v", err)
	}
	back, err := ib.Cards.SetExternal(ctx, ib.Owner, ib.Proj.ID, false)
	if err != nil || back.Token != "" {
		t.Fatalf("hand back: %v %+v", err, back)
	}
	card, _ = ib.Cards.Get(ctx, ib.Owner.OrgID, ib.Proj.ID)
	if card.External || card.Source != "anvil-feed" || len(card.Incidents) != 1 || card.Incidents[0].Title != "After external" {
		t.Fatalf("handed back: %+v", card)
	}
	// A deleted project is no error.
	if err := ib.Cards.Refresh(ctx, uuid.New()); err != nil {
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
		ib.Send(t, fmt.Sprintf("Burst%d", i%3))
	}
	// The refresh is asked for after each batch's commit, by the feed's
	// request loop: flush it, then check that the burst made exactly one.
	if err := ib.Feed.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if n := ib.Jobs(t, "refresh_card"); n != 1 {
		t.Fatalf("%d refresh jobs after a burst, want 1", n)
	}
	if err := ib.Cards.Refresh(ctx, ib.Proj.ID); err != nil {
		t.Fatal(err)
	}
	card, _ := ib.Cards.Get(ctx, ib.Owner.OrgID, ib.Proj.ID)
	if len(card.Incidents) != 3 {
		t.Fatalf("card after the burst: %+v", card.Incidents)
	}
	if v, r, q := ib.CardChanges(t); v != r || q {
		t.Fatalf("after the refresh: version %d, refreshed %d, queued %v", v, r, q)
	}
}

// TestCardRefreshReadsAChangeCommittedWhileItRan is the race where a refresh reads too early:
// a change enqueues its card refresh while a refresh job of the project
// already exists (so none is added), that job starts and reads the store
// before the change commits, and the change commits. The card must still
// end up showing the change, with no periodic sweep.
func TestCardRefreshReadsAChangeCommittedWhileItRan(t *testing.T) {
	t.Parallel()
	ib := setupIncidents(t, domain.PolicyApprove)
	ctx := context.Background()
	inc := ib.Send(t, "raced")
	if err := ib.Feed.Stop(ctx); err != nil { // the waiting refresh job exists
		t.Fatal(err)
	}
	if n := ib.Jobs(t, "refresh_card"); n != 1 {
		t.Fatalf("%d refresh jobs waiting, want 1", n)
	}
	// The change: the incident moves on (as a repair's pull request does),
	// in a transaction that stays open while the refresh runs.
	tx, err := ib.DB.Bun.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	if _, err := tx.ExecContext(ctx, `UPDATE incidents SET status = ? WHERE id = ?`, domain.IncidentPROpen, inc.ID); err != nil {
		t.Fatal(err)
	}
	if err := cards.EnqueueRefresh(ctx, ib.Store, tx, ib.Proj.ID); err != nil {
		t.Fatal(err)
	}
	// The waiting job starts now, before the change commits.
	refreshed := make(chan error, 1)
	go func() { refreshed <- ib.Cards.Refresh(ctx, ib.Proj.ID) }()
	// Let it read the store (it waits for the change, or returns).
	for deadline := time.Now().Add(10 * time.Second); ; {
		var waiting bool
		if err := ib.DB.Bun.NewRaw(`SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
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
	if _, err := ib.DB.Bun.NewRaw(`DELETE FROM river_job WHERE kind = 'refresh_card'`).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	card, _ := ib.Cards.Get(ctx, ib.Owner.OrgID, ib.Proj.ID)
	if len(card.Incidents) != 1 || card.Incidents[0].State != cards.CardInvestigating {
		t.Fatalf("the card missed the change that committed while it refreshed: %+v", card.Incidents)
	}
	if v, r, q := ib.CardChanges(t); v != r || q {
		t.Fatalf("after the refresh: version %d, refreshed %d, queued %v", v, r, q)
	}
	// A change after the refresh finished gets a job of its own, even
	// while the finished job is still marked running.
	if _, err := ib.Incidents.Decide(ctx, ib.Owner, inc.ID, incident.DecisionClose); err != nil {
		t.Fatal(err)
	}
	if n := ib.Jobs(t, "refresh_card"); n != 1 {
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
	if err := ib.Feed.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	ib.Send(t, "lost")
	if n := ib.Jobs(t, "refresh_card"); n != 0 {
		t.Fatalf("%d jobs with the request loop stopped", n)
	}
	n, err := ib.Cards.SweepStale(ctx, 3*time.Minute)
	if err != nil || n != 1 || ib.Jobs(t, "refresh_card") != 1 {
		t.Fatalf("sweep: %d %v, %d jobs", n, err, ib.Jobs(t, "refresh_card"))
	}
	// The job is lost too: the sweep leaves it its window, then repeats it.
	ib.DB.Bun.NewRaw(`DELETE FROM river_job WHERE kind = 'refresh_card'`).Exec(ctx)
	if n, err := ib.Cards.SweepStale(ctx, 3*time.Minute); err != nil || n != 0 {
		t.Fatalf("sweep within the window of a queued refresh: %d %v", n, err)
	}
	ib.Clock.Advance(4 * time.Minute)
	if n, err := ib.Cards.SweepStale(ctx, 3*time.Minute); err != nil || n != 1 || ib.Jobs(t, "refresh_card") != 1 {
		t.Fatalf("sweep after the window: %d %v", n, err)
	}
	// Once the card is current the sweep finds nothing.
	if err := ib.Cards.Refresh(ctx, ib.Proj.ID); err != nil {
		t.Fatal(err)
	}
	ib.DB.Bun.NewRaw(`DELETE FROM river_job WHERE kind = 'refresh_card'`).Exec(ctx)
	if n, err := ib.Cards.SweepStale(ctx, 3*time.Minute); err != nil || n != 0 {
		t.Fatalf("sweep of a current card: %d %v", n, err)
	}
}

// TestClosingWithdrawsTheQueuedRepair: closing (or ignoring) an incident
// whose repair run still waits in the queue cancels that run; the incident
// stays closed (the run's end does not send it to NEEDS_HUMAN).
func TestClosingWithdrawsTheQueuedRepair(t *testing.T) {
	t.Parallel()
	for _, decision := range []string{incident.DecisionClose, incident.DecisionIgnore} {
		ib := setupIncidents(t, domain.PolicyApprove)
		ctx := context.Background()
		inc := ib.Send(t, "withdraw-"+decision)
		approved, err := ib.Incidents.Decide(ctx, ib.Owner, inc.ID, incident.DecisionApprove)
		if err != nil || approved.RepairRunID == nil {
			t.Fatalf("approve: %v %+v", err, approved)
		}
		done, err := ib.Incidents.Decide(ctx, ib.Owner, inc.ID, decision)
		if err != nil {
			t.Fatalf("%s: %v", decision, err)
		}
		run := ib.Run(t, *approved.RepairRunID)
		if run.Status() != runs.StatusCanceled || run.FailureReason == nil || *run.FailureReason != "incident_"+decision+"d" {
			t.Fatalf("%s: repair run %s %v", decision, run.Status(), run.FailureReason)
		}
		if why := runs.WhyEnded(run, "", 0, 0); !strings.Contains(why, "its incident was") || strings.Contains(why, "_") {
			t.Fatalf("%s: the run page would say %q", decision, why)
		}
		if got := ib.Incident(t, inc.ID); got.Status != done.Status || (got.Status != domain.IncidentClosed && got.Status != domain.IncidentIgnored) {
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
	var snds []*feed.FeedSender
	for i := 0; i < senders; i++ {
		_, tok, err := ib.Feed.CreateConnection(ctx, ib.Owner, ib.Proj.ID, fmt.Sprintf("s%d", i))
		if err != nil {
			t.Fatal(err)
		}
		snd, err := ib.Feed.Authenticate(ctx, tok)
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
				res, err := ib.Feed.Ingest(ctx, snds[s], "127.0.0.1", raws)
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
	if err := ib.DB.Bun.NewRaw(`SELECT count(*), count(DISTINCT connection_id) FROM feed_events WHERE project_id = ?`, ib.Proj.ID).Scan(ctx, &stored, &conns); err != nil {
		t.Fatal(err)
	}
	if err := ib.DB.Bun.NewRaw(`SELECT COALESCE(sum(event_count), 0) FROM incidents WHERE project_id = ?`, ib.Proj.ID).Scan(ctx, &counted); err != nil {
		t.Fatal(err)
	}
	if stored != want || counted != want || conns != senders {
		t.Fatalf("stored %d, counted %d, from %d connections; want %d, %d, %d", stored, counted, conns, want, want, senders)
	}
}

// TestEventsGoWithTheirIncidents: an incident's stored events are deleted
// with it — directly, and when its project or organisation is deleted
// (migration 12's trigger, in place of a per-row foreign key) — and no
// other incident's events go with them.
func TestEventsGoWithTheirIncidents(t *testing.T) {
	t.Parallel()
	ib := setupIncidents(t, domain.PolicyObserve)
	ctx := context.Background()
	a, bb := ib.Send(t, "first fault"), ib.Send(t, "second fault")
	ib.Send(t, "first fault")
	count := func(where string, args ...any) int {
		t.Helper()
		n, err := ib.DB.Bun.NewSelect().Table("feed_events").Where(where, args...).Count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return int(n)
	}
	if count("incident_id = ?", a.ID) != 2 || count("incident_id = ?", bb.ID) != 1 {
		t.Fatal("events not stored as expected")
	}
	if _, err := ib.DB.Bun.NewRaw(`DELETE FROM incidents WHERE id = ?`, a.ID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if count("incident_id = ?", a.ID) != 0 || count("incident_id = ?", bb.ID) != 1 {
		t.Fatal("deleting an incident left its events, or took another's")
	}
	if _, err := ib.DB.Bun.NewRaw(`DELETE FROM projects WHERE id = ?`, ib.Proj.ID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count("true"); n != 0 {
		t.Fatalf("deleting the project left %d events", n)
	}
}
