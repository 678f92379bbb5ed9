package alert_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/alert"
	"anvil/domain/incident"
	runs "anvil/domain/run"
)

// The incident rules, each once per cause: new, waiting for approval (the
// policy), needs a human, PR opened.
func TestIncidentRulesFireOncePerCause(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.destination(t, alert.KindWebhook, "http://127.0.0.1:1/")
	if _, err := b.db.Bun.NewRaw(`UPDATE projects SET repair_command = './fix.sh'`).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.sv.Feed.PutBinding(ctx, b.owner, b.proj.ID, "production", domain.PolicyApprove); err != nil {
		t.Fatal(err)
	}
	_, tok, err := b.sv.Feed.CreateConnection(ctx, b.owner, b.proj.ID, "api-2") // a sender that knows the new policy
	if err != nil {
		t.Fatal(err)
	}
	if b.sender, err = b.sv.Feed.Authenticate(ctx, tok); err != nil {
		t.Fatal(err)
	}
	b.ingest(t, feedEvent("Approve me"))
	var inc uuid.UUID
	if err := b.db.Bun.NewRaw(`SELECT id FROM incidents`).Scan(ctx, &inc); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{domain.AlertIncidentNew: 1, domain.AlertIncidentApproval: 1}
	check := func(step string) {
		t.Helper()
		got := kinds(b.jobs(t))
		for _, k := range domain.AlertKinds {
			if got[k] != want[k] {
				t.Fatalf("%s: %s fired %d times, want %d (all: %v)", step, k, got[k], want[k], got)
			}
		}
	}
	check("ingest")
	repair := func() *runs.Run {
		t.Helper()
		if _, err := b.sv.Incidents.Decide(ctx, b.owner, inc, incident.DecisionApprove); err != nil {
			t.Fatal(err)
		}
		if err := b.sv.Incidents.DispatchRepair(ctx, inc); err != nil {
			t.Fatal(err)
		}
		var runID uuid.UUID
		if err := b.db.Bun.NewRaw(`SELECT repair_run_id FROM incidents WHERE id = ?`, inc).Scan(ctx, &runID); err != nil {
			t.Fatal(err)
		}
		run, err := b.sv.Queue.RunByID(ctx, runID)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.sv.Incidents.RepairStarted(ctx, run); err != nil {
			t.Fatal(err)
		}
		return run
	}
	run := repair()
	check("approved and started")
	if err := b.sv.Incidents.RepairNeedsHuman(ctx, run, "the tests still fail"); err != nil {
		t.Fatal(err)
	}
	want[domain.AlertRepairNeedsHuman] = 1
	check("needs human")
	if _, err := b.sv.Queue.ReportTerminal(ctx, run.ID, runs.TerminalReport{State: runs.StateFailed}); err != nil {
		t.Fatal(err)
	}
	run = repair()
	if err := b.sv.Incidents.RepairPROpened(ctx, run, "https://git.example/shop/pull/7"); err != nil {
		t.Fatal(err)
	}
	want[domain.AlertRepairPROpened] = 1
	check("pr opened")
}

// The default branch: failed (each failing run), recovered (the first
// pass after a failure only); other branches and cancels say nothing.
func TestRunRulesFireOncePerCause(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.destination(t, alert.KindWebhook, "http://127.0.0.1:1/")
	finish := func(branch, state string) {
		t.Helper()
		r, err := b.sv.Queue.AcceptManual(ctx, b.owner, b.proj.ID, branch)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.sv.Queue.Claim(ctx, r.ID, "test"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.sv.Queue.ReportTerminal(ctx, r.ID, runs.TerminalReport{State: state}); err != nil {
			t.Fatal(err)
		}
	}
	finish("main", runs.StatePassed)
	finish("feature", runs.StateFailed)
	finish("main", runs.StateFailed)
	finish("main", runs.StateCanceled)
	finish("main", runs.StatePassed)
	finish("main", runs.StatePassed)
	got := kinds(b.jobs(t))
	if got[domain.AlertRunFailed] != 1 || got[domain.AlertRunRecovered] != 1 || len(got) != 2 {
		t.Fatalf("kinds %v", got)
	}
}
