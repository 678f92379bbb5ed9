package forge

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fixturesDir holds real payloads captured from public repositories. They are
// read in place, never copied into the project.
const fixturesDir = "../../../shared/fixtures/webhooks"

// sourcesEvent pulls "X-<Forge>-Event: <name>" out of a SOURCES.txt line.
var sourcesEvent = regexp.MustCompile(`X-(GitHub|Gitlab|Gitea)-Event: ([A-Za-z_ ]+?)\s*(?:[,(.]|$)`)

// fixtureEvents maps each fixture file to the event header SOURCES.txt says
// it was delivered with.
func fixtureEvents(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(fixturesDir, "SOURCES.txt"))
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("webhook fixtures not present at %s; skipping real-payload tests", fixturesDir)
	}
	if err != nil {
		t.Fatalf("open SOURCES.txt: %v", err)
	}
	defer f.Close()
	events := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), " | ")
		if !ok {
			continue
		}
		m := sourcesEvent.FindStringSubmatch(rest)
		if m == nil {
			t.Fatalf("SOURCES.txt: no event header for %s", name)
		}
		events[strings.TrimSpace(name)] = m[2]
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read SOURCES.txt: %v", err)
	}
	return events
}

func TestFixtures(t *testing.T) {
	t.Parallel()
	events := fixtureEvents(t)
	tests := []struct {
		file          string
		provider      Provider
		event         string
		defaultBranch string
		kind          Kind
		branch        string
		sha           string
		repo          string
		want          Outcome
	}{
		{"github_ping.json", GitHub, "ping", "master", KindPing, "", "", "https://github.com/Octocoders/Hello-World.git", OutcomeIgnoredPing},
		{"github_push.json", GitHub, "push", "master", KindPush, "master", "199eddf46df50de8d02e99bf1c5fdb4101338224", "https://github.com/Codertocat/Hello-World.git", OutcomeAccepted},
		{"github_push_tag.json", GitHub, "push", "master", KindTag, "", "d2b75aa7797ec26b088fa2dd527e9d2c052fcedd", "https://github.com/bradrydzewski/drone-test-go.git", OutcomeIgnoredEvent},
		{"github_push_branch_delete.json", GitHub, "push", "master", KindBranchDelete, "feature-branch", zeros, "https://github.com/bradrydzewski/drone-test-go.git", OutcomeIgnoredEvent},
		{"github_push_branch_create.json", GitHub, "push", "master", KindPush, "master", "6113728f27ae82c7b1a177c8d03f9e96e0adf246", "https://github.com/Codertocat/Hello-World.git", OutcomeAccepted},
		{"gitlab_push.json", GitLab, "Push Hook", "master", KindPush, "master", "2adc9465c4edfc33834e173fe89436a7cb899a1d", "https://gitlab.com/gitlab-org/hello-world.git", OutcomeAccepted},
		{"gitlab_tag_push.json", GitLab, "Tag Push Hook", "master", KindTag, "", "2adc9465c4edfc33834e173fe89436a7cb899a1d", "https://gitlab.com/gitlab-org/hello-world.git", OutcomeIgnoredEvent},
		{"gitlab_push_branch_delete.json", GitLab, "Push Hook", "master", KindBranchDelete, "feature", zeros, "https://gitlab.com/gitlab-org/hello-world.git", OutcomeIgnoredEvent},
		{"gitea_push.json", Gitea, "push", "main", KindPush, "main", "ef98532add3b2feb7a137426bba1248724367df5", "http://gitea.golang.org/gordon/hello-world.git", OutcomeAccepted},
		{"gitea_push_branch_create.json", Gitea, "push", "main", KindPush, "fdsafdsa", "28c3613ae62640216bea5e7dc71aa65356e4298b", "https://codeberg.org/meisam/woodpecktester.git", OutcomeIgnoredBranch},
		{"gitea_delete_branch.json", Gitea, "delete", "master", KindBranchDelete, "", "", "http://try.gitea.io/gogits/hello-world.git", OutcomeIgnoredEvent},
		{"gitea_create_tag.json", Gitea, "create", "master", KindTag, "", "599d25c67b05717269f50ac082b34f176d085179", "http://try.gitea.io/gogits/hello-world.git", OutcomeIgnoredEvent},
		// Pull and merge requests from a branch of the same repository into
		// the default branch are runs pinned to the head; a fork's never.
		{"github_pull_request_opened.json", GitHub, "pull_request", "master", KindPullRequest, "QA-251-tests-mutual-tls", "d87e5c741112a9a3def98f307723b5760a100271", "https://github.com/mendersoftware/mender-docs.git", OutcomeAccepted},
		{"github_pull_request_synchronize.json", GitHub, "pull_request", "main", KindPullRequest, "testing", "b0ce2beb310558f90fa4adb797069025ec6ff7c9", "https://github.com/suo/actions-test.git", OutcomeAccepted},
		{"github_pull_request_fork.json", GitHub, "pull_request", "master", KindPullRequest, "men-4705", "7b099b84cb50df18847027b0afa16820eab850d9", "https://github.com/mendersoftware/workflows.git", OutcomeIgnoredEvent},
		{"gitlab_merge_request_open.json", GitLab, "Merge Request Hook", "main", KindPullRequest, "real6543-main-patch-42541", "2f7670508b771e7e77839402be8b34b13787aba8", "https://gitlab.com/demoaccount2-commits-group/test_ci_tmp.git", OutcomeAccepted},
		{"gitlab_merge_request_update.json", GitLab, "Merge Request Hook", "main", KindPullRequest, "anbraten-main-patch-05373", "c136499ec574e1034b24c5d306de9acda3005367", "https://gitlab.com/anbraten/woodpecker.git", OutcomeAccepted},
		{"gitea_pull_request_opened.json", Gitea, "pull_request", "master", KindPullRequest, "feature", "2eba238e33607c1fa49253182e9fff42baafa1eb", "https://try.gitea.io/jcitizen/my-repo.git", OutcomeAccepted},
		{"gitea_pull_request_synchronized.json", Gitea, "pull_request", "master", KindPullRequest, "feature", "2eba238e33607c1fa49253182e9fff42baafa1eb", "https://try.gitea.io/jcitizen/my-repo.git", OutcomeAccepted},
	}
	covered := map[string]bool{}
	for _, c := range closedPullRequestFixtures { // TestClosedPullRequestFixtures
		covered[c.file] = true
	}
	for _, tt := range tests {
		covered[tt.file] = true
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			event, ok := events[tt.file]
			if !ok {
				t.Fatalf("%s is not listed in SOURCES.txt", tt.file)
			}
			if event != tt.event {
				t.Fatalf("SOURCES.txt says %s goes with event %q, table says %q", tt.file, event, tt.event)
			}
			body, err := os.ReadFile(filepath.Join(fixturesDir, tt.file))
			if err != nil {
				t.Fatalf("read fixture: %v", err)
			}
			p, err := Normalize(tt.provider, deliveryHeaders(tt.provider, event), body)
			if err != nil {
				t.Fatalf("Normalize: %v", err)
			}
			if p.Kind != tt.kind || p.Branch != tt.branch || p.CommitSHA != tt.sha || p.RepositoryURL != tt.repo {
				t.Fatalf("Normalize: kind=%q branch=%q sha=%q repo=%q, want %q %q %q %q",
					p.Kind, p.Branch, p.CommitSHA, p.RepositoryURL, tt.kind, tt.branch, tt.sha, tt.repo)
			}
			if got := Classify(p, tt.defaultBranch); got != tt.want {
				t.Fatalf("Classify(%q) = %q, want %q", tt.defaultBranch, got, tt.want)
			}
			if tt.file == "github_pull_request_fork.json" && !strings.Contains(IgnoredReason(p, tt.defaultBranch), "fork") {
				t.Fatalf("IgnoredReason = %q, want the fork named", IgnoredReason(p, tt.defaultBranch))
			}
			// The signed form of the same bytes verifies end to end.
			secret := []byte(GenerateSecret())
			h := deliveryHeaders(tt.provider, event)
			switch tt.provider {
			case GitHub:
				h.Set("X-Hub-Signature-256", "sha256="+hmacHex(secret, body))
			case Gitea:
				h.Set("X-Gitea-Signature", hmacHex(secret, body))
			case GitLab:
				h.Set("X-Gitlab-Token", string(secret))
			}
			if err := Verify(tt.provider, h, body, Secrets{Secret: secret}, nowForTests); err != nil {
				t.Fatalf("Verify: %v", err)
			}
		})
	}
	for name := range events {
		if !covered[name] {
			t.Errorf("fixture %s has no expected outcome in TestFixtures", name)
		}
	}
}
