package web_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// stepRE reads the fix chain's steps off the incident page.
var stepRE = regexp.MustCompile(`data-testid="fix-step" data-step="([a-z_]+)" data-done="(true|false)"`)

// otherEvent sends an event of another fault than feedEvent's.
func otherEvent(t *testing.T, b *testBundle, token string) {
	t.Helper()
	ev := map[string]any{"schema_version": "1.0", "event_id": uuid.NewString(), "timestamp": time.Now().UTC().Format(time.RFC3339),
		"title": "TimeoutException in PaymentGateway", "level": "error", "environment": "production", "service": "api", "sdk": map[string]any{"name": "t"},
		"exception": map[string]any{"type": "TimeoutException", "message": "gateway timed out"}}
	if status, out := b.api(t, token, "POST", "/api/feed/events", ev); status != http.StatusAccepted {
		t.Fatalf("feed: %d %v", status, out)
	}
}

func fixSteps(page string) map[string]string {
	out := map[string]string{}
	for _, m := range stepRE.FindAllStringSubmatch(page, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// The incident page's close form offers "closed in the current release"
// and the option reaches the decision as the API's in_current_release does.
func TestCloseInCurrentReleaseForm(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pid, feedTok := b.incidentProject(t)
	b.feedEvent(t, feedTok, "NullPointerException in CheckoutService") // release 2026.9.3
	otherEvent(t, b, feedTok)
	_, out := b.api(t, b.owner.Token, "GET", "/api/private/incidents?project_id="+pid, nil)
	ids := map[string]string{}
	for _, it := range out["incidents"].([]any) {
		m := it.(map[string]any)
		ids[m["title"].(string)] = m["id"].(string)
	}
	withRelease, plain := ids["NullPointerException in CheckoutService"], ids["TimeoutException in PaymentGateway"]

	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	_, page := br.get("/incidents/" + withRelease)
	for _, want := range []string{`data-testid="close-form"`, `name="in_current_release"`, `data-testid="close-in-current-release"`, "2026.9.3"} {
		if !strings.Contains(page, want) {
			t.Fatalf("the incident page lacks %s:\n%s", want, page)
		}
	}
	csrf := csrfRE.FindStringSubmatch(page)[1]
	res, _ := br.post("/incidents/"+withRelease+"/decisions", url.Values{"_csrf": {csrf}, "decision": {"close"}, "in_current_release": {"true"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("close: %d", res.StatusCode)
	}
	_, out = b.api(t, b.owner.Token, "GET", "/api/private/incidents/"+withRelease, nil)
	inc := out["incident"].(map[string]any)
	fix, _ := inc["fix"].(map[string]any)
	if inc["status"] != "CLOSED" || fix == nil || fix["closed_in_release"] != "2026.9.3" {
		t.Fatalf("closed in the current release: %v", inc)
	}
	trs := out["transitions"].([]any)
	if last := trs[len(trs)-1].(map[string]any); last["to"] != "CLOSED" || last["reason"] != "close in the current release 2026.9.3" {
		t.Fatalf("the transition: %v", last)
	}
	if _, page := br.get("/incidents/" + withRelease); fixSteps(page)["closed_in_release"] != "true" {
		t.Fatalf("the page does not show the close in the release: %v", fixSteps(page))
	}

	// The same form without the box (through htmx): a plain close.
	st, body := br.htmx("/incidents/"+plain+"/decisions", csrf, url.Values{"decision": {"close"}})
	if st != http.StatusOK || !strings.Contains(body, `data-status="CLOSED"`) {
		t.Fatalf("plain close: %d %s", st, body)
	}
	_, out = b.api(t, b.owner.Token, "GET", "/api/private/incidents/"+plain, nil)
	if inc := out["incident"].(map[string]any); inc["status"] != "CLOSED" || inc["fix"] != nil {
		t.Fatalf("plain close: %v", inc)
	}
	// The box on a decision other than close is refused as the API refuses it.
	st, body = br.htmx("/incidents/"+plain+"/decisions", csrf, url.Values{"decision": {"reopen"}, "in_current_release": {"true"}})
	if st != http.StatusOK || !strings.Contains(body, `data-testid="decision-error"`) {
		t.Fatalf("reopen with the box: %d %s", st, body)
	}
}

// The fix chain as a timeline on the incident page — error → repair run →
// pull request → merged → shipped → seen before the fix → verifying, then
// verified with its evidence — and the inbox's VERIFYING filter.
func TestFixChainTimelineAndVerifyingFilter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pid, feedTok := b.incidentProject(t)
	b.feedEvent(t, feedTok, "NullPointerException in CheckoutService")
	otherEvent(t, b, feedTok)
	_, out := b.api(t, b.owner.Token, "GET", "/api/private/incidents?project_id="+pid, nil)
	ids := map[string]string{}
	for _, it := range out["incidents"].([]any) {
		m := it.(map[string]any)
		ids[m["title"].(string)] = m["id"].(string)
	}
	id, other := ids["NullPointerException in CheckoutService"], ids["TimeoutException in PaymentGateway"]
	ctx := context.Background()
	// The repair: approved (its run waits in the queue here: no workers),
	// and its pull request open, as the run's end records it.
	if st, out := b.api(t, b.owner.Token, "POST", "/api/private/incidents/"+id+"/decisions", map[string]any{"decision": "approve"}); st != 200 {
		t.Fatalf("approve: %d %v", st, out)
	}
	const prURL = "https://github.com/acme/shop/pull/62"
	if _, err := b.db.Bun.NewRaw(`UPDATE incidents SET status = 'PR_OPEN', pr_url = ? WHERE id = ?`, prURL, id).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	in := b.services.Incidents
	const sha = "473d70eb7c50a54ae62bf9b124efa1c3eb245be8"
	now := time.Now()
	if n, err := in.FixMerged(ctx, uuid.MustParse(pid), 62, prURL, sha, "github", now); err != nil || n != 1 {
		t.Fatalf("merged: %d %v", n, err)
	}
	incID := uuid.MustParse(id)
	if err := in.FixShipped(ctx, incID, sha, "shop@2.5.0+473d70e", "seen from a server connection", now, time.Hour, 1); err != nil {
		t.Fatal(err)
	}
	if err := in.FixJudged(ctx, incID, sha, "shop@2.4.0", 3, now); err != nil {
		t.Fatal(err)
	}

	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	_, page := br.get("/incidents/" + id)
	want := map[string]string{"error": "true", "repair": "true", "pull_request": "true", "merged": "true", "shipped": "true",
		"seen_before": "true", "verified": "false"}
	if got := fixSteps(page); len(got) != len(want) {
		t.Fatalf("steps %v, want %v", got, want)
	} else {
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("step %s: %q, want %q (all: %v)", k, got[k], v, got)
			}
		}
	}
	for _, s := range []string{`data-testid="fix-chain"`, "fix merged in !62", "commit " + sha, "shipped in shop@2.5.0+473d70e",
		"fix from !62 shipped in shop@2.5.0+473d70e", "seen in shop@2.4.0, before the fix (3 events)", "verifying until",
		`href="` + prURL + `"`, `href="/runs/`} {
		if !strings.Contains(page, s) {
			t.Fatalf("the timeline lacks %q:\n%s", s, page)
		}
	}

	// The inbox's VERIFYING filter lists the verifying incident, and only it.
	_, inbox := br.get("/inbox?status=VERIFYING")
	if !strings.Contains(inbox, `data-id="`+id+`"`) || strings.Contains(inbox, `data-id="`+other+`"`) {
		t.Fatalf("VERIFYING lists:\n%s", inbox)
	}
	if !strings.Contains(inbox, "fix shipped in shop@2.5.0+473d70e, verifying until") {
		t.Fatalf("the verifying incident's fix note is missing:\n%s", inbox)
	}

	// Proven: the step carries the evidence, and the filter is empty.
	if err := in.FixVerified(ctx, incID, sha, "fix verified: the evidence"); err != nil {
		t.Fatal(err)
	}
	_, page = br.get("/incidents/" + id)
	if fixSteps(page)["verified"] != "true" || !strings.Contains(page, "fix verified: the evidence") || !strings.Contains(page, `data-status="CLOSED"`) {
		t.Fatalf("verified: %v\n%s", fixSteps(page), page)
	}
	if _, inbox = br.get("/inbox?status=VERIFYING"); strings.Contains(inbox, `data-testid="incident-row"`) {
		t.Fatalf("VERIFYING after the proof:\n%s", inbox)
	}

	// A recurrence after the proof: the chain keeps its verified step and
	// adds the recurrence after it.
	if err := in.FixRecurred(ctx, incID, sha, "shop@2.6.0", "recurred in shop@2.6.0, which contains the fix from !62", now); err != nil {
		t.Fatal(err)
	}
	_, page = br.get("/incidents/" + id)
	if steps := fixSteps(page); steps["verified"] != "true" || steps["recurred"] != "true" || !strings.Contains(page, "fix verified: the evidence") ||
		strings.Index(page, `data-step="verified"`) > strings.Index(page, `data-step="recurred"`) {
		t.Fatalf("after the recurrence: %v", steps)
	}
}
