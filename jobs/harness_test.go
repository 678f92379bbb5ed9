package jobs_test

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"anvil/db"
	"anvil/db/testdb"
	"anvil/domain"
	"anvil/domain/account"
	"anvil/domain/image"
	"anvil/domain/mail"
	"anvil/domain/network"
	"anvil/domain/project"
	"anvil/domain/repourl"
	"anvil/domain/run"
	"anvil/domain/secret"
	"anvil/domain/wiring"
	"anvil/jobs"
	"anvil/jobs/jobstest"
	"anvil/jobs/sandbox"
)

func TestMain(m *testing.M) {
	// The test binary is the network bridge of the sandboxes it starts,
	// as anvil's own binary is (docs/network.md).
	if len(os.Args) > 1 && os.Args[1] == sandbox.BridgeCommand {
		os.Exit(sandbox.BridgeMain(os.Args[2:]))
	}
	testdb.Main(m)
}

type testBundle struct {
	services *wiring.Services
	db       *db.DB
	store    *domain.Store
	accounts *account.Accounts
	projects *project.Projects
	queue    *run.Queue
	logs     *run.Logs
	hub      *domain.Hub
	river    *river.Client[*sql.Tx]
	sweeper  *jobs.LostRunnerSweeper
	owner    *domain.Principal
	workRoot string // this "process's" work folder
	caches   *sandbox.Caches
	images   *image.Store // the workers' image store (options.insecure)
}

type options struct {
	heartbeatTimeout time.Duration
	grace            time.Duration
	mode             string
	// strictCheckout: the worker refuses local checkouts (projects are
	// still saved with local repositories, as before a configuration change).
	strictCheckout bool
	// idle builds the River client and the lost-runner sweeper without
	// starting them; the test starts them (b.river.Start, b.sweeper.Start).
	idle bool
	// wrap, when set, wraps the sandbox executor the workers use.
	wrap func(sandbox.Executor) sandbox.Executor
	// log, when set, is the services', the workers' and River's logger.
	log *slog.Logger
	// network, when set, shapes the runs' network service before anything
	// starts (the private switch, the test's own names).
	network func(*network.Service)
	// mail, when set, is the SMTP server (ANVIL_SMTP_URL) of the services.
	mail *mail.Config
	// cacheBytes, when set, gives runs their project's cache, bounded so
	// (b.caches, beside the process folders as ANVIL_WORK_DIR/caches is).
	cacheBytes int64
	// insecure, when set, gives the workers an image store (beside the
	// process folders, as ANVIL_WORK_DIR/images is) that pulls over plain
	// HTTP from these registries and may reach loopback.
	insecure []string
}

// setup starts a real River client working every job kind against a fresh
// database, with a real sandbox executor, and a lost-runner sweeper as
// every worker process has one.
func setup(t *testing.T, o options) *testBundle {
	t.Helper()
	if o.heartbeatTimeout == 0 {
		o.heartbeatTimeout = time.Minute
	}
	if o.grace == 0 {
		o.grace = 500 * time.Millisecond
	}
	if o.mode == "" {
		if err := sandbox.BwrapAvailable(); err != nil {
			t.Skipf("bubblewrap cannot run here (%v); the process executor is tested separately", err)
		}
		o.mode = "bwrap"
	}
	d := testdb.New(t)
	keys, _ := secret.NewKeyring(make([]byte, 32), nil)
	// The fixtures are local repositories (jobstest.GitRepo).
	policy := repourl.Policy{AllowLocal: true}
	sv := wiring.NewServices(d, keys, o.log, wiring.Options{HeartbeatTimeout: o.heartbeatTimeout, CheckoutPolicy: policy,
		Mail: o.mail})
	store := sv.Store
	if o.network != nil {
		o.network(sv.Network)
	}
	b := &testBundle{services: sv, db: d, store: store, accounts: sv.Accounts, projects: sv.Projects,
		queue: sv.Queue, logs: sv.Logs, hub: sv.Hub}
	ctx, cancel := context.WithCancel(context.Background())
	go b.hub.Run(ctx)
	exe, err := sandbox.New(o.mode, o.grace)
	if err != nil {
		t.Fatal(err)
	}
	root, err := jobs.ProcessWorkRoot(filepath.Join(os.TempDir(), "anvil-test-work", uuid.NewString()[:8]))
	if err != nil {
		t.Fatal(err)
	}
	if o.wrap != nil {
		exe = o.wrap(exe)
	}
	workers := river.NewWorkers()
	if o.strictCheckout {
		policy = repourl.Policy{}
	}
	git, err := sandbox.NewGit(exe.Sandboxed(), policy)
	if err != nil {
		t.Fatal(err)
	}
	if o.cacheBytes > 0 {
		b.caches = &sandbox.Caches{Root: filepath.Join(filepath.Dir(root), "caches"), MaxBytes: o.cacheBytes}
	}
	var images *jobs.Images
	if o.insecure != nil {
		st, err := image.OpenStore(filepath.Join(filepath.Dir(root), "images"), 0, image.Bounds{})
		if err != nil {
			t.Fatal(err)
		}
		images = &jobs.Images{Store: st, AllowPrivate: true, AllowLoopback: true, Insecure: o.insecure}
		b.images = st
	}
	jobs.Register(workers, jobs.Deps{Services: sv, Executor: exe, Git: git, WorkRoot: root, Caches: b.caches, ImageStore: images, Images: images != nil, Log: o.log})
	client, err := sv.Start(ctx, &river.Config{
		Workers: workers, Queues: wiring.Queues(4),
		PeriodicJobs: jobs.Periodic(o.heartbeatTimeout), FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond,
		TestOnly: true, Logger: o.log,
	})
	if err != nil {
		t.Fatal(err)
	}
	b.river = client
	b.workRoot = root
	b.sweeper = jobs.NewLostRunnerSweeper(sv.Queue, nil)
	if !o.idle {
		if err := client.Start(ctx); err != nil {
			t.Fatal(err)
		}
		b.sweeper.Start(ctx)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer scancel()
		b.sweeper.Stop()
		_ = client.Stop(sctx)
		if err := sv.Stop(sctx); err != nil {
			t.Error(err)
		}
		cancel()
		_ = os.RemoveAll(filepath.Dir(root))
	})
	res, err := b.accounts.Bootstrap(context.Background(), "acme", "owner@acme.test", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	b.owner, _ = b.accounts.Authenticate(context.Background(), res.Token)
	return b
}

// gitRepo makes a bare repository and returns its URL and both commits.
func gitRepo(t *testing.T) (string, string, string) {
	r := jobstest.GitRepo(t)
	return r.URL, r.Old, r.Head
}

func (b *testBundle) project(t *testing.T, slug, repo, command string, timeout int) *domain.Project {
	t.Helper()
	in := project.ProjectInput{Slug: &slug, RepoURL: &repo, DefaultBranch: strp("main"), RunCommand: &command}
	if timeout > 0 {
		in.RunTimeoutSeconds = &timeout
	}
	p, err := b.projects.Create(context.Background(), b.owner, in)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func strp(s string) *string { return &s }

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", within, what)
}

func (b *testBundle) run(t *testing.T, id uuid.UUID) *run.Run {
	t.Helper()
	r, err := b.queue.RunByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (b *testBundle) waitTerminal(t *testing.T, id uuid.UUID, within time.Duration) *run.Run {
	t.Helper()
	var r *run.Run
	waitFor(t, within, "run "+id.String()+" to finish", func() bool {
		r = b.run(t, id)
		return run.IsTerminal(r.State)
	})
	return r
}

func (b *testBundle) logText(t *testing.T, id uuid.UUID) string {
	t.Helper()
	s, err := b.logs.Text(context.Background(), b.owner.OrgID, id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
