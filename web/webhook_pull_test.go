package web_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWebhookPullRequestRuns: the real pull- and merge-request fixtures
// through the public route. A same-repository pull request into the default
// branch is a run with trigger pull_request pinned to the head commit; a
// fork's is ignored_event, and the ledger says why.
func TestWebhookPullRequestRuns(t *testing.T) {
	t.Parallel()
	dir := "../../shared/fixtures/webhooks"
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("real webhook fixtures not present at %s: %v", dir, err)
	}
	b := setup(t)
	master := b.newProject(t, "pr-master", "master")
	main := b.newProject(t, "pr-main", "main")
	hooks := map[string]hook{}
	for _, p := range []struct{ id, name string }{{master, "master"}, {main, "main"}} {
		for _, prov := range []string{"github", "gitlab", "gitea"} {
			hooks[p.name+"/"+prov] = b.createHook(t, p.id, prov, nil)
		}
	}
	for _, tc := range []struct {
		file, project, event, want, sha, branch string
	}{
		{"github_pull_request_opened.json", "master/github", "pull_request", "accepted", "d87e5c741112a9a3def98f307723b5760a100271", "QA-251-tests-mutual-tls"},
		{"github_pull_request_synchronize.json", "main/github", "pull_request", "accepted", "b0ce2beb310558f90fa4adb797069025ec6ff7c9", "testing"},
		{"github_pull_request_fork.json", "master/github", "pull_request", "ignored_event", "", ""},
		{"gitlab_merge_request_open.json", "main/gitlab", "Merge Request Hook", "accepted", "2f7670508b771e7e77839402be8b34b13787aba8", "real6543-main-patch-42541"},
		{"gitlab_merge_request_update.json", "main/gitlab", "Merge Request Hook", "accepted", "c136499ec574e1034b24c5d306de9acda3005367", "anbraten-main-patch-05373"},
		{"gitea_pull_request_opened.json", "master/gitea", "pull_request", "accepted", "2eba238e33607c1fa49253182e9fff42baafa1eb", "feature"},
	} {
		body, err := os.ReadFile(filepath.Join(dir, tc.file))
		if err != nil {
			t.Fatalf("fixture %s: %v", tc.file, err)
		}
		a := b.send(t, hooks[tc.project], delivery{event: tc.event, id: "pr-" + tc.file, body: body, sign: true})
		if a.status != 200 || a.body["outcome"] != tc.want {
			t.Fatalf("%s: %d %v, want %s", tc.file, a.status, a.body, tc.want)
		}
		if tc.sha == "" {
			continue
		}
		_, run := b.api(t, b.owner.Token, "GET", "/api/private/runs/"+a.runID(), nil)
		if run["commit_sha"] != tc.sha || run["trigger"] != "pull_request" || run["branch"] != tc.branch {
			t.Fatalf("%s: run %v, want pull_request on %s pinned to %s", tc.file, run, tc.branch, tc.sha)
		}
	}
	var reason string
	if err := b.db.Bun.NewRaw(`SELECT reason FROM project_webhook_deliveries WHERE delivery_id = 'pr-github_pull_request_fork.json'`).
		Scan(context.Background(), &reason); err != nil || !strings.Contains(reason, "fork") {
		t.Fatalf("fork delivery reason %q (%v)", reason, err)
	}
}
