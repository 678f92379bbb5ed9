package forge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPullRequestTestdata classifies the hand-written payloads in testdata/
// (small, following the shapes the forges document for the cases the real
// fixtures in shared/ do not cover: reopened, an action without commits, a
// deleted fork, GitLab's title-only update and fork, Gitea's fork).
func TestPullRequestTestdata(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		file     string
		provider Provider
		event    string
		want     Outcome
		reason   string
	}{
		{"github_pull_request_reopened.json", GitHub, "pull_request", OutcomeAccepted, ""},
		{"github_pull_request_labeled.json", GitHub, "pull_request", OutcomeIgnoredEvent, "no new commit"},
		{"github_pull_request_deleted_fork.json", GitHub, "pull_request", OutcomeIgnoredEvent, "fork"},
		{"gitlab_merge_request_update_title.json", GitLab, "Merge Request Hook", OutcomeIgnoredEvent, "no new commit"},
		{"gitlab_merge_request_fork.json", GitLab, "Merge Request Hook", OutcomeIgnoredEvent, "fork"},
		{"gitea_pull_request_fork.json", Gitea, "pull_request", OutcomeIgnoredEvent, "fork"},
	} {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			body, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			p, err := Normalize(tt.provider, deliveryHeaders(tt.provider, tt.event), body)
			if err != nil {
				t.Fatalf("Normalize: %v", err)
			}
			if p.Kind != KindPullRequest {
				t.Fatalf("kind %q", p.Kind)
			}
			if got := Classify(p, "main"); got != tt.want {
				t.Fatalf("Classify = %q, want %q", got, tt.want)
			}
			if r := IgnoredReason(p, "main"); !strings.Contains(r, tt.reason) || (tt.reason == "") != (r == "") {
				t.Fatalf("IgnoredReason = %q, want it to mention %q", r, tt.reason)
			}
		})
	}
	// Into another branch than the default: ignored_branch, with the reason.
	body, _ := os.ReadFile(filepath.Join("testdata", "github_pull_request_reopened.json"))
	p, err := Normalize(GitHub, deliveryHeaders(GitHub, "pull_request"), body)
	if err != nil {
		t.Fatal(err)
	}
	if got := Classify(p, "release"); got != OutcomeIgnoredBranch || !strings.Contains(IgnoredReason(p, "release"), `"main"`) {
		t.Fatalf("Classify into another branch = %q (%q)", got, IgnoredReason(p, "release"))
	}
}
