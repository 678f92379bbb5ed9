package forge

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"anvil/internal/anviltest"
)

// closedPullRequestFixtures are the real closed pull and merge requests,
// merged and not; TestFixtures counts them as covered here.
var closedPullRequestFixtures = []struct {
	file     string
	provider Provider
	event    string
	number   int
	merged   bool
	sha, url string
}{
	{"github_pull_request_closed_merged.json", GitHub, "pull_request", 62, true, "473d70eb7c50a54ae62bf9b124efa1c3eb245be8", "https://github.com/anbraten/test-ready-release-go/pull/62"},
	{"github_pull_request_closed_unmerged.json", GitHub, "pull_request", 62, false, "", "https://github.com/anbraten/test-ready-release-go/pull/62"},
	{"gitlab_merge_request_merge.json", GitLab, "Merge Request Hook", 4, true, "43411b53d670203e887c4985c4e58e8e6b7c109e", "https://gitlab.com/anbraten/woodpecker-test/-/merge_requests/4"},
	{"gitlab_merge_request_close.json", GitLab, "Merge Request Hook", 4, false, "", "https://gitlab.com/anbraten/woodpecker-test/-/merge_requests/4"},
	{"gitea_pull_request_closed_merged.json", Gitea, "pull_request", 1, true, "f2440f050054df0f8ecabcace648f1683509064c", "https://gitea.com/anbraten/test-repo/pulls/1"},
	{"gitea_pull_request_closed_unmerged.json", Gitea, "pull_request", 1, false, "", "https://gitea.com/anbraten/test-repo/pulls/1"},
}

// The three forges' closed pull requests, merged and not, and the commit
// messages of their pushes, as the real payloads carry them
// (docs/releases.md, "Merged and closed repairs").
func TestClosedPullRequestFixtures(t *testing.T) {
	t.Parallel()
	dir := anviltest.WebhookFixtures(t)
	header := map[Provider]string{GitHub: "X-GitHub-Event", GitLab: "X-Gitlab-Event", Gitea: "X-Gitea-Event"}
	deliveryHeader := map[Provider]string{GitHub: "X-GitHub-Delivery", GitLab: "Idempotency-Key", Gitea: "X-Gitea-Delivery"}
	for _, c := range closedPullRequestFixtures {
		body, err := os.ReadFile(filepath.Join(dir, c.file))
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set(header[c.provider], c.event)
		h.Set(deliveryHeader[c.provider], "d-1")
		p, err := Normalize(c.provider, h, body)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		pr := p.PullRequest
		if p.Kind != KindPullRequest || pr == nil || !pr.Closed || pr.Merged != c.merged || pr.MergeCommitSHA != c.sha || pr.Number != c.number || pr.URL != c.url {
			t.Errorf("%s: %+v %+v", c.file, p, pr)
		}
		// The merge's time orders fixes (GitHub and Gitea send it).
		if c.merged && c.provider != GitLab && pr.MergedAt.IsZero() {
			t.Errorf("%s: no merge time", c.file)
		}
		if Classify(p, "main") != OutcomeIgnoredEvent {
			t.Errorf("%s: a closed pull request is no run", c.file)
		}
	}
	for _, c := range []struct {
		file     string
		provider Provider
		event    string
		message  string
	}{
		{"github_push.json", GitHub, "push", "Update README"},
		{"gitlab_push.json", GitLab, "Push Hook", "added readme\n"},
		{"gitea_push.json", Gitea, "push", "bump\n"},
	} {
		body, err := os.ReadFile(filepath.Join(dir, c.file))
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set(header[c.provider], c.event)
		h.Set(deliveryHeader[c.provider], "d-1")
		p, err := Normalize(c.provider, h, body)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if len(p.Commits) == 0 || p.Commits[0].Message != c.message || len(p.Commits[0].SHA) != 40 ||
			(c.provider != Gitea && p.Commits[0].Timestamp.IsZero()) { // this Gitea capture's commits carry no timestamp
			t.Errorf("%s: commits %+v", c.file, p.Commits)
		}
	}
}
