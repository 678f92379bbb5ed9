package web_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"anvil/internal/anviltest"
)

// The real closed pull- and merge-request deliveries of the three forges,
// through the public route, for a repair run's pull request: closed
// unmerged → NEEDS_HUMAN; merged (the same pull request, reopened and
// merged, as in the captures) → the incident records the merge commit and
// waits for a release. And a push to the default branch whose commit says
// "Fixes SHOP-n" (GitHub's push fixture with its message and ref changed).
func TestRepairPullRequestClosedAndMerged(t *testing.T) {
	t.Parallel()
	dir := anviltest.WebhookFixtures(t)
	b := setup(t)
	pid, _ := b.incidentProject(t)
	hooks := map[string]hook{}
	for _, prov := range []string{"github", "gitlab", "gitea"} {
		hooks[prov] = b.createHook(t, pid, prov, nil)
	}
	ctx := context.Background()
	incidentFor := func(title, prURL string) string {
		var id string
		if err := b.db.Bun.NewRaw(`INSERT INTO incidents (org_id, project_id, environment, fingerprint, title, status, first_seen, last_seen, pr_url)
			SELECT org_id, id, 'production', ?, ?, 'PR_OPEN', now(), now(), ? FROM projects WHERE id = ? RETURNING id`, title, title, prURL, pid).Scan(ctx, &id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	get := func(id string) map[string]any {
		_, out := b.api(t, b.owner.Token, "GET", "/api/private/incidents/"+id, nil)
		return out["incident"].(map[string]any)
	}
	for _, c := range []struct {
		prov, event, url, closed, merged, sha, note string
	}{
		{"github", "pull_request", "https://github.com/anbraten/test-ready-release-go/pull/62", "github_pull_request_closed_unmerged.json",
			"github_pull_request_closed_merged.json", "473d70eb7c50a54ae62bf9b124efa1c3eb245be8", "!62"},
		{"gitlab", "Merge Request Hook", "https://gitlab.com/anbraten/woodpecker-test/-/merge_requests/4", "gitlab_merge_request_close.json",
			"gitlab_merge_request_merge.json", "43411b53d670203e887c4985c4e58e8e6b7c109e", "!4"},
		{"gitea", "pull_request", "https://gitea.com/anbraten/test-repo/pulls/1", "gitea_pull_request_closed_unmerged.json",
			"gitea_pull_request_closed_merged.json", "f2440f050054df0f8ecabcace648f1683509064c", "!1"},
	} {
		id := incidentFor("Fault via "+c.prov, c.url)
		body, err := os.ReadFile(filepath.Join(dir, c.closed))
		if err != nil {
			t.Fatal(err)
		}
		if a := b.send(t, hooks[c.prov], delivery{event: c.event, id: "closed-" + c.prov, body: body, sign: true}); a.status != 200 || a.body["outcome"] != "ignored_event" {
			t.Fatalf("%s: %d %v", c.closed, a.status, a.body)
		}
		if inc := get(id); inc["status"] != "NEEDS_HUMAN" || inc["needs_human_reason"] != "repair pull request closed without merging" {
			t.Fatalf("%s: %v", c.closed, inc)
		}
		body, err = os.ReadFile(filepath.Join(dir, c.merged))
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // a resend is answered from the ledger and records nothing twice
			if a := b.send(t, hooks[c.prov], delivery{event: c.event, id: "merged-" + c.prov, body: body, sign: true}); a.status != 200 {
				t.Fatalf("%s: %d %v", c.merged, a.status, a.body)
			}
		}
		fix, _ := get(id)["fix"].(map[string]any)
		if fix == nil || fix["commit_sha"] != c.sha || fix["pr_url"] != c.url || fix["merged_at"] == nil || fix["shipped_at"] != nil {
			t.Fatalf("%s: fix %v", c.merged, fix)
		}
		if n := b.count(t, "incident_transitions", "incident_id = ? AND reason LIKE 'fix merged in "+c.note+" %'", id); n != 1 {
			t.Fatalf("%s: %d merge transitions", c.merged, n)
		}
	}

	// "Fixes SHOP-1" in a push to the default branch.
	var push map[string]any
	raw, err := os.ReadFile(filepath.Join(dir, "github_push.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &push); err != nil {
		t.Fatal(err)
	}
	push["ref"] = "refs/heads/main"
	commits := push["commits"].([]any)
	commits[0].(map[string]any)["message"] = "Guard the cart\n\nFixes SHOP-1"
	// A commit newer than the merge above (the capture's is older, and an
	// older commit never replaces a newer fix).
	commits[0].(map[string]any)["timestamp"] = time.Now().UTC().Format(time.RFC3339)
	body, _ := json.Marshal(push)
	if a := b.send(t, hooks["github"], delivery{event: "push", id: "push-fixes", body: body, sign: true}); a.status != 200 {
		t.Fatalf("push: %d %v", a.status, a.body)
	}
	_, out := b.api(t, b.owner.Token, "GET", "/api/private/incidents/SHOP-1", nil)
	fix, _ := out["incident"].(map[string]any)["fix"].(map[string]any)
	if fix == nil || fix["commit_sha"] != commits[0].(map[string]any)["id"] || fix["source"] != "push" {
		t.Fatalf("pushed fix: %v", out["incident"])
	}
}
