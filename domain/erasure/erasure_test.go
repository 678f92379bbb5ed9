package erasure_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/db"
	"anvil/db/testdb"
	"anvil/domain"
	"anvil/domain/alert"
	"anvil/domain/erasure"
	"anvil/domain/forge"
	"anvil/domain/incident"
	"anvil/domain/monitor"
	"anvil/domain/project"
	"anvil/domain/retention"
	"anvil/domain/run"
	"anvil/domain/runcache"
	"anvil/domain/runsecret"
	"anvil/domain/secret"
	"anvil/domain/sourcemap"
	"anvil/domain/webhook"
	"anvil/domain/wiring"
)

// erasureBundle is the whole domain wired as the command wires it, with a
// River client that is never started: every job a change inserts stays
// pending, so the walk also sees the jobs that name a project.
type erasureBundle struct {
	sv     *wiring.Services
	db     *db.DB
	alerts *alert.Service
	owner  *domain.Principal
}

func setupErasure(t *testing.T) *erasureBundle {
	t.Helper()
	d := testdb.New(t)
	keys, err := secret.NewKeyring(make([]byte, 32), nil)
	if err != nil {
		t.Fatal(err)
	}
	sv := wiring.NewServices(d, keys, nil, wiring.Options{AlertsAllowPrivate: true}) // hooks.example does not resolve
	// No fold of the feed's own takes the delta populate writes.
	sv.Feed.SyncFold = true
	b := &erasureBundle{sv: sv, db: d, alerts: sv.Alerts}
	ctx := context.Background()
	if _, err := sv.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sv.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	res, err := sv.Accounts.Bootstrap(ctx, "acme", "owner@acme.test", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if b.owner, err = sv.Accounts.Authenticate(ctx, res.Token); err != nil {
		t.Fatal(err)
	}
	return b
}

// populated is a project with rows in every table a project has rows in.
type populated struct {
	project  *domain.Project
	feedTok  string
	incident uuid.UUID
}

// populate builds a project of pr's organisation with rows in every table
// that holds a project's data: runs (finished, queued, a repair) with logs
// and a forge report, the run index, secrets, its cache's row, a webhook with its ledger and
// refusals, a feed connection with bindings, events, incidents and their
// transitions and outcomes, its card, alert rules — and the pending jobs
// all of it inserted.
func (b *erasureBundle) populate(t *testing.T, pr *domain.Principal, slug string) populated {
	t.Helper()
	ctx := context.Background()
	sv := b.sv
	p, err := sv.Projects.Create(ctx, pr, project.ProjectInput{Slug: &slug, RepoURL: strp("https://git.example/" + slug + ".git"),
		DefaultBranch: strp("main"), RunCommand: strp("make test"), RepairCommand: strp("./fix.sh")})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := runsecret.New(sv.Store).Put(ctx, pr, p.ID, "API_KEY", "s3cret-value"); err != nil {
		t.Fatal(err)
	}
	// Its cache, cleared once: the row and the pending clear job.
	if _, err := runcache.New(sv.Store, 0).Clear(ctx, pr, p.ID); err != nil {
		t.Fatal(err)
	}
	// A webhook delivery: the ledger and a run, which then runs and fails.
	if _, err := sv.Webhooks.Put(ctx, pr, p.ID, "github", webhook.WebhookInput{Enabled: boolp(true)}); err != nil {
		t.Fatal(err)
	}
	m, err := sv.Webhooks.VerificationMaterial(ctx, p.ID, "github")
	if err != nil {
		t.Fatal(err)
	}
	res, err := sv.Webhooks.Deliver(ctx, m.Verification(), push(forge.GitHub, "d-"+slug, "main", shaA))
	if err != nil || res.RunID == nil {
		t.Fatalf("deliver: %+v %v", res, err)
	}
	if err := sv.Webhooks.CountRefusal(ctx, p.ID, "gitlab", webhook.RefusedNotConfigured, "no webhook"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sv.Queue.Claim(ctx, *res.RunID, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := sv.Queue.Start(ctx, *res.RunID, false); err != nil {
		t.Fatal(err)
	}
	r, err := sv.Queue.RunByID(ctx, *res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	w := sv.Logs.Writer(ctx, r)
	fmt.Fprintf(w, "step 1\nstep 2\n")
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	code := 2
	if _, err := sv.Queue.ReportTerminal(ctx, *res.RunID, run.TerminalReport{State: run.StateFailed, ExitCode: &code, FailureReason: run.ReasonExitCode}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Bun.NewRaw(`INSERT INTO run_forge_reports (run_id, provider, anvil_status, state) VALUES (?, 'github', 'failed', 'failure')`,
		*res.RunID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Bun.NewRaw(`INSERT INTO run_patches (run_id, patch) VALUES (?, 'diff --git a/x b/x')`, *res.RunID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Bun.NewRaw(`INSERT INTO run_connections (run_id, seq, host, port, verdict, started_at) VALUES (?, 1, 'registry.npmjs.org', 443, 'allowed', now())`,
		*res.RunID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	// Its pipeline's steps and a kept file (docs/pipelines.md).
	if err := sv.Logs.SetSteps(ctx, r, []run.Step{{Index: 0, Key: "build", Name: "build", Status: run.StepFailed}}); err != nil {
		t.Fatal(err)
	}
	if err := sv.Logs.SaveArtifact(ctx, r.ID, "build", "dist/app.txt", []byte("built")); err != nil {
		t.Fatal(err)
	}
	// A service of its pod, with the end of its log (docs/images.md, "Services").
	if err := sv.Logs.StartService(ctx, r, &run.Service{Name: "db", Status: run.ServiceStopped, Log: "db is up\n", LogBytes: 9}); err != nil {
		t.Fatal(err)
	}
	// Queued runs: one manual, then a repair.
	if _, err := sv.Queue.AcceptManual(ctx, pr, p.ID, "main"); err != nil {
		t.Fatal(err)
	}
	// Alerts on new incidents, to a destination of the organisation.
	dest, _, err := b.alerts.Create(ctx, pr, alert.Input{Name: strp("ops-" + slug), Kind: strp(alert.KindWebhook), URL: strp("https://hooks.example/" + slug)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.alerts.PutRules(ctx, pr, p.ID, []alert.Rule{{Kind: domain.AlertIncidentNew, Enabled: true, Destinations: []uuid.UUID{dest.ID}}}); err != nil {
		t.Fatal(err)
	}
	// The feed: a binding, a connection, events grouped into incidents.
	if _, err := sv.Feed.PutBinding(ctx, pr, p.ID, "production", "approve"); err != nil {
		t.Fatal(err)
	}
	conn, tok, err := sv.Feed.CreateConnection(ctx, pr, p.ID, "api")
	if err != nil {
		t.Fatal(err)
	}
	snd, err := sv.Feed.Authenticate(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	var raws []json.RawMessage
	for i := range 6 {
		raws = append(raws, feedEvent(uuid.NewString(), fmt.Sprintf("%s failure %c", slug, 'a'+i%3)))
	}
	if r, err := sv.Feed.Ingest(ctx, snd, "127.0.0.1", raws); err != nil || len(r.Accepted) != len(raws) {
		t.Fatalf("ingest: %+v %v", r, err)
	}
	if _, err := b.db.Bun.NewRaw(`INSERT INTO feed_outcomes (connection_id, hour, reason_code, count, last_at) VALUES (?, date_trunc('hour', now()), 'accepted', 6, now())`,
		conn.ID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	var inc uuid.UUID
	if err := b.db.Bun.NewRaw(`SELECT id FROM incidents WHERE project_id = ? ORDER BY first_seen LIMIT 1`, p.ID).Scan(ctx, &inc); err != nil {
		t.Fatal(err)
	}
	if _, err := sv.Incidents.Decide(ctx, pr, inc, "approve"); err != nil {
		t.Fatal(err)
	}
	if err := sv.Cards.Refresh(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	// Retention (docs/retention.md): the project's policy, its daily
	// event count, its last clean-up's figures, an incident's sampling.
	budget := int64(1000)
	if _, err := sv.Retention.PutProjectPolicy(ctx, pr, p.ID, retention.Document{DailyEventBudget: &budget}); err != nil {
		t.Fatal(err)
	}
	if refused := sv.Retention.Budget().Admit(ctx, p.OrgID, p.ID, len(raws)); refused != nil {
		t.Fatal(refused)
	}
	if err := sv.Retention.Budget().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sv.Retention.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Bun.NewRaw(`INSERT INTO incident_samples (incident_id, sampled) VALUES (?, 2)`, inc).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	// A cron monitor with runs, its state and an incident of its own.
	if _, err := sv.Monitors.Create(ctx, pr, p.ID, monitor.Input{Slug: strp("backup"), Schedule: &monitor.Schedule{Type: "crontab", Value: "0 2 * * *"}}); err != nil {
		t.Fatal(err)
	}
	for _, status := range []string{monitor.StatusOK, monitor.StatusError} {
		if _, err := sv.Monitors.CheckIn(ctx, p.ID, monitor.CheckInInput{Slug: "backup", Status: status, Source: "ping"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sv.Monitors.FlushUsage(ctx); err != nil { // the day's check-in count
		t.Fatal(err)
	}
	// Source maps (docs/sourcemap.md): an upload's bundle, files and contents.
	mapData, err := os.ReadFile("../sourcemap/testdata/build1/app.js.map")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sv.SourceMaps.Upload(ctx, pr, p.ID, "shop@1", "", []sourcemap.PlainFile{
		{Name: "assets/app.js", Data: []byte("function a(){}\n//# sourceMappingURL=app.js.map\n")}, {Name: "assets/app.js.map", Data: mapData}}); err != nil {
		t.Fatal(err)
	}
	// Releases and the fix chain's ancestry answers (docs/releases.md), as
	// the feed and the check_ancestry job leave them.
	if _, err := b.db.Bun.NewRaw(`WITH r AS (INSERT INTO releases (project_id, environment, version, first_seen, last_seen, event_count)
			VALUES (?0, 'production', 'shop@1', now(), now(), 1) RETURNING project_id),
		a AS (INSERT INTO release_ancestry (project_id, fix_sha, release_sha, answer, checked_at) VALUES (?0, 'aaaa', 'bbbb', 'yes', now()) RETURNING project_id)
		INSERT INTO release_ancestry_questions (project_id, fix_sha, release_sha) VALUES (?0, 'aaaa', 'cccc')`, p.ID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	return populated{project: p, feedTok: tok, incident: inc}
}

// pendingDelta adds an incident delta not folded yet to p's incident: the
// feed folds its own before it answers here (SyncFold), and a later ingest
// would fold this one too, so it comes after the last populate.
func (b *erasureBundle) pendingDelta(t *testing.T, p populated) {
	t.Helper()
	if _, err := b.db.Bun.NewRaw(`INSERT INTO incident_deltas (incident_id, org_id, project_id, environment, n, last_seen, latest_event_id, count_release, browser)
		VALUES (?, ?, ?, 'production', 1, now(), '', true, false)`, p.incident, p.project.OrgID, p.project.ID).Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// ownIDs are the ids of everything that belongs to the project: a row that
// names one of them belongs to it.
func (b *erasureBundle) ownIDs(t *testing.T, projectID uuid.UUID) []string {
	t.Helper()
	var ids []string
	if err := b.db.Bun.NewRaw(`SELECT id::text FROM project_runs WHERE project_id = ?0
		UNION ALL SELECT id::text FROM incidents WHERE project_id = ?0
		UNION ALL SELECT id::text FROM feed_connections WHERE project_id = ?0
		UNION ALL SELECT config_id::text FROM project_cards WHERE project_id = ?0`, projectID).Scan(context.Background(), &ids); err != nil {
		t.Fatal(err)
	}
	return append(ids, projectID.String())
}

// pendingJobs is the part of River's table that may still run.
const pendingJobs = `state IN ('available', 'scheduled', 'retryable', 'pending')`

// walk counts, in every table of the schema (read from the catalogue, so a
// table added by any migration is walked), the rows whose text names one
// of ids — a column, a jsonb value, an array element. River's jobs count
// only while they may still run.
func walk(t *testing.T, d *db.DB, ids []string) map[string]int {
	t.Helper()
	ctx := context.Background()
	var tables []string
	if err := d.Bun.NewRaw(`SELECT table_name FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1`).Scan(ctx, &tables); err != nil {
		t.Fatal(err)
	}
	if len(tables) < 20 {
		t.Fatalf("the catalogue lists only %d tables: %v", len(tables), tables)
	}
	pattern := strings.Join(ids, "|")
	out := map[string]int{}
	for _, table := range tables {
		q := fmt.Sprintf(`SELECT count(*) FROM %q t WHERE t::text ~ $1`, table)
		if table == "river_job" {
			q += " AND " + pendingJobs
		}
		var n int
		if err := d.SQL.QueryRowContext(ctx, q, pattern).Scan(&n); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		out[table] = n
	}
	return out
}

// notAProjects are the tables whose rows never belong to a project: the
// organisation's people and their access, alert destinations and their
// log (which name no project), River's and the migrator's bookkeeping.
var notAProjects = []string{"organizations", "users", "memberships", "sessions", "session_reveals", "api_tokens", "invitations",
	"password_resets", "sourcemap_chunks", "alert_destinations", "alert_deliveries", "alert_minutes", "organization_erasures",
	"bun_migrations", "bun_migration_locks", "river_client", "river_client_queue", "river_leader", "river_migration", "river_notification", "river_queue",
	// The workers' image stores are the hosts', shared by every organisation (docs/images.md).
	"image_stores", "image_store_clear"}

// erase runs erasure passes as the erase job would, until done.
func erase(t *testing.T, pass func() (erasure.Report, error)) erasure.Report {
	t.Helper()
	total := erasure.Report{Removed: map[string]int64{}}
	for range 1000 {
		rep, err := pass()
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range rep.Removed {
			total.Removed[k] += v
		}
		if rep.Done {
			total.Done = true
			return total
		}
		if rep.Waiting {
			t.Fatal("erasure waits for a run, but none runs")
		}
	}
	t.Fatal("erasure did not finish")
	return total
}

// TestErasureLeavesNoRowOfTheProject builds a project with rows in every
// table of a project, deletes it and erases it in small batches, and walks
// every table of the schema: no row names the project or anything of it
// any more (the audit log keeps its entries, by design), while the
// organisation's other project keeps every row. A table that a migration
// adds for a project's data fails the first walk until this test fills it
// and the erasure clears it.
func TestErasureLeavesNoRowOfTheProject(t *testing.T) {
	t.Parallel()
	b := setupErasure(t)
	ctx := context.Background()
	gone := b.populate(t, b.owner, "shop")
	kept := b.populate(t, b.owner, "blog")
	b.pendingDelta(t, gone)
	b.pendingDelta(t, kept)
	goneIDs, keptIDs := b.ownIDs(t, gone.project.ID), b.ownIDs(t, kept.project.ID)

	before := walk(t, b.db, goneIDs)
	for table, n := range before {
		if n == 0 && !slices.Contains(notAProjects, table) {
			t.Errorf("table %s holds no row of the populated project: populate must fill it (and the erasure clear it), or notAProjects list it", table)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	keptBefore := walk(t, b.db, keptIDs)

	// The typed confirmation must be the slug; a member may not delete.
	if _, err := b.sv.Erasure.DeleteProject(ctx, b.owner, gone.project.ID, "blog"); errCode(err) != "confirmation_mismatch" {
		t.Fatalf("wrong confirmation: %v", err)
	}
	if _, err := b.sv.Accounts.AddMember(ctx, b.owner, "member@acme.test", "correct horse battery", domain.RoleMember); err != nil {
		t.Fatal(err)
	}
	_, member, err := b.sv.Accounts.Login(ctx, "member@acme.test", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.sv.Erasure.DeleteProject(ctx, member, gone.project.ID, "shop"); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("a member deleted a project: %v", err)
	}
	if _, err := b.sv.Erasure.DeleteProject(ctx, b.owner, gone.project.ID, "shop"); err != nil {
		t.Fatal(err)
	}

	// Gone at once: lists, lookups, the inbox, acceptance, tokens, webhooks.
	if _, err := b.sv.Projects.Get(ctx, b.owner.OrgID, gone.project.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("get after delete: %v", err)
	}
	ps, _ := b.sv.Projects.List(ctx, b.owner.OrgID)
	if len(ps) != 1 || ps[0].ID != kept.project.ID {
		t.Errorf("list after delete: %+v", ps)
	}
	page, err := b.sv.Incidents.List(ctx, b.owner.OrgID, incident.IncidentFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, inc := range page.Incidents {
		if inc.ProjectID == gone.project.ID {
			t.Errorf("the inbox lists %s of the deleted project", inc.ID)
		}
	}
	if _, err := b.sv.Incidents.Get(ctx, b.owner.OrgID, gone.incident); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("incident of a deleted project: %v", err)
	}
	if _, err := b.sv.Queue.AcceptManual(ctx, b.owner, gone.project.ID, "main"); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("run accepted for a deleted project: %v", err)
	}
	if _, err := b.sv.Feed.Authenticate(ctx, gone.feedTok); !errors.Is(err, domain.ErrUnauthorized) {
		t.Errorf("the deleted project's feed token still authenticates: %v", err)
	}
	if _, err := b.sv.Webhooks.CachedVerificationMaterial(ctx, gone.project.ID, "github"); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("webhook material of a deleted project: %v", err)
	}
	// The slug is free at once.
	again, err := b.sv.Projects.Create(ctx, b.owner, project.ProjectInput{Slug: strp("shop"), RepoURL: strp("https://git.example/shop2.git"),
		DefaultBranch: strp("main"), RunCommand: strp("make")})
	if err != nil {
		t.Fatalf("the slug of a deleted project: %v", err)
	}

	// Retention leaves a deleted project to its erasure: no clean-up of it
	// (its record stays as it was), no daily count.
	cleanedAt := func() (at []string) {
		if err := b.db.Bun.NewRaw(`SELECT started_at::text FROM retention_cleanups WHERE project_id = ?`, gone.project.ID).Scan(ctx, &at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	wasCleaned := cleanedAt()
	if _, err := b.sv.Retention.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if got := cleanedAt(); !slices.Equal(got, wasCleaned) {
		t.Errorf("the clean-up started on the deleted project: %v, was %v", got, wasCleaned)
	}
	b.sv.Retention.Budget().Admit(ctx, b.owner.OrgID, gone.project.ID, 5)
	if err := b.sv.Retention.Budget().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var counted int64
	if err := b.db.Bun.NewRaw(`SELECT COALESCE(sum(events), 0) FROM feed_daily_usage WHERE project_id = ?`, gone.project.ID).Scan(ctx, &counted); err != nil || counted != 6 {
		t.Errorf("daily count of the deleted project: %d (%v), want the 6 from before", counted, err)
	}

	b.sv.Erasure.Batch = 3 // many small transactions, as a large project has
	rep := erase(t, func() (erasure.Report, error) { return b.sv.Erasure.EraseProject(ctx, gone.project.ID) })
	// 6 events from the feed and the event of the monitor's failed run.
	if rep.Removed["feed_events"] != 7 || rep.Removed["projects"] != 1 || rep.Removed["project_runs"] != 3 {
		t.Errorf("removed %v", rep.Removed)
	}

	after := walk(t, b.db, goneIDs)
	for table, n := range after {
		if n > 0 && table != "audit_log" {
			t.Errorf("after the erasure, %d rows of %s still name the project", n, table)
		}
	}
	var kinds []string
	if err := b.db.Bun.NewRaw(`SELECT kind FROM audit_log WHERE target = 'shop' ORDER BY id`).Scan(ctx, &kinds); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(kinds, domain.AuditProjectDeleted) || kinds[len(kinds)-1] != erasure.AuditProjectErased {
		t.Errorf("audit of the deletion: %v", kinds)
	}
	if got := walk(t, b.db, keptIDs); !mapsEqual(got, keptBefore) {
		t.Errorf("the other project lost rows:\nbefore %v\nafter  %v", keptBefore, got)
	}
	if _, err := b.sv.Projects.Get(ctx, b.owner.OrgID, again.ID); err != nil {
		t.Errorf("the new project with the old slug: %v", err)
	}
	// Erasing again is done at once; a live project is refused.
	if rep, err := b.sv.Erasure.EraseProject(ctx, gone.project.ID); err != nil || !rep.Done {
		t.Errorf("erase again: %+v %v", rep, err)
	}
	if _, err := b.sv.Erasure.EraseProject(ctx, kept.project.ID); !errors.Is(err, erasure.ErrLiveProject) {
		t.Errorf("erase a live project: %v", err)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestErasureLeavesNoRowOfTheOrganization deletes an organisation with a
// populated project, members, sessions, tokens, invitations and an alert
// log, erases it, and walks every table: nothing names it, its projects or
// anything of them; its people stay (they may belong elsewhere) and the
// other organisation keeps every row.
func TestErasureLeavesNoRowOfTheOrganization(t *testing.T) {
	t.Parallel()
	b := setupErasure(t)
	ctx := context.Background()
	res, err := b.sv.Accounts.Bootstrap(ctx, "doomed", "boss@doomed.test", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	boss, err := b.sv.Accounts.Authenticate(ctx, res.Token)
	if err != nil {
		t.Fatal(err)
	}
	gone := b.populate(t, boss, "shop")
	kept := b.populate(t, b.owner, "shop")
	if _, err := b.sv.Accounts.AddMember(ctx, boss, "dev@doomed.test", "correct horse battery", domain.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	_, dev, err := b.sv.Accounts.Login(ctx, "dev@doomed.test", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.sv.Accounts.CreateInvitation(ctx, boss, "new@doomed.test", domain.RoleMember); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Bun.NewRaw(`INSERT INTO alert_deliveries (destination_id, message_id, kind, status)
		SELECT id, 'msg_1', 'incident.new', 'delivered' FROM alert_destinations WHERE org_id = ?`, boss.OrgID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Bun.NewRaw(`INSERT INTO alert_minutes (destination_id, minute, sent)
		SELECT id, date_trunc('minute', now()), 1 FROM alert_destinations WHERE org_id = ?`, boss.OrgID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	audit := "400d"
	if _, err := b.sv.Retention.PutOrgPolicy(ctx, boss, retention.Document{Audit: &audit}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.sv.Retention.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	// The organisation's destinations: their delivery log and per-minute
	// counts name them, not the organisation.
	var dests []string
	if err := b.db.Bun.NewRaw(`SELECT id::text FROM alert_destinations WHERE org_id = ?`, boss.OrgID).Scan(ctx, &dests); err != nil {
		t.Fatal(err)
	}
	ids := append(append(b.ownIDs(t, gone.project.ID), boss.OrgID.String()), dests...)
	for _, table := range []string{"alert_deliveries", "alert_minutes", "retention_policies", "retention_cleanups"} {
		if n := walk(t, b.db, ids)[table]; n == 0 {
			t.Fatalf("%s holds no row of the organisation: the test must fill it", table)
		}
	}
	keptBefore := walk(t, b.db, append(b.ownIDs(t, kept.project.ID), b.owner.OrgID.String()))

	if err := b.sv.Erasure.DeleteOrganization(ctx, dev, boss.OrgID, "doomed"); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("an admin deleted the organisation: %v", err)
	}
	if err := b.sv.Erasure.DeleteOrganization(ctx, boss, boss.OrgID, "acme"); errCode(err) != "confirmation_mismatch" {
		t.Fatalf("wrong confirmation: %v", err)
	}
	if err := b.sv.Erasure.DeleteOrganization(ctx, b.owner, boss.OrgID, "doomed"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("another organisation's owner deleted it: %v", err)
	}
	if err := b.sv.Erasure.DeleteOrganization(ctx, boss, boss.OrgID, "doomed"); err != nil {
		t.Fatal(err)
	}
	// Every way in is closed at once.
	if _, err := b.sv.Accounts.Authenticate(ctx, res.Token); !errors.Is(err, domain.ErrUnauthorized) {
		t.Errorf("the owner's API token still works: %v", err)
	}
	if _, _, err := b.sv.Accounts.Login(ctx, "dev@doomed.test", "correct horse battery"); err == nil {
		t.Errorf("a member of the deleted organisation logged in")
	}
	if _, err := b.sv.Feed.Authenticate(ctx, gone.feedTok); !errors.Is(err, domain.ErrUnauthorized) {
		t.Errorf("a feed token of the deleted organisation still authenticates: %v", err)
	}

	b.sv.Erasure.Batch = 4
	erase(t, func() (erasure.Report, error) { return b.sv.Erasure.EraseOrganization(ctx, boss.OrgID) })
	for table, n := range walk(t, b.db, ids) {
		if n > 0 {
			t.Errorf("after the erasure, %d rows of %s still name the organisation or its project", n, table)
		}
	}
	var people int
	if err := b.db.Bun.NewRaw(`SELECT count(*) FROM users WHERE email IN ('boss@doomed.test', 'dev@doomed.test')`).Scan(ctx, &people); err != nil || people != 2 {
		t.Errorf("people of the erased organisation: %d %v", people, err)
	}
	if got := walk(t, b.db, append(b.ownIDs(t, kept.project.ID), b.owner.OrgID.String())); !mapsEqual(got, keptBefore) {
		t.Errorf("the other organisation lost rows:\nbefore %v\nafter  %v", keptBefore, got)
	}
	// The slug is free again.
	if _, err := b.sv.Accounts.Bootstrap(ctx, "doomed", "boss@doomed.test", "correct horse battery"); err != nil {
		t.Errorf("the slug of an erased organisation: %v", err)
	}
}

// TestTombstonedProjectIsLockedByNothingButTheErasure: once deleted, a
// project is not found by the per-project lock every mutation takes
// (Store.WithProject), nor by the readers of live projects — only
// WithAnyProject (the erasure, a run's transitions) still reaches it
// (domain/tombstone.go).
func TestTombstonedProjectIsLockedByNothingButTheErasure(t *testing.T) {
	t.Parallel()
	b := setupErasure(t)
	ctx := context.Background()
	p, err := b.sv.Projects.Create(ctx, b.owner, project.ProjectInput{Slug: strp("shop"), RepoURL: strp("https://git.example/shop.git"),
		DefaultBranch: strp("main"), RunCommand: strp("make test")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.sv.Erasure.DeleteProject(ctx, b.owner, p.ID, "shop"); err != nil {
		t.Fatal(err)
	}
	called := false
	err = b.sv.Store.WithProject(ctx, p.ID, func(context.Context, bun.Tx, *domain.Project) error { called = true; return nil })
	if !errors.Is(err, domain.ErrNotFound) || called {
		t.Fatalf("WithProject on a deleted project: %v (called %v); want not found", err, called)
	}
	if err := b.sv.Store.WithAnyProject(ctx, p.ID, func(_ context.Context, _ bun.Tx, q *domain.Project) error {
		if q.DeletedAt == nil {
			t.Error("WithAnyProject: the project is not marked deleted")
		}
		return nil
	}); err != nil {
		t.Fatalf("WithAnyProject on a deleted project: %v", err)
	}
	var live []domain.Project
	if err := domain.SelectLiveProjects(b.db.Bun, &live).Where("org_id = ?", b.owner.OrgID).Scan(ctx); err != nil || len(live) != 0 {
		t.Fatalf("live projects after the deletion: %d %v", len(live), err)
	}
}
