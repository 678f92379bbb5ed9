package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"anvil/domain"
	"anvil/domain/run"
)

// person adds a member of the given role to acme and returns a token and a
// logged-in browser of theirs.
func (b *testBundle) person(t *testing.T, role string) (string, *browser) {
	t.Helper()
	ctx := context.Background()
	email := role + "@acme.test"
	if _, err := b.accounts.AddMember(ctx, ownerPrincipal(t, b), email, testPassword, role); err != nil {
		t.Fatal(err)
	}
	_, p, err := b.accounts.Login(ctx, email, testPassword)
	if err != nil {
		t.Fatal(err)
	}
	token, err := b.accounts.CreateToken(ctx, p, "redeliver")
	if err != nil {
		t.Fatal(err)
	}
	br := b.browser(t)
	br.login(email, testPassword)
	return token, br
}

// fillQueue queues the project's twenty runs and returns their ids.
func (b *testBundle) fillQueue(t *testing.T, project string) []string {
	t.Helper()
	var runs []string
	for range run.MaxQueued {
		status, out := b.api(t, b.owner.Token, "POST", "/api/private/projects/"+project+"/runs", map[string]any{})
		if status != http.StatusAccepted {
			t.Fatalf("manual run: %d %v", status, out)
		}
		runs = append(runs, out["run_id"].(string))
	}
	return runs
}

func redeliverPath(project, provider, id string) string {
	return "/api/private/projects/" + project + "/webhooks/" + provider + "/deliveries/" + url.PathEscape(id) + "/redeliver"
}

// ledgerPayload is a ledger row's stored payload ("" when none).
func (b *testBundle) ledgerPayload(t *testing.T, project, provider, id string) map[string]any {
	t.Helper()
	var raw *string
	err := b.db.Bun.NewRaw(`SELECT payload::text FROM project_webhook_deliveries WHERE project_id = ? AND provider = ? AND delivery_id = ?`,
		project, provider, id).Scan(context.Background(), &raw)
	if err != nil {
		t.Fatalf("ledger row %s/%s: %v", provider, id, err)
	}
	if raw == nil {
		return nil
	}
	out := map[string]any{}
	if err := json.Unmarshal([]byte(*raw), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// A queue_full delivery is evaluated again from the ledger once the queue
// has room: the same path as the forge's redelivery, the same delivery id,
// the new outcome and its run, an audit entry. Viewers are refused; members
// may evaluate a queue_full delivery but not an ignored one; an accepted one
// is never evaluated again.
func TestWebhookRedeliverQueueFull(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.newProject(t, "busy", "main")
	h := b.createHook(t, p, "github", nil)
	runs := b.fillQueue(t, p)
	const id = "busy/1 ?#%" // any printable ASCII is a delivery id: the path escapes it
	a := b.send(t, h, delivery{event: "push", id: id, body: pushBody("refs/heads/main", shaPrev, shaMain), sign: true})
	if a.status != http.StatusServiceUnavailable || a.body["outcome"] != "queue_full" {
		t.Fatalf("full queue: %d %v", a.status, a.body)
	}
	// The normalized payload is kept with the row, and listed.
	pl := b.ledgerPayload(t, p, "github", id)
	if pl["provider"] != "github" || pl["deliveryId"] != id || pl["kind"] != "push" || pl["branch"] != "main" ||
		pl["commitSha"] != shaMain || pl["repositoryUrl"] != "https://git.example/shop.git" || pl["event"] != "push" {
		t.Fatalf("stored payload %v", pl)
	}
	_, list := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+p+"/webhooks/github/deliveries", nil)
	if ds, _ := list["deliveries"].([]any); len(ds) != 1 || ds[0].(map[string]any)["payload"].(map[string]any)["commitSha"] != shaMain {
		t.Fatalf("listed deliveries %v", list)
	}

	viewer, _ := b.person(t, domain.RoleViewer)
	member, _ := b.person(t, domain.RoleMember)
	if status, out := b.api(t, viewer, "POST", redeliverPath(p, "github", id), nil); status != http.StatusForbidden || out["error"] != "forbidden" {
		t.Fatalf("viewer: %d %v", status, out)
	}
	// Still full: recorded again (attempts 2) and answered as the forge is.
	status, out := b.api(t, member, "POST", redeliverPath(p, "github", id), nil)
	if status != http.StatusServiceUnavailable || out["outcome"] != "queue_full" || out["error"] != "project_queue_full" {
		t.Fatalf("still full: %d %v", status, out)
	}
	if n := b.count(t, "project_webhook_deliveries", "delivery_id = ? AND attempts = 2 AND outcome = 'queue_full'", id); n != 1 {
		t.Fatal("an evaluation while full did not count as an attempt")
	}

	if status, out := b.api(t, b.owner.Token, "POST", "/api/private/runs/"+runs[19]+"/cancel", nil); status >= 300 {
		t.Fatalf("cancel: %d %v", status, out)
	}
	status, out = b.api(t, member, "POST", redeliverPath(p, "github", id), nil)
	runID, _ := out["run_id"].(string)
	if status != http.StatusOK || out["outcome"] != "accepted" || runID == "" {
		t.Fatalf("after room: %d %v", status, out)
	}
	if got := b.ledgerOutcome(t, p, "github", id); got != "accepted" {
		t.Fatalf("ledger: %s", got)
	}
	if n := b.count(t, "project_webhook_deliveries", "project_id = ?", p); n != 1 {
		t.Fatalf("%d ledger rows: the evaluation must land on the same delivery id", n)
	}
	if n := b.count(t, "project_runs", "id = ? AND delivery_id = ? AND commit_sha = ? AND trigger = 'webhook' AND provider = 'github'", runID, id, shaMain); n != 1 {
		t.Fatal("the run is not the delivery's pinned webhook run")
	}
	if n := b.count(t, "audit_log", "kind = ? AND target = ? AND actor_email = 'member@acme.test' AND detail->>'before' = 'queue_full' AND detail->>'outcome' = 'accepted' AND detail->>'run_id' = ?",
		domain.AuditDeliveryEvaluated, "busy/github/"+id, runID); n != 1 {
		t.Fatal("no audit entry for the evaluation")
	}
	// The forge's own redelivery now replays that run; evaluating it again
	// is refused: one delivery, one run.
	again := b.send(t, h, delivery{event: "push", id: id, body: pushBody("refs/heads/main", shaPrev, shaMain), sign: true})
	if again.runID() != runID || again.header.Get("Anvil-Delivery-Replayed") != "true" {
		t.Fatalf("forge redelivery: %d %v", again.status, again.body)
	}
	if status, out := b.api(t, b.owner.Token, "POST", redeliverPath(p, "github", id), nil); status != http.StatusConflict || out["error"] != "delivery_accepted" {
		t.Fatalf("accepted: %d %v", status, out)
	}
	if n := b.count(t, "project_runs", "delivery_id = ?", id); n != 1 {
		t.Fatalf("%d runs for one delivery", n)
	}

	// An ignored delivery: not a member's to evaluate; an admin's, after
	// the branch filters changed, becomes a run in place of its outcome.
	b.send(t, h, delivery{event: "push", id: "feat-1", body: pushBody("refs/heads/feature/x", shaPrev, shaMain), sign: true})
	if got := b.ledgerOutcome(t, p, "github", "feat-1"); got != "ignored_branch" {
		t.Fatalf("feature push: %s", got)
	}
	status, out = b.api(t, member, "POST", redeliverPath(p, "github", "feat-1"), nil)
	if msg, _ := out["message"].(string); status != http.StatusForbidden || !strings.Contains(msg, "ignored_branch") {
		t.Fatalf("member on ignored: %d %v", status, out)
	}
	status, out = b.api(t, b.owner.Token, "POST", redeliverPath(p, "github", "feat-1"), nil)
	if status != http.StatusOK || out["outcome"] != "ignored_branch" || out["run_id"] != nil {
		t.Fatalf("admin, same filters: %d %v", status, out)
	}
	if status, out := b.api(t, b.owner.Token, "PATCH", "/api/private/projects/"+p, map[string]any{"branch_filters": []string{"main", "feature/*"}}); status != http.StatusOK {
		t.Fatalf("filters: %d %v", status, out)
	}
	if status, out := b.api(t, b.owner.Token, "POST", "/api/private/runs/"+runs[18]+"/cancel", nil); status >= 300 {
		t.Fatalf("cancel: %d %v", status, out)
	}
	status, out = b.api(t, b.owner.Token, "POST", redeliverPath(p, "github", "feat-1"), nil)
	if status != http.StatusOK || out["outcome"] != "accepted" || out["run_id"] == nil {
		t.Fatalf("admin after the filters: %d %v", status, out)
	}
	if got := b.ledgerOutcome(t, p, "github", "feat-1"); got != "accepted" {
		t.Fatalf("ledger: %s", got)
	}
	if n := b.count(t, "project_webhook_deliveries", "delivery_id = 'feat-1' AND attempts = 3 AND run_id = ?", out["run_id"]); n != 1 {
		t.Fatal("the overwritten row lacks its run or attempts")
	}
}

// A ledger entry without a stored payload (written before anvil kept them,
// or a body that could not be read) cannot be evaluated again: a clear 409,
// and nothing changes. Nor can one of a missing or disabled webhook.
func TestWebhookRedeliverRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.newProject(t, "shop", "main")
	h := b.createHook(t, p, "github", nil)
	// A body that is not a push: recorded as malformed, with no payload.
	b.send(t, h, delivery{event: "push", id: "bad-1", body: []byte(`{"ref": 7}`), sign: true})
	if pl := b.ledgerPayload(t, p, "github", "bad-1"); pl != nil {
		t.Fatalf("a malformed delivery keeps a payload: %v", pl)
	}
	status, out := b.api(t, b.owner.Token, "POST", redeliverPath(p, "github", "bad-1"), nil)
	if msg, _ := out["message"].(string); status != http.StatusConflict || out["error"] != "no_stored_payload" || !strings.Contains(msg, "keeps no payload") {
		t.Fatalf("malformed: %d %v", status, out)
	}
	// An older row: the payload column empty.
	b.send(t, h, delivery{event: "push", id: "old-1", body: pushBody("refs/heads/dev", shaPrev, shaMain), sign: true})
	if _, err := b.db.Bun.NewRaw(`UPDATE project_webhook_deliveries SET payload = NULL WHERE delivery_id = 'old-1'`).Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	if status, out := b.api(t, b.owner.Token, "POST", redeliverPath(p, "github", "old-1"), nil); status != http.StatusConflict || out["error"] != "no_stored_payload" {
		t.Fatalf("older row: %d %v", status, out)
	}
	if n := b.count(t, "project_webhook_deliveries", "attempts = 1"); n != 2 {
		t.Fatal("a refused evaluation changed the ledger")
	}
	if status, out := b.api(t, b.owner.Token, "POST", redeliverPath(p, "github", "nope"), nil); status != http.StatusNotFound {
		t.Fatalf("unknown delivery: %d %v", status, out)
	}
	if status, out := b.api(t, b.owner.Token, "POST", redeliverPath(p, "gitlab", "old-1"), nil); status != http.StatusNotFound {
		t.Fatalf("another provider's: %d %v", status, out)
	}
	b.send(t, h, delivery{event: "push", id: "dev-1", body: pushBody("refs/heads/dev", shaPrev, shaMain), sign: true})
	if status, out := b.api(t, b.owner.Token, "PUT", "/api/private/projects/"+p+"/webhooks/github", map[string]any{"enabled": false}); status != http.StatusOK {
		t.Fatalf("disable: %d %v", status, out)
	}
	if status, out := b.api(t, b.owner.Token, "POST", redeliverPath(p, "github", "dev-1"), nil); status != http.StatusConflict || out["error"] != "webhook_disabled" {
		t.Fatalf("disabled: %d %v", status, out)
	}
	if status, _ := b.api(t, b.owner.Token, "DELETE", "/api/private/projects/"+p+"/webhooks/github", nil); status != http.StatusNoContent {
		t.Fatalf("delete: %d", status)
	}
	if status, out := b.api(t, b.owner.Token, "POST", redeliverPath(p, "github", "dev-1"), nil); status != http.StatusConflict || out["error"] != "webhook_not_configured" {
		t.Fatalf("deleted: %d %v", status, out)
	}
}

// Both acceptance paths write the payload: the two-round-trip one (an
// ignored delivery) and the general one (a run promoted at once).
func TestWebhookPayloadOnBothPaths(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.newProject(t, "shop", "main")
	h := b.createHook(t, p, "gitea", nil)
	b.send(t, h, delivery{event: "push", id: "g-1", body: pushBody("refs/heads/dev", shaPrev, shaMain), sign: true})
	a := b.send(t, h, delivery{event: "push", id: "g-2", body: pushBody("refs/heads/main", shaPrev, shaMain), sign: true})
	if a.body["outcome"] != "accepted" {
		t.Fatalf("push to main: %v", a.body)
	}
	fast, general := b.ledgerPayload(t, p, "gitea", "g-1"), b.ledgerPayload(t, p, "gitea", "g-2")
	if fast["branch"] != "dev" || general["branch"] != "main" || fast["commitSha"] != shaMain || general["commitSha"] != shaMain ||
		fast["provider"] != "gitea" || general["deliveryId"] != "g-2" {
		t.Fatalf("payloads %v and %v", fast, general)
	}
}

// The webhook page: "Evaluate again" on a queue_full entry for a member,
// on an ignored one only for an admin, never for a viewer; the button posts
// with the CSRF token and answers what was decided (a refusal in place,
// answered 200 so that htmx shows it) with the table out of band.
func TestWebhookPageEvaluateAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.newProject(t, "busy", "main")
	h := b.createHook(t, p, "github", nil)
	b.send(t, h, delivery{event: "push", id: "dev-1", body: pushBody("refs/heads/dev", shaPrev, shaMain), sign: true})
	runs := b.fillQueue(t, p)
	b.send(t, h, delivery{event: "push", id: "full-1", body: pushBody("refs/heads/main", shaPrev, shaMain), sign: true})
	page := "/projects/" + p + "/webhooks"
	buttons := func(br *browser) map[string]bool {
		_, body := br.get(page)
		out := map[string]bool{}
		for _, id := range []string{"dev-1", "full-1"} {
			row := regexpBetween(body, `data-delivery-id="`+id+`"`, "</tr>")
			out[id] = strings.Contains(row, `data-testid="redeliver"`)
		}
		return out
	}
	_, viewer := b.person(t, domain.RoleViewer)
	_, member := b.person(t, domain.RoleMember)
	admin := b.browser(t)
	admin.login("owner@acme.test", testPassword)
	if got := buttons(viewer); got["dev-1"] || got["full-1"] {
		t.Fatalf("viewer sees buttons: %v", got)
	}
	if got := buttons(member); got["dev-1"] || !got["full-1"] {
		t.Fatalf("member's buttons: %v", got)
	}
	if got := buttons(admin); !got["dev-1"] || !got["full-1"] {
		t.Fatalf("admin's buttons: %v", got)
	}
	target := "/projects/" + p + "/webhooks/github/deliveries/full-1/redeliver"
	// Without the CSRF token: refused, nothing evaluated.
	if status, _ := member.htmx(target, "", url.Values{}); status != http.StatusForbidden {
		t.Fatalf("without CSRF: %d", status)
	}
	csrf := member.csrf(page)
	status, body := member.htmx(target, csrf, url.Values{})
	if status != http.StatusOK || !strings.Contains(body, `data-testid="redeliver-error"`) || !strings.Contains(body, "still holds 20 runs") {
		t.Fatalf("still full: %d %s", status, body)
	}
	b.api(t, b.owner.Token, "POST", "/api/private/runs/"+runs[19]+"/cancel", nil)
	status, body = member.htmx(target, csrf, url.Values{})
	if status != http.StatusOK || !strings.Contains(body, `data-testid="redeliver-notice"`) || !strings.Contains(body, `hx-swap-oob="innerHTML"`) {
		t.Fatalf("after room: %d %s", status, body)
	}
	if row := regexpBetween(body, `data-delivery-id="full-1"`, "</tr>"); !strings.Contains(row, `data-outcome="accepted"`) {
		t.Fatalf("the table does not show the new outcome: %s", body)
	}
	if got := b.ledgerOutcome(t, p, "github", "full-1"); got != "accepted" {
		t.Fatalf("ledger: %s", got)
	}
	// A member on an ignored entry: refused in place.
	status, body = member.htmx("/projects/"+p+"/webhooks/github/deliveries/dev-1/redeliver", csrf, url.Values{})
	if status != http.StatusOK || !strings.Contains(body, `data-testid="redeliver-error"`) || !strings.Contains(body, "admin") {
		t.Fatalf("member on ignored: %d %s", status, body)
	}
}
