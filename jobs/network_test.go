package jobs_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/network"
	"anvil/domain/project"
	runs "anvil/domain/run"
	"anvil/domain/runsecret"
	"anvil/internal/anviltest"
	"anvil/jobs/jobstest"
)

// testNames is a resolver of the test's own names: each stands for a
// registry or model API, served by a local server.
type testNames map[string]string

func (n testNames) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := n[strings.TrimSuffix(host, ".")]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// netOptions gives runs the test's names and, when private, lets them
// reach the local servers (ANVIL_RUNS_ALLOW_PRIVATE=true and, as they are
// on loopback, ANVIL_RUNS_ALLOW_LOOPBACK=true).
func netOptions(private bool, names testNames) options {
	return options{network: func(n *network.Service) { n.AllowPrivate, n.AllowLoopback, n.Resolver = private, private, names }}
}

// countingServer serves body and counts the connections it accepted.
func countingServer(t *testing.T, body string) (*httptest.Server, int, *atomic.Int32) {
	t.Helper()
	var accepts atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			accepts.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, srv.Listener.Addr().(*net.TCPAddr).Port, &accepts
}

func (b *testBundle) networkProject(t *testing.T, slug, repo, command string, allow []string) *domain.Project {
	t.Helper()
	p, err := b.projects.Create(context.Background(), b.owner, project.ProjectInput{Slug: &slug, RepoURL: &repo, DefaultBranch: strp("main"),
		RunCommand: &command, NetworkAllow: &allow})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (b *testBundle) connections(t *testing.T, runID uuid.UUID) []network.Connection {
	t.Helper()
	var out []network.Connection
	waitFor(t, 10*time.Second, "the run's connections", func() bool {
		var err error
		out, err = b.services.Network.Connections(context.Background(), b.owner.OrgID, runID)
		if err != nil {
			t.Fatal(err)
		}
		return len(out) > 0
	})
	return out
}

// curl in the real sandbox reaches a server its project lists (the run
// passes; the connection is recorded with its bytes), and is refused one it
// does not list: 403 at once, a line in the log, the server never contacted.
func TestRunReachesItsNetworkList(t *testing.T) {
	t.Parallel()
	b := setup(t, netOptions(true, testNames{"files.test": "127.0.0.1", "elsewhere.test": "127.0.0.1"}))
	_, port, accepts := countingServer(t, "the file\n")
	_, otherPort, otherAccepts := countingServer(t, "never\n")
	repo, _, _ := gitRepo(t)
	cmd := fmt.Sprintf(`curl -fsS http://files.test:%d/file && echo "refused: $(curl -s -m 5 -o /dev/null -w '%%{http_code}' http://elsewhere.test:%d/)"`, port, otherPort)
	p := b.networkProject(t, "netted", repo, cmd, []string{fmt.Sprintf("files.test:%d", port)})
	r := b.waitTerminal(t, accept(t, b, p).ID, 60*time.Second)
	log := b.logText(t, r.ID)
	if r.Status() != runs.StatusPassed || !strings.Contains(log, "the file\n") || !strings.Contains(log, "refused: 403\n") {
		t.Fatalf("run %s:\n%s", r.Status(), log)
	}
	want := fmt.Sprintf("[anvil] refused elsewhere.test:%d — not in this project's network list\n", otherPort)
	if !strings.Contains(log, want) {
		t.Fatalf("the log does not name the refusal %q:\n%s", want, log)
	}
	if accepts.Load() != 1 || otherAccepts.Load() != 0 {
		t.Fatalf("accepts: listed %d, other %d", accepts.Load(), otherAccepts.Load())
	}
	conns := b.connections(t, r.ID)
	if len(conns) != 2 {
		t.Fatalf("connections: %+v", conns)
	}
	byVerdict := map[string]network.Connection{}
	for _, c := range conns {
		byVerdict[c.Verdict] = c
	}
	if c := byVerdict["allowed"]; c.Host != "files.test" || c.Port != port || c.Method != "GET" || c.BytesDown != int64(len("the file\n")) || c.Count != 1 {
		t.Fatalf("allowed connection: %+v", c)
	}
	if c := byVerdict["refused"]; c.Host != "elsewhere.test" || !strings.Contains(c.Reason, "not in this project's network list") {
		t.Fatalf("refused connection: %+v", c)
	}
}

// A project with no list keeps its runs offline as they always were: no
// proxy variables, a name does not resolve and a connection fails at once.
func TestDefaultProjectStaysOffline(t *testing.T) {
	t.Parallel()
	b := setup(t, netOptions(true, testNames{"files.test": "127.0.0.1"}))
	_, port, accepts := countingServer(t, "the file\n")
	repo, _, _ := gitRepo(t)
	cmd := fmt.Sprintf(`echo "proxy variables: $(env | grep -ci proxy)"
timeout 5 getent hosts files.test; echo "getent: $?"
timeout 5 curl -sS http://files.test:%d/ 2>&1; echo "curl by name: $?"
timeout 5 curl -sS http://127.0.0.1:%d/ 2>&1; echo "curl by address: $?"`, port, port)
	p := b.project(t, "offline", repo, cmd, 0)
	r := b.waitTerminal(t, accept(t, b, p).ID, 60*time.Second)
	log := b.logText(t, r.ID)
	for _, want := range []string{"proxy variables: 0\n", "getent: 2\n", "curl by name: 6\n", "curl by address: 7\n"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "[anvil] network:") || accepts.Load() != 0 {
		t.Fatalf("an offline run had a network (%d accepts):\n%s", accepts.Load(), log)
	}
	if conns, err := b.services.Network.Connections(context.Background(), b.owner.OrgID, r.ID); err != nil || len(conns) != 0 {
		t.Fatalf("connections of an offline run: %v %v", conns, err)
	}
}

// Without the operator's switch, a listed name that resolves to the
// worker's own loopback is refused, named in the log, and never contacted
// — even with ANVIL_RUNS_ALLOW_PRIVATE=true, which opens the private
// ranges and never the worker itself.
func TestPrivateAddressRefusedWithoutTheSwitch(t *testing.T) {
	t.Parallel()
	names := testNames{"files.test": "127.0.0.1"}
	b := setup(t, options{network: func(n *network.Service) { n.AllowPrivate, n.Resolver = true, names }})
	_, port, accepts := countingServer(t, "the file\n")
	repo, _, _ := gitRepo(t)
	p := b.networkProject(t, "private", repo, fmt.Sprintf(`curl -sS -m 5 -w '%%{http_code}\n' http://files.test:%d/`, port), []string{fmt.Sprintf("files.test:%d", port)})
	r := b.waitTerminal(t, accept(t, b, p).ID, 60*time.Second)
	log := b.logText(t, r.ID)
	if !strings.Contains(log, fmt.Sprintf("[anvil] refused files.test:%d — files.test resolves to the worker's own address", port)) ||
		!strings.Contains(log, "\n403\n") || !strings.Contains(log, "ANVIL_RUNS_ALLOW_LOOPBACK=true") {
		t.Fatalf("log:\n%s", log)
	}
	if accepts.Load() != 0 {
		t.Fatalf("the private server was contacted %d times", accepts.Load())
	}
	if conns := b.connections(t, r.ID); conns[0].Verdict != "refused" {
		t.Fatalf("connections: %+v", conns)
	}
}

// npm ci, unchanged, installs a lockfile resolved to a registry stand-in
// that the project lists by host and port.
func TestNPMCIThroughTheProxy(t *testing.T) {
	t.Parallel()
	reg := anviltest.NewNPMRegistry(t, anviltest.NPMPackage{Name: "greeting", Version: "1.2.3",
		Files: map[string]string{"index.js": `module.exports = () => "hello from greeting";` + "\n"}},
		anviltest.NPMPackage{Name: "farewell", Version: "0.1.0", Files: map[string]string{"index.js": `module.exports = "bye";` + "\n"}})
	b := setup(t, netOptions(true, testNames{"registry.npm.test": "127.0.0.1"}))
	base := fmt.Sprintf("http://registry.npm.test:%d", reg.Port)
	pj, lock := reg.Project(base)
	repo := jobstest.GitRepoWith(t, map[string]string{"package.json": pj, "package-lock.json": lock})
	cmd := `npm ci --no-audit --no-fund --registry ` + base + ` && node -e 'console.log(require("greeting")(), require("farewell"))'`
	p := b.networkProject(t, "npm", repo.URL, cmd, []string{fmt.Sprintf("registry.npm.test:%d", reg.Port)})
	r := b.waitTerminal(t, accept(t, b, p).ID, 120*time.Second)
	log := b.logText(t, r.ID)
	if r.Status() != runs.StatusPassed || !strings.Contains(log, "hello from greeting bye\n") {
		t.Fatalf("npm ci: %s\n%s", r.Status(), log)
	}
	var down int64
	for _, c := range b.connections(t, r.ID) {
		if c.Verdict != "allowed" || c.Host != "registry.npm.test" {
			t.Errorf("connection %+v", c)
		}
		down += c.BytesDown
	}
	if down == 0 || reg.Requests() < 2 {
		t.Fatalf("%d bytes down, %d registry requests (%v)", down, reg.Requests(), reg.Paths())
	}
}

// go mod download, unchanged, fetches a module through a GOPROXY stand-in
// the project lists (no checksum database: GOSUMDB=off).
func TestGoModDownloadThroughTheProxy(t *testing.T) {
	t.Parallel()
	gp := anviltest.NewGoProxy(t, anviltest.GoModule{Path: "example.test/greet", Version: "v1.0.0",
		Files: map[string]string{"greet.go": "package greet\n\n// Hello greets.\nfunc Hello() string { return \"hello from greet\" }\n"}})
	b := setup(t, netOptions(true, testNames{"goproxy.test": "127.0.0.1"}))
	repo := jobstest.GitRepoWith(t, map[string]string{"go.mod": "module example.test/app\n\ngo 1.21\n\nrequire example.test/greet v1.0.0\n",
		"main.go": "package main\n\nimport \"example.test/greet\"\n\nfunc main() { println(greet.Hello()) }\n"})
	cmd := fmt.Sprintf(`export GOPROXY=http://goproxy.test:%d GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local GOTELEMETRY=off
/usr/local/go/bin/go mod download -x example.test/greet 2>&1 | grep -c 'get http' ; /usr/local/go/bin/go mod download && cat "$(/usr/local/go/bin/go env GOMODCACHE)/example.test/greet@v1.0.0/greet.go"`, gp.Port)
	p := b.networkProject(t, "gomod", repo.URL, cmd, []string{fmt.Sprintf("goproxy.test:%d", gp.Port)})
	r := b.waitTerminal(t, accept(t, b, p).ID, 120*time.Second)
	log := b.logText(t, r.ID)
	if r.Status() != runs.StatusPassed || !strings.Contains(log, `return "hello from greet"`) || gp.Requests() == 0 {
		t.Fatalf("go mod download: %s (%d proxy requests)\n%s", r.Status(), gp.Requests(), log)
	}
	for _, c := range b.connections(t, r.ID) {
		if c.Verdict != "allowed" || c.Host != "goproxy.test" {
			t.Errorf("connection %+v", c)
		}
	}
}

// A repair run gets the repair list (not the runs' list) and the secrets
// scoped to repairs (not those scoped to runs): its "coding agent" reaches
// the model API stand-in with its key, and nothing else.
func TestRepairReachesItsModel(t *testing.T) {
	t.Parallel()
	var gotKey atomic.Value
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotKey.Store(r.Header.Get("X-Api-Key"))
		io.WriteString(w, `{"content":"fixed"}`)
	}))
	t.Cleanup(model.Close)
	port := model.Listener.Addr().(*net.TCPAddr).Port
	_, regPort, regAccepts := countingServer(t, "registry\n")
	b := setup(t, netOptions(true, testNames{"api.model.test": "127.0.0.1", "registry.test": "127.0.0.1"}))
	rb := &repairBundle{testBundle: b, incidents: b.services.Incidents, cards: b.services.Cards, feed: b.services.Feed}
	f := newForge(t)
	repo := jobstest.GitRepo(t)
	agent := fmt.Sprintf(`echo "runs-only: ${NPM_TOKEN:-absent}"
echo "registry: $(curl -s -m 5 -o /dev/null -w '%%{http_code}' http://registry.test:%d/)"
curl -fsS -H "X-Api-Key: $MODEL_API_KEY" -d "$ANVIL_TASK" http://api.model.test:%d/v1/messages && echo >> README`, regPort, port)
	p, inc := rb.incident(t, repo.URL, agent, "github", f.srv.URL)
	ctx := context.Background()
	runsList, repairList := []string{fmt.Sprintf("registry.test:%d", regPort)}, []string{fmt.Sprintf("api.model.test:%d", port)}
	if _, err := b.projects.Update(ctx, b.owner, p.ID, project.ProjectInput{NetworkAllow: &runsList, RepairNetworkAllow: &repairList}); err != nil {
		t.Fatal(err)
	}
	secrets := runsecret.New(b.store)
	modelKey, npmToken := "sk-model-key-0123456789", "npm_token_0123456789"
	if _, _, err := secrets.PutScoped(ctx, b.owner, p.ID, "MODEL_API_KEY", &modelKey, runsecret.ScopeRepairs); err != nil {
		t.Fatal(err)
	}
	if _, _, err := secrets.PutScoped(ctx, b.owner, p.ID, "NPM_TOKEN", &npmToken, runsecret.ScopeRuns); err != nil {
		t.Fatal(err)
	}
	after, run := rb.approveAndWait(t, inc)
	log := b.logText(t, run.ID)
	if run.State != runs.StatePassed || after.Status != domain.IncidentPROpen {
		t.Fatalf("repair %s, incident %s:\n%s", run.State, after.Status, log)
	}
	if gotKey.Load() != modelKey || !strings.Contains(log, `{"content":"fixed"}`) {
		t.Fatalf("the model got key %q:\n%s", gotKey.Load(), log)
	}
	if !strings.Contains(log, "runs-only: absent\n") || !strings.Contains(log, "registry: 403\n") || regAccepts.Load() != 0 {
		t.Fatalf("the repair got what runs get (%d registry accepts):\n%s", regAccepts.Load(), log)
	}
	if strings.Contains(log, modelKey) {
		t.Fatalf("the key is in the log:\n%s", log)
	}
}

// The process executor has no namespace to keep: its run gets the proxy on
// a loopback port with the same variables, and its log says plainly that
// nothing enforces the list.
func TestProcessExecutorNetworkIsNotEnforced(t *testing.T) {
	t.Parallel()
	o := netOptions(true, testNames{"files.test": "127.0.0.1"})
	o.mode = "process"
	b := setup(t, o)
	_, port, accepts := countingServer(t, "the file\n")
	repo, _, _ := gitRepo(t)
	p := b.networkProject(t, "unenforced", repo, fmt.Sprintf(`curl -fsS http://files.test:%d/ && echo "proxy: $HTTPS_PROXY"`, port),
		[]string{fmt.Sprintf("files.test:%d", port)})
	r := b.waitTerminal(t, accept(t, b, p).ID, 60*time.Second)
	log := b.logText(t, r.ID)
	if r.Status() != runs.StatusPassed || !strings.Contains(log, "the file\n") || !strings.Contains(log, "proxy: http://127.0.0.1:") ||
		!strings.Contains(log, "WARNING: nothing enforces this network list (ANVIL_SANDBOX=process)") || accepts.Load() != 1 {
		t.Fatalf("run %s:\n%s", r.Status(), log)
	}
	if conns := b.connections(t, r.ID); conns[0].Verdict != "allowed" || conns[0].Host != "files.test" {
		t.Fatalf("connections: %+v", conns)
	}
}

// A host a command sends the proxy is the command's to choose: one made of
// a secret (a malformed name, refused before any lookup) is masked in the
// run's Network section as it is in its log.
func TestMalformedHostIsMaskedInTheRecord(t *testing.T) {
	t.Parallel()
	b := setup(t, netOptions(false, testNames{}))
	ctx := context.Background()
	repo, _, _ := gitRepo(t)
	const value = "tok_Secret_Value_42"
	p := b.networkProject(t, "masked", repo, `curl -sS -m 5 -o /dev/null -w '%{http_code}\n' "http://${TOKEN}.example/" || true`, []string{"files.test"})
	if _, _, err := runsecret.New(b.store).Put(ctx, b.owner, p.ID, "TOKEN", value); err != nil {
		t.Fatal(err)
	}
	r := b.waitTerminal(t, accept(t, b, p).ID, 60*time.Second)
	log := b.logText(t, r.ID)
	conns := b.connections(t, r.ID)
	if strings.Contains(log, value) || !strings.Contains(log, "***") {
		t.Fatalf("log:\n%s", log)
	}
	for _, c := range conns {
		if strings.Contains(c.Host+c.Reason+c.Method, value) || strings.Contains(c.Host+c.Reason, strings.ToLower(value)) {
			t.Fatalf("the record shows the secret: %+v", c)
		}
	}
	if len(conns) != 1 || conns[0].Verdict != "failed" || !strings.Contains(conns[0].Host, "***") {
		t.Fatalf("connections: %+v\nlog:\n%s", conns, log)
	}
}

// An offline run fails like one: npm ci, unchanged, and Node's own fetch
// get "not found" from the first lookup and give up at once (npm's
// retries, 70 s of backoff by default, would outlast the run's 40 s), no
// JIT runtime dies of the memory bound (Node's fetch reserves 10 GiB of
// address space for WebAssembly), and the log's first error is anvil's,
// saying what to do.
func TestOfflineRunFailsAtOnceWithAMessage(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed")
	}
	reg := anviltest.NewNPMRegistry(t, anviltest.NPMPackage{Name: "greeting", Version: "1.2.3",
		Files: map[string]string{"index.js": `module.exports = () => "hello";` + "\n"}})
	pj, lock := reg.Project("https://registry.npmjs.org")
	repo := jobstest.GitRepoWith(t, map[string]string{"package.json": pj, "package-lock.json": lock})
	b := setup(t, options{})
	cmd := `npm ci --no-audit --no-fund; echo "npm: $?"
node -e 'fetch("https://registry.npmjs.org/").then(() => console.log("fetched"), (e) => console.log("fetch:", e.cause && e.cause.code))'
echo done`
	p := b.project(t, "offline-npm", repo.URL, cmd, 40)
	r := b.waitTerminal(t, accept(t, b, p).ID, 120*time.Second)
	log := b.logText(t, r.ID)
	hint := "[anvil] error: this project's runs have no network: add hosts in Edit → Network"
	at, npmErr := strings.Index(log, hint), strings.Index(log, "npm error")
	if r.Status() != runs.StatusPassed || !strings.Contains(log, "fetch: ENOTFOUND\n") || !strings.Contains(log, "\nnpm: 1\n") ||
		strings.Contains(log, "bad_alloc") || strings.Contains(log, "Out of memory") {
		t.Fatalf("run %s:\n%s", r.Status(), log)
	}
	if at < 0 || npmErr < 0 || at > npmErr || strings.Count(log, hint) != 1 {
		t.Fatalf("the log's first error is not anvil's hint:\n%s", log)
	}
	for _, l := range strings.Split(log[:at], "\n") {
		if strings.Contains(strings.ToLower(l), "error") {
			t.Fatalf("an error line comes before the hint: %q\n%s", l, log)
		}
	}
}
