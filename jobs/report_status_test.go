package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"anvil/db"
	"anvil/db/testdb"
	"anvil/domain"
	"anvil/domain/forgeapi"
	"anvil/domain/forgestatus"
	"anvil/domain/project"
	"anvil/domain/repourl"
	runs "anvil/domain/run"
	"anvil/domain/secret"
	"anvil/domain/wiring"
	"anvil/jobs"
)

const testSHA = "0123456789abcdef0123456789abcdef01234567"

// forgeRequest is one request the fake forge received.
type forgeRequest struct {
	Method, Path, Auth string
	Body               map[string]any
}

// status is what a commit-status request said: "state: description".
func (r forgeRequest) status() string {
	return fmt.Sprintf("%v: %v", r.Body["state"], r.Body["description"])
}

// fakeForge implements the commit status endpoint of one provider as its
// documentation describes it (GitHub REST "Create a commit status", GitLab
// "Set the pipeline status of a commit", Gitea "Create a commit status"),
// including GitLab's refusal of a repeated state. answer, when set, may
// answer a request instead (failures, rate limits, slowness).
type fakeForge struct {
	t        *testing.T
	provider string
	srv      *httptest.Server
	mu       sync.Mutex
	reqs     []forgeRequest
	last     string // GitLab: the commit's current state
	answer   func(n int, w http.ResponseWriter, r *http.Request) bool
}

func newFakeForge(t *testing.T, provider string) *fakeForge {
	f := &fakeForge{t: t, provider: provider}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// apiURL is the project's provider_api_url for the fake: GitHub's API root
// (as GitHub Enterprise Server serves it), GitLab's and Gitea's instance.
func (f *fakeForge) apiURL() string {
	if f.provider == "github" {
		return f.srv.URL + "/api/v3"
	}
	return f.srv.URL
}

func (f *fakeForge) statusPath() string {
	switch f.provider {
	case "github":
		return "/api/v3/repos/acme/app/statuses/" + testSHA
	case "gitlab":
		return "/api/v4/projects/acme%2Fapp/statuses/" + testSHA
	}
	return "/api/v1/repos/acme/app/statuses/" + testSHA
}

func (f *fakeForge) branchPath() string {
	switch f.provider {
	case "github":
		return "/api/v3/repos/acme/app/branches/main"
	case "gitlab":
		return "/api/v4/projects/acme%2Fapp/repository/branches/main"
	}
	return "/api/v1/repos/acme/app/branches/main"
}

func (f *fakeForge) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := forgeRequest{Method: r.Method, Path: r.URL.EscapedPath(), Body: map[string]any{}}
	switch f.provider {
	case "gitlab":
		req.Auth = r.Header.Get("PRIVATE-TOKEN")
	default:
		req.Auth = r.Header.Get("Authorization")
	}
	if err := json.Unmarshal(body, &req.Body); len(body) > 0 && err != nil {
		f.t.Errorf("%s: body is not JSON: %q", f.provider, body)
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	n := len(f.reqs)
	answer := f.answer
	f.mu.Unlock()
	if answer != nil && answer(n, w, r) {
		return
	}
	if r.Method == http.MethodGet && req.Path == f.branchPath() {
		// The documented branch shapes: GitHub's commit.sha, GitLab's and
		// Gitea's commit.id.
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"name":"main","commit":{"sha":%q,"id":%q}}`, testSHA, testSHA)
		return
	}
	if r.Method != http.MethodPost || req.Path != f.statusPath() {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	}
	state, _ := req.Body["state"].(string)
	w.Header().Set("Content-Type", "application/json")
	f.mu.Lock()
	repeated := f.provider == "gitlab" && state == f.last
	if !repeated {
		f.last = state
	}
	f.mu.Unlock()
	if repeated {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"message":"Cannot transition status via :%s from :%s"}`, state, state)
		return
	}
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":1,"state":%q,"status":%q,"sha":%q}`, state, state, testSHA)
}

func (f *fakeForge) requests() []forgeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]forgeRequest(nil), f.reqs...)
}

func (f *fakeForge) statuses() []string {
	var out []string
	for _, r := range f.requests() {
		out = append(out, r.status())
	}
	return out
}

type idleWorker[T river.JobArgs] struct{ river.WorkerDefaults[T] }

func (*idleWorker[T]) Work(context.Context, *river.Job[T]) error { return nil }

type statusBundle struct {
	db       *db.DB
	store    *domain.Store
	queue    *runs.Queue
	projects *project.Projects
	owner    *domain.Principal
	project  *domain.Project
	logs     *runs.Logs
}

// setupStatus starts a River client that works only report_status jobs
// (runs are driven through the queue by the test, as an executor would)
// with a project whose forge is f.
func setupStatus(t *testing.T, f *fakeForge) *statusBundle {
	t.Helper()
	d := testdb.New(t)
	keys, _ := secret.NewKeyring(make([]byte, 32), nil)
	// The fake forges listen on loopback: the operator's switch allows them.
	policy := repourl.Policy{AllowLocal: true}
	sv := wiring.NewServices(d, keys, nil, wiring.Options{CheckoutPolicy: policy,
		LatestCommit: forgestatus.LatestCommit(forgeapi.NewHTTPClient(policy), nil)})
	workers := river.NewWorkers()
	// The test is the executor; executions (on the runs queue, which this
	// client does not work) and reconciliations are accepted and left be.
	river.AddWorker(workers, &idleWorker[domain.ExecuteRunArgs]{})
	river.AddWorker(workers, &idleWorker[domain.ReconcileRunArgs]{})
	river.AddWorker(workers, jobs.NewReportStatusWorker(forgestatus.NewReporter(sv.Store, sv.Projects, "https://anvil.example.com")))
	ctx, cancel := context.WithCancel(context.Background())
	client, err := sv.Start(ctx, &river.Config{
		Workers: workers, Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
		FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond, TestOnly: true,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer scancel()
		_ = client.Stop(sctx)
		_ = sv.Stop(sctx)
		cancel()
	})
	res, err := sv.Accounts.Bootstrap(context.Background(), "acme", "ada@example.com", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	owner, _ := sv.Accounts.Authenticate(context.Background(), res.Token)
	p, err := sv.Projects.Create(context.Background(), owner, project.ProjectInput{Slug: strp("app"), RepoURL: strp("https://example.com/acme/app.git"),
		DefaultBranch: strp("main"), RunCommand: strp("true"), Provider: strp(f.provider), ProviderAPIURL: strp(f.apiURL()),
		ProviderRepo: strp("acme/app"), ProviderToken: strp("tok-" + f.provider)})
	if err != nil {
		t.Fatal(err)
	}
	return &statusBundle{db: d, store: sv.Store, queue: sv.Queue, projects: sv.Projects, owner: owner, project: p, logs: sv.Logs}
}

// accept queues a webhook run pinned to testSHA.
func (b *statusBundle) accept(t *testing.T) *runs.Run {
	t.Helper()
	var run *runs.Run
	sha := testSHA
	err := b.store.WithProject(context.Background(), b.project.ID, func(ctx context.Context, tx bun.Tx, p *domain.Project) error {
		var err error
		run, err = b.queue.AcceptTx(ctx, tx, p, runs.AcceptSpec{Trigger: runs.TriggerWebhook, Branch: "main", CommitSHA: &sha})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// settle waits until no report_status job is left to work.
func (b *statusBundle) settle(t *testing.T) {
	t.Helper()
	waitFor(t, 30*time.Second, "status reports to settle", func() bool {
		var n int
		_ = b.db.Bun.NewRaw(`SELECT count(*) FROM river_job WHERE kind = 'report_status'
			AND state NOT IN ('completed', 'cancelled', 'discarded')`).Scan(context.Background(), &n)
		return n == 0
	})
}

func (b *statusBundle) report(t *testing.T, id uuid.UUID) *forgestatus.Report {
	t.Helper()
	rep, err := forgestatus.Last(context.Background(), b.db.Bun, id)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestStatusLifeThroughEachForge drives runs through their whole life and
// asserts every request each forge received through its official client.
func TestStatusLifeThroughEachForge(t *testing.T) {
	t.Parallel()
	exit1 := 1
	lives := []struct {
		name string
		end  func(t *testing.T, b *statusBundle, id uuid.UUID)
		want map[string][]string // provider → statuses after "running"
	}{
		{"passed", func(t *testing.T, b *statusBundle, id uuid.UUID) {
			_, err := b.queue.ReportTerminal(context.Background(), id, runs.TerminalReport{State: runs.StatePassed})
			must(t, err)
		}, map[string][]string{"github": {"success: passed in"}, "gitlab": {"success: passed in"}, "gitea": {"success: passed in"}}},
		{"failed", func(t *testing.T, b *statusBundle, id uuid.UUID) {
			_, err := b.queue.ReportTerminal(context.Background(), id, runs.TerminalReport{State: runs.StateFailed, ExitCode: &exit1, FailureReason: runs.ReasonExitCode})
			must(t, err)
		}, map[string][]string{"github": {"failure: failed: exit code 1"}, "gitlab": {"failed: failed: exit code 1"}, "gitea": {"failure: failed: exit code 1"}}},
		// A pipeline's failure names its first failed step (not an ignored
		// one); a refused file its line (docs/pipelines.md).
		{"step_failed", func(t *testing.T, b *statusBundle, id uuid.UUID) {
			ctx := context.Background()
			r, err := b.queue.RunByID(ctx, id)
			must(t, err)
			must(t, b.logs.SetPipeline(ctx, r, ".anvil.yaml", ""))
			now := time.Now()
			must(t, b.logs.SetSteps(ctx, r, []runs.Step{
				{Index: 0, Key: "lint", Name: "lint", Status: runs.StepFailed, Ignored: true, FinishedAt: &now},
				{Index: 1, Key: "test (GO=1.23)", Name: "test", Status: runs.StepFailed, FinishedAt: &now},
			}))
			_, err = b.queue.ReportTerminal(ctx, id, runs.TerminalReport{State: runs.StateFailed, ExitCode: &exit1, FailureReason: runs.ReasonExitCode})
			must(t, err)
		}, map[string][]string{"github": {"failure: failed: step test (GO=1.23) (exit code 1)"}, "gitlab": {"failed: failed: step test (GO=1.23) (exit code 1)"},
			"gitea": {"failure: failed: step test (GO=1.23) (exit code 1)"}}},
		{"pipeline_refused", func(t *testing.T, b *statusBundle, id uuid.UUID) {
			ctx := context.Background()
			r, err := b.queue.RunByID(ctx, id)
			must(t, err)
			must(t, b.logs.SetPipeline(ctx, r, ".anvil.yaml", `.anvil.yaml:5: unknown key "depend_on" in a step`))
			_, err = b.queue.ReportTerminal(ctx, id, runs.TerminalReport{State: runs.StateFailed, FailureReason: runs.ReasonPipeline})
			must(t, err)
		}, map[string][]string{"github": {`failure: failed: .anvil.yaml:5: unknown key "depend_on" in a step`},
			"gitlab": {`failed: failed: .anvil.yaml:5: unknown key "depend_on" in a step`}, "gitea": {`failure: failed: .anvil.yaml:5: unknown key "depend_on" in a step`}}},
		{"runner_lost", func(t *testing.T, b *statusBundle, id uuid.UUID) {
			_, err := b.queue.ReportTerminal(context.Background(), id, runs.TerminalReport{State: runs.StateFailed, FailureReason: runs.ReasonRunnerLost})
			must(t, err)
		}, map[string][]string{"github": {"error: runner lost"}, "gitlab": {"failed: runner lost"}, "gitea": {"error: runner lost"}}},
		{"canceled", func(t *testing.T, b *statusBundle, id uuid.UUID) {
			_, err := b.queue.RequestCancel(context.Background(), b.owner, id)
			must(t, err)
			b.settle(t)
			must(t, b.queue.Canceling(context.Background(), id))
			b.settle(t)
			_, err = b.queue.ReportTerminal(context.Background(), id, runs.TerminalReport{State: runs.StateCanceled})
			must(t, err)
		}, map[string][]string{
			"github": {"pending: canceling", "error: canceled by ada@example.com"},
			// canceling is still GitLab's running: not posted again.
			"gitlab": {"canceled: canceled by ada@example.com"},
			"gitea":  {"pending: canceling", "error: canceled by ada@example.com"},
		}},
	}
	head := map[string][]string{
		"github": {"pending: queued — 1st in line", "pending: starting", "pending: running"},
		"gitlab": {"pending: queued — 1st in line", "running: starting"}, // running again is not posted
		"gitea":  {"pending: queued — 1st in line", "pending: starting", "pending: running"},
	}
	auth := map[string]string{"github": "Bearer tok-github", "gitlab": "tok-gitlab", "gitea": "token tok-gitea"}
	for _, provider := range []string{"github", "gitlab", "gitea"} {
		for _, life := range lives {
			t.Run(provider+"/"+life.name, func(t *testing.T) {
				t.Parallel()
				f := newFakeForge(t, provider)
				b := setupStatus(t, f)
				ctx := context.Background()
				run := b.accept(t)
				b.settle(t)
				_, _, err := b.queue.Claim(ctx, run.ID, "test")
				must(t, err)
				b.settle(t)
				_, err = b.queue.Start(ctx, run.ID, true)
				must(t, err)
				b.settle(t)
				life.end(t, b, run.ID)
				b.settle(t)

				want := append(append([]string{}, head[provider]...), life.want[provider]...)
				got := f.requests()
				if len(got) != len(want) {
					t.Fatalf("%d requests %q, want %d %q", len(got), f.statuses(), len(want), want)
				}
				for i, r := range got {
					if r.Method != http.MethodPost || r.Path != f.statusPath() || r.Auth != auth[provider] {
						t.Errorf("request %d: %s %s auth %q, want POST %s auth %q", i, r.Method, r.Path, r.Auth, f.statusPath(), auth[provider])
					}
					if !strings.HasPrefix(r.status(), want[i]) {
						t.Errorf("request %d: %q, want %q", i, r.status(), want[i])
					}
					if r.Body["context"] != "anvil/app" || r.Body["target_url"] != "https://anvil.example.com/runs/"+run.ID.String() {
						t.Errorf("request %d: context %v target_url %v", i, r.Body["context"], r.Body["target_url"])
					}
				}
				rep := b.report(t, run.ID)
				if rep == nil || rep.Error != "" || !strings.HasPrefix(rep.State+": "+rep.Description, want[len(want)-1]) {
					t.Fatalf("last report %+v, want %q", rep, want[len(want)-1])
				}
			})
		}
	}
}

// TestStatusRetriesAfter5xxAndRetryAfter: a 502 is retried with back-off,
// a 429 with Retry-After waits the forge's time, and the report shows the
// error and the next attempt meanwhile.
func TestStatusRetriesAfter5xxAndRetryAfter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter)
	}{
		{"5xx", func(w http.ResponseWriter) { http.Error(w, `{"message":"bad gateway"}`, http.StatusBadGateway) }},
		{"retry-after", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"message":"API rate limit exceeded"}`, http.StatusTooManyRequests)
		}},
		{"x-ratelimit-reset", func(w http.ResponseWriter) {
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", fmt.Sprint(time.Now().Add(time.Second).Unix()))
			http.Error(w, `{"message":"API rate limit exceeded"}`, http.StatusForbidden)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeForge(t, "github")
			failed := make(chan struct{})
			f.answer = func(n int, w http.ResponseWriter, r *http.Request) bool {
				if n == 1 {
					tc.answer(w)
					close(failed)
					return true
				}
				return false
			}
			b := setupStatus(t, f)
			run := b.accept(t)
			<-failed
			waitFor(t, 10*time.Second, "the failure to be recorded", func() bool {
				rep := b.report(t, run.ID)
				return rep != nil && rep.Error != "" && rep.NextAttemptAt != nil
			})
			b.settle(t)
			if got := f.statuses(); len(got) != 2 || got[0] != got[1] || got[1] != "pending: queued — 1st in line" {
				t.Fatalf("requests %q, want the queued status twice", got)
			}
			if rep := b.report(t, run.ID); rep.Error != "" || rep.State != "pending" || rep.NextAttemptAt != nil {
				t.Fatalf("report after the retry: %+v", rep)
			}
		})
	}
}

// TestStatusLatestStateWins: the first post hangs while the run finishes;
// the forge ends with the run's final state, posted after the slow one, and
// nothing in between is posted late.
func TestStatusLatestStateWins(t *testing.T) {
	t.Parallel()
	f := newFakeForge(t, "gitlab")
	arrived, release := make(chan struct{}), make(chan struct{})
	f.answer = func(n int, w http.ResponseWriter, r *http.Request) bool {
		if n == 1 {
			close(arrived)
			<-release
		}
		return false
	}
	b := setupStatus(t, f)
	ctx := context.Background()
	run := b.accept(t)
	<-arrived
	_, _, err := b.queue.Claim(ctx, run.ID, "test")
	must(t, err)
	_, err = b.queue.Start(ctx, run.ID, true)
	must(t, err)
	_, err = b.queue.ReportTerminal(ctx, run.ID, runs.TerminalReport{State: runs.StatePassed})
	must(t, err)
	// The newer jobs are waiting for the slow one (the run's lease).
	waitFor(t, 10*time.Second, "the newer reports to be enqueued", func() bool {
		var n int
		_ = b.db.Bun.NewRaw(`SELECT count(*) FROM river_job WHERE kind = 'report_status'`).Scan(ctx, &n)
		return n == 4
	})
	close(release)
	b.settle(t)
	got := f.statuses()
	if len(got) != 2 || got[0] != "pending: queued — 1st in line" || !strings.HasPrefix(got[1], "success: passed in") {
		t.Fatalf("requests %q, want the slow queued status then success only", got)
	}
	if rep := b.report(t, run.ID); rep.State != "success" {
		t.Fatalf("last report %+v", rep)
	}
}

// TestRunUnaffectedByFailingForge: a forge that answers 500 to everything
// (and one that refuses the token) leaves the run to pass as it would; the
// run page's report says why nothing reached the forge.
func TestRunUnaffectedByFailingForge(t *testing.T) {
	t.Parallel()
	for _, code := range []int{http.StatusInternalServerError, http.StatusUnauthorized} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			t.Parallel()
			forge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, `{"message":"down"}`, code)
			}))
			t.Cleanup(forge.Close)
			b := setup(t, options{mode: "process"})
			url, _, head := gitRepo(t)
			p, err := b.projects.Create(context.Background(), b.owner, project.ProjectInput{Slug: strp("app"), RepoURL: &url,
				DefaultBranch: strp("main"), RunCommand: strp("echo hello"), Provider: strp("gitea"), ProviderAPIURL: &forge.URL,
				ProviderRepo: strp("acme/app"), ProviderToken: strp("tok")})
			must(t, err)
			var run *runs.Run
			must(t, b.store.WithProject(context.Background(), p.ID, func(ctx context.Context, tx bun.Tx, p *domain.Project) error {
				run, err = b.queue.AcceptTx(ctx, tx, p, runs.AcceptSpec{Trigger: runs.TriggerWebhook, Branch: "main", CommitSHA: &head})
				return err
			}))
			done := b.waitTerminal(t, run.ID, 60*time.Second)
			if done.State != runs.StatePassed {
				t.Fatalf("run %s (%v), want passed", done.State, done.FailureReason)
			}
			waitFor(t, 10*time.Second, "the failed report", func() bool {
				rep, _ := forgestatus.Last(context.Background(), b.db.Bun, run.ID)
				if rep != nil && rep.Error != "" && !strings.Contains(rep.Error, fmt.Sprint(code)) {
					t.Fatalf("report error %q does not name %d", rep.Error, code)
				}
				return rep != nil && strings.Contains(rep.Error, fmt.Sprint(code))
			})
		})
	}
}

// TestRunLatestCommitThroughEachForge: "run the latest commit" asks the
// forge for the default branch (one GET through the official client) and
// queues a run pinned to its head, whose status then goes to that commit.
func TestRunLatestCommitThroughEachForge(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{"github", "gitlab", "gitea"} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			f := newFakeForge(t, provider)
			b := setupStatus(t, f)
			run, err := b.queue.AcceptLatest(context.Background(), b.owner, b.project.ID)
			must(t, err)
			if run.CommitSHA == nil || *run.CommitSHA != testSHA || run.Branch != "main" || run.Trigger != runs.TriggerManual {
				t.Fatalf("run %+v, want a manual run of main pinned to %s", run, testSHA)
			}
			b.settle(t)
			got := f.requests()
			if len(got) != 2 || got[0].Method != http.MethodGet || got[0].Path != f.branchPath() ||
				got[1].Path != f.statusPath() || got[1].status() != "pending: queued — 1st in line" {
				t.Fatalf("requests %+v", got)
			}
		})
	}
	// A forge that does not know the branch: a clear error, no run.
	f := newFakeForge(t, "github")
	f.answer = func(n int, w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"message":"Branch not found"}`)
		return true
	}
	b := setupStatus(t, f)
	if _, err := b.queue.AcceptLatest(context.Background(), b.owner, b.project.ID); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("AcceptLatest against a 404: %v", err)
	}
	var n int
	_ = b.db.Bun.NewRaw(`SELECT count(*) FROM project_runs`).Scan(context.Background(), &n)
	if n != 0 {
		t.Fatalf("%d runs after a failed resolution", n)
	}
}

// TestStatusContextReachesTheForge: a project's own status context is the
// context of every status posted for its runs.
func TestStatusContextReachesTheForge(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{"github", "gitlab", "gitea"} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			f := newFakeForge(t, provider)
			b := setupStatus(t, f)
			if _, err := b.projects.Update(context.Background(), b.owner, b.project.ID,
				project.ProjectInput{StatusContext: strp("ci/anvil tests")}); err != nil {
				t.Fatal(err)
			}
			run := b.accept(t)
			b.settle(t)
			got := f.requests()
			if len(got) != 1 || got[0].Body["context"] != "ci/anvil tests" || got[0].status() != "pending: queued — 1st in line" {
				t.Fatalf("requests %+v", got)
			}
			if rep := b.report(t, run.ID); rep == nil || rep.State != "pending" {
				t.Fatalf("report %+v", rep)
			}
		})
	}
}
