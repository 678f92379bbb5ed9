package webhook_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"anvil/domain"
	"anvil/domain/forge"
	"anvil/domain/project"
	"anvil/domain/webhook"
)

const fixturesDir = "../../../shared/fixtures/webhooks"

// fixture normalizes a real delivery from shared/fixtures/webhooks, with
// its push ref rewritten from → to when from is given (the fixtures push to
// master and main; release branches are the same payloads on another ref).
func fixture(t *testing.T, provider forge.Provider, event, file, from, to, id string) forge.Payload {
	t.Helper()
	body, err := os.ReadFile(filepath.Join(fixturesDir, file))
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("webhook fixtures not present at %s", fixturesDir)
	}
	if err != nil {
		t.Fatal(err)
	}
	if from != "" {
		if !bytes.Contains(body, []byte(from)) {
			t.Fatalf("%s does not hold %s", file, from)
		}
		body = bytes.ReplaceAll(body, []byte(from), []byte(to))
	}
	h := http.Header{}
	switch provider {
	case forge.GitHub:
		h.Set("X-GitHub-Event", event)
		h.Set("X-GitHub-Delivery", id)
	case forge.GitLab:
		h.Set("X-Gitlab-Event", event)
		h.Set("Idempotency-Key", id)
	case forge.Gitea:
		h.Set("X-Gitea-Event", event)
		h.Set("X-Gitea-Delivery", id)
	}
	pl, err := forge.Normalize(provider, h, body)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return pl
}

// TestBranchFiltersClassifyRealPushes delivers the real forge fixtures to
// a project whose branch filters are main and release/*: pushes to main and
// to a release branch become runs of the pushed commit, a push to another
// branch stays ignored_branch, tags stay ignored_event. Without filters the
// default branch alone runs, as before.
func TestBranchFiltersClassifyRealPushes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.Project(t, "filtered")
	if _, err := b.Projects.Update(ctx, b.Owner, p.ID, project.ProjectInput{BranchFilters: &[]string{"main", "release/*", " ", "main"}}); err != nil {
		t.Fatal(err)
	}
	got, err := b.Projects.Get(ctx, b.Owner.OrgID, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.BranchFilters) != 2 || got.BranchFilters[0] != "main" || got.BranchFilters[1] != "release/*" {
		t.Fatalf("stored filters %q, want [main release/*]", got.BranchFilters)
	}
	gh, _ := b.webhook(t, p, "github")
	gl, _ := b.webhook(t, p, "gitlab")
	gt, _ := b.webhook(t, p, "gitea")
	hooks := map[forge.Provider]*webhook.Webhooks{forge.GitHub: gh, forge.GitLab: gl, forge.Gitea: gt}

	const ghRef, glRef = `"ref": "refs/heads/master"`, `"ref": "refs/heads/master"`
	tests := []struct {
		name     string
		provider forge.Provider
		event    string
		file     string
		from, to string
		want     forge.Outcome
	}{
		{"gitea push to main", forge.Gitea, "push", "gitea_push.json", "", "", forge.OutcomeAccepted},
		{"github push to release/1.2", forge.GitHub, "push", "github_push.json", ghRef, `"ref": "refs/heads/release/1.2"`, forge.OutcomeAccepted},
		{"gitlab push to release/2.0", forge.GitLab, "Push Hook", "gitlab_push.json", glRef, `"ref": "refs/heads/release/2.0"`, forge.OutcomeAccepted},
		{"github push to release/1.2/hotfix", forge.GitHub, "push", "github_push.json", ghRef, `"ref": "refs/heads/release/1.2/hotfix"`, forge.OutcomeIgnoredBranch},
		{"github push to master", forge.GitHub, "push", "github_push.json", "", "", forge.OutcomeIgnoredBranch},
		{"gitea push to another branch", forge.Gitea, "push", "gitea_push_branch_create.json", "", "", forge.OutcomeIgnoredBranch},
		{"github tag", forge.GitHub, "push", "github_push_tag.json", "", "", forge.OutcomeIgnoredEvent},
		{"gitlab tag", forge.GitLab, "Tag Push Hook", "gitlab_tag_push.json", "", "", forge.OutcomeIgnoredEvent},
		{"gitea tag", forge.Gitea, "create", "gitea_create_tag.json", "", "", forge.OutcomeIgnoredEvent},
	}
	for i, tt := range tests {
		pl := fixture(t, tt.provider, tt.event, tt.file, tt.from, tt.to, "filter-"+string(rune('a'+i)))
		res, err := deliver(ctx, hooks[tt.provider], p.ID, string(tt.provider), pl)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if res.Outcome != tt.want {
			t.Fatalf("%s: %s, want %s", tt.name, res.Outcome, tt.want)
		}
		if tt.want == forge.OutcomeAccepted {
			r := b.Run(t, *res.RunID)
			if r.Branch != pl.Branch || r.CommitSHA == nil || *r.CommitSHA != pl.CommitSHA {
				t.Fatalf("%s: run of %s@%v, want %s@%s", tt.name, r.Branch, r.CommitSHA, pl.Branch, pl.CommitSHA)
			}
		}
	}

	// Without filters, the default branch alone (master here) runs.
	q := b.Project(t, "plain")
	if _, err := b.Projects.Update(ctx, b.Owner, q.ID, project.ProjectInput{DefaultBranch: strp("master")}); err != nil {
		t.Fatal(err)
	}
	qh, _ := b.webhook(t, q, "github")
	for i, c := range []struct {
		from, to string
		want     forge.Outcome
	}{{"", "", forge.OutcomeAccepted}, {ghRef, `"ref": "refs/heads/release/1.2"`, forge.OutcomeIgnoredBranch}} {
		res, err := deliver(ctx, qh, q.ID, "github", fixture(t, forge.GitHub, "push", "github_push.json", c.from, c.to, "plain-"+string(rune('a'+i))))
		if err != nil || res.Outcome != c.want {
			t.Fatalf("no filters, case %d: %v %s, want %s", i, err, res.Outcome, c.want)
		}
	}
}

func TestBranchFilterGlobs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		filters []string
		branch  string
		want    bool
	}{
		{nil, "main", true},
		{nil, "dev", false},
		{[]string{"release/*"}, "release/1.0", true},
		{[]string{"release/*"}, "release/1.0/x", false},
		{[]string{"release/**"}, "release/1.0/x", true},
		{[]string{"release/**"}, "releases", false},
		{[]string{"feature-?"}, "feature-a", true},
		{[]string{"v[0-9]*"}, "v1.2", true},
		{[]string{"release/*"}, "main", false},
	}
	for _, c := range cases {
		if got := domain.BranchMatches(c.filters, "main", c.branch); got != c.want {
			t.Errorf("BranchMatches(%q, %q) = %v, want %v", c.filters, c.branch, got, c.want)
		}
	}
	b := setup(t)
	p := b.Project(t, "bad-filters")
	for _, bad := range [][]string{{"release/["}, {"-x"}, {"a..b"}, {"has space"}, {"ok", "<script>"}} {
		if _, err := b.Projects.Update(context.Background(), b.Owner, p.ID, project.ProjectInput{BranchFilters: &bad}); !errors.Is(err, domain.ErrInvalid) {
			t.Errorf("filters %q: %v, want invalid", bad, err)
		}
	}
}
