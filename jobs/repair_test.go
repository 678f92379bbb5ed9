package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/card"
	"anvil/domain/feed"
	"anvil/domain/incident"
	"anvil/domain/project"
	runs "anvil/domain/run"
	"anvil/jobs/jobstest"
	"anvil/jobs/sandbox"
)

// forge is an in-test provider API: GitHub's, GitLab's and Gitea's
// pull-request endpoints, answering with status (201 unless set).
type forge struct {
	srv    *httptest.Server
	mu     sync.Mutex
	status int
	got    []map[string]any
	paths  []string
	auth   []string
}

func newForge(t *testing.T) *forge {
	f := &forge{status: http.StatusCreated}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		if strings.Contains(r.URL.Path, "/statuses/") {
			// The runs' commit statuses (jobs/report_status_test.go tests
			// them); these tests are about the repair's pull request.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, `{"id":1}`)
			return
		}
		f.mu.Lock()
		f.got, f.paths = append(f.got, body), append(f.paths, r.Method+" "+r.URL.EscapedPath())
		f.auth = append(f.auth, r.Header.Get("Authorization")+r.Header.Get("Private-Token"))
		status := f.status
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if status >= 300 {
			fmt.Fprint(w, `{"message":"Validation Failed"}`)
			return
		}
		fmt.Fprintf(w, `{"number":7,"iid":7,"index":7,"html_url":%q,"web_url":%q}`, f.srv.URL+"/pr/7", f.srv.URL+"/pr/7")
	}))
	t.Cleanup(f.srv.Close)
	return f
}

type repairBundle struct {
	*testBundle
	incidents *incident.Incidents
	cards     *card.Cards
	feed      *feed.Feed
}

// setupRepair starts River with every worker, the repair handler included.
func setupRepair(t *testing.T) *repairBundle {
	t.Helper()
	if err := sandbox.BwrapAvailable(); err != nil {
		t.Skipf("bubblewrap cannot run here (%v)", err)
	}
	b := setup(t, options{})
	rb := &repairBundle{testBundle: b, incidents: b.services.Incidents, cards: b.services.Cards, feed: b.services.Feed}
	return rb
}

// incident makes a project on repo with the given repair command and
// provider, ingests one event and returns the incident waiting for approval.
func (rb *repairBundle) incident(t *testing.T, repo, repair, provider, api string) (*domain.Project, *incident.Incident) {
	t.Helper()
	ctx := context.Background()
	p, err := rb.projects.Create(ctx, rb.owner, project.ProjectInput{Slug: strp("shop"), RepoURL: &repo, DefaultBranch: strp("main"),
		RunCommand: strp("true"), RepairCommand: &repair, Provider: &provider, ProviderAPIURL: &api,
		ProviderRepo: strp("acme/shop"), ProviderToken: strp("ghp_secret_token_value")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rb.feed.PutBinding(ctx, rb.owner, p.ID, "production", domain.PolicyApprove); err != nil {
		t.Fatal(err)
	}
	_, tok, _ := rb.feed.CreateConnection(ctx, rb.owner, p.ID, "api")
	snd, err := rb.feed.Authenticate(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(map[string]any{"schema_version": "1.0", "event_id": uuid.NewString(), "timestamp": time.Now().UTC().Format(time.RFC3339),
		"title": "NullPointerException in Checkout", "level": "error", "environment": "production", "service": "api", "sdk": map[string]any{"name": "t"},
		"exception": map[string]any{"type": "NPE", "message": "cart is null"}})
	if _, err := rb.feed.Ingest(ctx, snd, "127.0.0.1", []json.RawMessage{raw}); err != nil {
		t.Fatal(err)
	}
	pg, err := rb.incidents.List(ctx, rb.owner.OrgID, incident.IncidentFilter{ProjectID: p.ID})
	if err != nil || len(pg.Incidents) != 1 {
		t.Fatalf("incident: %v %+v", err, pg)
	}
	inc, _ := rb.incidents.Get(ctx, rb.owner.OrgID, pg.Incidents[0].ID)
	return p, inc
}

// approveAndWait approves the incident and waits for its repair run's end
// and for the incident to leave RUNNING.
func (rb *repairBundle) approveAndWait(t *testing.T, inc *incident.Incident) (*incident.Incident, *runs.Run) {
	t.Helper()
	ctx := context.Background()
	got, err := rb.incidents.Decide(ctx, rb.owner, inc.ID, "approve")
	if err != nil {
		t.Fatal(err)
	}
	run := rb.waitTerminal(t, *got.RepairRunID, 60*time.Second)
	after, _ := rb.incidents.Get(ctx, rb.owner.OrgID, inc.ID)
	return after, run
}

func lsRemote(t *testing.T, repoURL, branch string) string {
	t.Helper()
	out, err := exec.Command("git", "ls-remote", strings.TrimPrefix(repoURL, "file://"), "refs/heads/"+branch).CombinedOutput()
	if err != nil {
		t.Fatalf("ls-remote: %v %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestRepairOpensPullRequest(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{"github", "gitlab", "gitea"} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			rb := setupRepair(t)
			f := newForge(t)
			repo := jobstest.GitRepo(t)
			cmd := `test -n "$ANVIL_TASK" && grep -q NullPointerException "$ANVIL_INCIDENT_FILE" && echo fixed >> README && echo repaired`
			_, inc := rb.incident(t, repo.URL, cmd, provider, f.srv.URL)
			after, run := rb.approveAndWait(t, inc)
			if run.State != runs.StatePassed || after.Status != domain.IncidentPROpen || after.PRURL != f.srv.URL+"/pr/7" {
				t.Fatalf("run %s (%v), incident %s %q; log:\n%s", run.State, run.FailureReason, after.Status, after.PRURL, rb.logText(t, run.ID))
			}
			branch := "anvil/repair/" + inc.ID.String()
			if lsRemote(t, repo.URL, branch) == "" {
				t.Fatalf("branch %s not pushed", branch)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.got) != 1 {
				t.Fatalf("forge calls: %v", f.paths)
			}
			want := map[string][3]string{
				"github": {"POST /repos/acme/shop/pulls", "head", "base"},
				"gitlab": {"POST /api/v4/projects/acme%2Fshop/merge_requests", "source_branch", "target_branch"},
				"gitea":  {"POST /api/v1/repos/acme/shop/pulls", "head", "base"},
			}[provider]
			if f.paths[0] != want[0] || f.got[0][want[1]] != branch || f.got[0][want[2]] != "main" || !strings.Contains(f.auth[0], "ghp_secret_token_value") {
				t.Fatalf("request %s %v auth=%q", f.paths[0], f.got[0], f.auth[0])
			}
			if log := rb.logText(t, run.ID); strings.Contains(log, "ghp_secret_token_value") || !strings.Contains(log, "repaired") {
				t.Fatalf("log:\n%s", log)
			}
		})
	}
}

func TestRepairNeedsHuman(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, cmd   string
		forgeStatus int
		reason      string
		failure     string
	}{
		{"no change", "true", 201, "the repair command changed nothing", runs.ReasonRepairNoOp},
		{"command fails", "echo nope; exit 3", 201, "the repair command failed with exit code 3", runs.ReasonExitCode},
		{"provider 422", "echo fixed >> README", 422, "the pull request could not be opened", runs.ReasonRepairForge},
		{"provider 500", "echo fixed >> README", 500, "the pull request could not be opened", runs.ReasonRepairForge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rb := setupRepair(t)
			f := newForge(t)
			f.status = c.forgeStatus
			repo := jobstest.GitRepo(t)
			_, inc := rb.incident(t, repo.URL, c.cmd, "github", f.srv.URL)
			after, run := rb.approveAndWait(t, inc)
			if run.State != runs.StateFailed || run.FailureReason == nil || *run.FailureReason != c.failure {
				t.Fatalf("run %s %v; log:\n%s", run.State, run.FailureReason, rb.logText(t, run.ID))
			}
			if after.Status != domain.IncidentNeedsHuman || !strings.Contains(after.NeedsHumanReason, c.reason) || strings.Contains(after.NeedsHumanReason, "ghp_secret") {
				t.Fatalf("incident %s %q", after.Status, after.NeedsHumanReason)
			}
		})
	}
}

// A project without a forge to open a pull request on gets nothing pushed
// (the check comes before the commit and the push), and the repair is a
// success with a patch: the run passed, its patch is ready, the incident
// waits for a person and never reads "the forge refused".
func TestRepairWithoutAForgeIsAPatchReady(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, provider, reason string }{
		{"no provider", "", "names no provider"},
		{"no token", "github", "has no provider token"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rb := setupRepair(t)
			f := newForge(t)
			repo := jobstest.GitRepo(t)
			p, inc := rb.incident(t, repo.URL, "echo fixed >> README", c.provider, f.srv.URL)
			if c.name == "no token" {
				if _, err := rb.projects.Update(context.Background(), rb.owner, p.ID, project.ProjectInput{ProviderToken: strp("")}); err != nil {
					t.Fatal(err)
				}
			}
			after, run := rb.approveAndWait(t, inc)
			if run.State != runs.StatePassed || run.FailureReason != nil {
				t.Fatalf("run %s %v; log:\n%s", run.State, run.FailureReason, rb.logText(t, run.ID))
			}
			if after.Status != domain.IncidentNeedsHuman || !strings.Contains(after.NeedsHumanReason, c.reason) ||
				!strings.Contains(after.NeedsHumanReason, runs.PatchReadyWords) || strings.Contains(after.NeedsHumanReason, "refused") {
				t.Fatalf("incident %s %q", after.Status, after.NeedsHumanReason)
			}
			if got := lsRemote(t, repo.URL, "anvil/repair/"+inc.ID.String()); got != "" {
				t.Fatalf("the repair branch was pushed: %s", got)
			}
			// Nothing was pushed, yet nothing is lost: the change is kept as a
			// patch that applies to the run's commit, marked ready.
			pt, err := rb.services.Logs.Patch(context.Background(), rb.owner.OrgID, run.ID)
			if err != nil || pt == nil || !pt.Ready || !strings.Contains(pt.Text, "diff --git a/README b/README") || !strings.Contains(pt.Text, "+fixed") {
				t.Fatalf("kept patch %+v, %v", pt, err)
			}
			if log := rb.logText(t, run.ID); !strings.Contains(log, runs.PatchReadyWords) {
				t.Fatalf("the log does not say the patch is ready:\n%s", log)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.paths) != 0 {
				t.Fatalf("the forge was called: %v", f.paths)
			}
		})
	}
}

// The repair command owns its workspace, .git included: a config that
// would make the host's git run a program (fsmonitor, a clean filter) or
// push elsewhere runs nothing on the host, and the change still reaches
// the project's repository.
func TestRepairTrustsNothingOfTheWorkspaceGit(t *testing.T) {
	t.Parallel()
	rb := setupRepair(t)
	f := newForge(t)
	repo := jobstest.GitRepo(t)
	marker := filepath.Join(t.TempDir(), "host-ran-it")
	decoy := "file://" + t.TempDir()
	cmd := `git config core.fsmonitor "touch ` + marker + `" && git config filter.x.clean "touch ` + marker + `; cat" && ` +
		`echo "* filter=x" > .gitattributes && git config remote.origin.url ` + decoy + ` && mkdir -p .git/hooks && ` +
		`printf '#!/bin/sh\ntouch ` + marker + `\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo fixed >> README`
	_, inc := rb.incident(t, repo.URL, cmd, "github", f.srv.URL)
	after, run := rb.approveAndWait(t, inc)
	if run.State != runs.StatePassed || after.Status != domain.IncidentPROpen {
		t.Fatalf("run %s (%v), incident %s %q; log:\n%s", run.State, run.FailureReason, after.Status, after.NeedsHumanReason, rb.logText(t, run.ID))
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("the host's git ran a program the repair command configured")
	}
	if lsRemote(t, repo.URL, "anvil/repair/"+inc.ID.String()) == "" {
		t.Fatalf("the branch was not pushed to the project's repository")
	}
}

// A repair's log never shows where the worker keeps its folders: the
// incident file's path and the workspace the command prints are masked.
func TestRepairLogHidesTheWorkersPaths(t *testing.T) {
	t.Parallel()
	rb := setupRepair(t)
	f := newForge(t)
	repo := jobstest.GitRepo(t)
	_, inc := rb.incident(t, repo.URL, `echo "incident at $ANVIL_INCIDENT_FILE"; echo "in $(pwd)"; echo fixed >> README`, "", f.srv.URL)
	_, run := rb.approveAndWait(t, inc)
	log := rb.logText(t, run.ID)
	if !strings.Contains(log, "incident at ***") {
		t.Fatalf("the incident file's line is not in the log, masked:\n%s", log)
	}
	if dir := filepath.Dir(rb.workRoot); strings.Contains(log, dir) {
		t.Fatalf("the log shows the worker's folder %s:\n%s", dir, log)
	}
}
