package cli

import (
	"bytes"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"anvil/db/testdb"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "anvil-bin-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "anvil")
	if out, err := exec.Command("go", "build", "-o", binary, "anvil").CombinedOutput(); err != nil {
		panic(string(out))
	}
	defer os.RemoveAll(dir)
	testdb.Main(m)
}

var testKey = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))

// anvil runs the binary with only the given environment.
func anvil(t *testing.T, env []string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

func TestConfigurationIsValidatedWithExitCode2(t *testing.T) {
	t.Parallel()
	dbURL := "ANVIL_DATABASE_URL=postgres://postgres@127.0.0.1:5432/none"
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"missing key", []string{dbURL}, []string{"serve"}, "ANVIL_SECRET_KEY is required"},
		{"short key", []string{dbURL, "ANVIL_SECRET_KEY=c2hvcnQ="}, []string{"serve"}, "ANVIL_SECRET_KEY"},
		{"missing database", []string{"ANVIL_SECRET_KEY=" + testKey}, []string{"serve"}, "ANVIL_DATABASE_URL is required"},
		{"bad role", []string{dbURL, "ANVIL_SECRET_KEY=" + testKey}, []string{"serve", "--role", "both"}, "--role must be all, web or worker"},
		{"bad heartbeat", []string{dbURL, "ANVIL_SECRET_KEY=" + testKey, "ANVIL_HEARTBEAT_TIMEOUT=soon"}, []string{"serve"}, "ANVIL_HEARTBEAT_TIMEOUT"},
		{"bad body timeout", []string{dbURL, "ANVIL_SECRET_KEY=" + testKey, "ANVIL_BODY_TIMEOUT=500ms"}, []string{"serve"}, "ANVIL_BODY_TIMEOUT must be a duration between 1s and 1h"},
		{"bad feed flag", []string{dbURL, "ANVIL_SECRET_KEY=" + testKey, "ANVIL_FEED_ARMED=maybe"}, []string{"serve"}, "ANVIL_FEED_ARMED"},
		{"bad proxies", []string{dbURL, "ANVIL_SECRET_KEY=" + testKey, "ANVIL_TRUSTED_PROXIES=somewhere"}, []string{"serve"}, "ANVIL_TRUSTED_PROXIES"},
		{"bad allow local", []string{dbURL, "ANVIL_SECRET_KEY=" + testKey, "ANVIL_CHECKOUT_ALLOW_LOCAL=perhaps"}, []string{"serve"}, "ANVIL_CHECKOUT_ALLOW_LOCAL must be true or false"},
		{"bad allow private", []string{dbURL, "ANVIL_SECRET_KEY=" + testKey, "ANVIL_ALERTS_ALLOW_PRIVATE=perhaps"}, []string{"serve"}, "ANVIL_ALERTS_ALLOW_PRIVATE must be true or false"},
		{"bad retention share", []string{dbURL, "ANVIL_SECRET_KEY=" + testKey, "ANVIL_RETENTION_SHARE=2"}, []string{"serve"}, "ANVIL_RETENTION_SHARE must be a number between 0.01 and 1"},
		{"bad tmp max", []string{dbURL, "ANVIL_SECRET_KEY=" + testKey, "ANVIL_SANDBOX_TMP_MAX=lots"}, []string{"serve"}, "ANVIL_SANDBOX_TMP_MAX must be a size"},
		{"tiny tmp max", []string{dbURL, "ANVIL_SECRET_KEY=" + testKey, "ANVIL_SANDBOX_TMP_MAX=1K"}, []string{"serve"}, "ANVIL_SANDBOX_TMP_MAX must be a size"},
		{"unknown command", nil, []string{"explode"}, "unknown command"},
		{"unknown flag", nil, []string{"serve", "--nope"}, "flag provided but not defined"},
		{"bootstrap without org", []string{dbURL, "ANVIL_SECRET_KEY=" + testKey}, []string{"admin", "bootstrap", "--email", "a@b.c"}, "--org and --email are required"},
	}
	for _, tc := range cases {
		code, _, stderr := anvil(t, tc.env, "", tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", tc.name, code, stderr, tc.want)
		}
		if strings.Contains(stderr, testKey) {
			t.Errorf("%s: the key was echoed", tc.name)
		}
	}
}

func TestHelpOnEveryCommand(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"serve", "--help"}, {"worker", "--help"}, {"migrate", "--help"}, {"admin", "--help"}, {"admin", "bootstrap", "--help"}, {"admin", "rotate-key", "--help"}, {"admin", "forget-secrets", "--help"}, {"dev", "--help"}} {
		code, out, stderr := anvil(t, nil, "", args...)
		if code != 0 || !strings.Contains(out+stderr, "Usage") {
			t.Errorf("%v: exit %d, %q", args, code, out+stderr)
		}
	}
}

func TestMigrateAndBootstrap(t *testing.T) {
	t.Parallel()
	env := []string{"ANVIL_DATABASE_URL=" + testdb.URLFor(testdb.Name(t)), "ANVIL_SECRET_KEY=" + testKey}
	if code, _, stderr := anvil(t, env, "", "migrate"); code != 0 {
		t.Fatalf("migrate: %d %s", code, stderr)
	}
	code, out, stderr := anvil(t, env, "a long enough password\n", "admin", "bootstrap", "--org", "acme", "--email", "owner@acme.test")
	if code != 0 {
		t.Fatalf("bootstrap: %d %s", code, stderr)
	}
	var res map[string]string
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res) != 3 {
		t.Fatalf("bootstrap printed %q", out)
	}
	if !strings.HasPrefix(res["token"], "anv_pat_") || res["org_id"] == "" || res["user_id"] == "" {
		t.Fatalf("bootstrap result %v", res)
	}
	// The same organisation twice is a clear refusal.
	pw := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pw, []byte("a long enough password\n"), 0o600)
	code, _, stderr = anvil(t, env, "", "admin", "bootstrap", "--org", "acme", "--email", "x@acme.test", "--password-file", pw)
	if code != 1 || !strings.Contains(stderr, `organisation "acme" already exists`) {
		t.Fatalf("second bootstrap: %d %s", code, stderr)
	}
	code, _, stderr = anvil(t, env, "short\n", "admin", "bootstrap", "--org", "other", "--email", "x@acme.test")
	if code != 1 || !strings.Contains(stderr, "at least 10 characters") {
		t.Fatalf("short password: %d %s", code, stderr)
	}
}

// TestDevBootstrapsALoginAndNoToken: `anvil dev` (what `make run` starts)
// creates the demo owner and prints the login, and creates no API token
// that nobody would ever see.
func TestDevBootstrapsALoginAndNoToken(t *testing.T) {
	t.Parallel()
	dbURL := testdb.URLFor(testdb.Name(t))
	addr, dir := freeAddr(t), t.TempDir()
	cmd := exec.Command(binary, "dev", "--addr", addr, "--dir", dir)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "ANVIL_DATABASE_URL=" + dbURL, "ANVIL_SECRET_KEY=" + testKey, "ANVIL_SANDBOX=process",
		"ANVIL_WORK_DIR=" + t.TempDir()}
	// One stream, as a terminal shows both: the login comes after the
	// start-up's log lines, and a page served writes no request line.
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, addr)
	if res, err := http.Get("http://" + addr + "/login"); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /login: %v", err)
	} else {
		res.Body.Close()
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("dev: exit after SIGTERM: %v\n%s", err, out.String())
	}
	pw, err := os.ReadFile(filepath.Join(dir, "demo-password"))
	printed := out.String()
	login := strings.Index(printed, "log in as demo@anvil.local / "+strings.TrimSpace(string(pw)))
	if err != nil || login < 0 {
		t.Fatalf("dev printed %q (%v)", printed, err)
	}
	if serving := strings.Index(printed, `"msg":"anvil is serving"`); serving < 0 || serving > login {
		t.Errorf("the login is not printed after start-up's log lines:\n%s", printed)
	}
	if !strings.Contains(printed, "allowed for this local demo") || !strings.Contains(printed, "ANVIL_RUNS_ALLOW_PRIVATE") {
		t.Errorf("dev does not say that runs may reach private addresses:\n%s", printed)
	}
	if strings.Contains(printed, `"msg":"http request"`) {
		t.Errorf("dev logs requests at info:\n%s", printed)
	}
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var users, tokens int
	if err := db.QueryRow(`SELECT (SELECT count(*) FROM users), (SELECT count(*) FROM api_tokens)`).Scan(&users, &tokens); err != nil {
		t.Fatal(err)
	}
	if users != 1 || tokens != 0 {
		t.Fatalf("dev bootstrapped %d users and %d API tokens; want 1 and 0", users, tokens)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitReady(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		res, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never became ready", addr)
}

func TestServeRolesAndGracefulStop(t *testing.T) {
	t.Parallel()
	env := []string{"ANVIL_DATABASE_URL=" + testdb.URLFor(testdb.Name(t)), "ANVIL_SECRET_KEY=" + testKey}
	for _, role := range []string{"all", "web", "worker"} {
		addr := freeAddr(t)
		args := []string{"serve", "--addr", addr, "--role", role}
		if role == "worker" {
			args = []string{"worker", "--addr", addr}
		}
		cmd := exec.Command(binary, args...)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
		var logs bytes.Buffer
		cmd.Stderr = &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitReady(t, addr)
		res, err := http.Get("http://" + addr + "/login")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		wantLogin := 200
		if role == "worker" {
			wantLogin = 404
		}
		if res.StatusCode != wantLogin {
			t.Errorf("role %s: GET /login = %d, want %d", role, res.StatusCode, wantLogin)
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("role %s: exit after SIGTERM: %v\n%s", role, err, logs.String())
		}
		if !strings.Contains(logs.String(), `"msg":"stopped"`) || !strings.Contains(logs.String(), `"role":"`+role+`"`) {
			t.Errorf("role %s: logs lack a clean stop:\n%s", role, logs.String())
		}
		if strings.Contains(logs.String(), "notify failed") {
			t.Errorf("role %s: the stop lost live events:\n%s", role, logs.String())
		}
	}
}

// TestShutdownEndsLiveStreams: an open SSE stream does not hold up a
// graceful stop (http.Server.Shutdown waits for active connections).
func TestShutdownEndsLiveStreams(t *testing.T) {
	t.Parallel()
	env := []string{"ANVIL_DATABASE_URL=" + testdb.URLFor(testdb.Name(t)), "ANVIL_SECRET_KEY=" + testKey, "ANVIL_SANDBOX=process"}
	if code, _, stderr := anvil(t, env, "", "migrate"); code != 0 {
		t.Fatal(stderr)
	}
	anvil(t, env, "a long enough password\n", "admin", "bootstrap", "--org", "acme", "--email", "o@acme.test")
	addr := freeAddr(t)
	cmd := exec.Command(binary, "serve", "--addr", addr, "--role", "web")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, addr)
	// Log in through the form and open the organisation's event stream.
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	res, err := client.Get("http://" + addr + "/login")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := regexp.MustCompile(`name="_csrf" value="([^"]+)"`).FindSubmatch(page)
	if m == nil {
		t.Fatal("no login form")
	}
	res, err = client.PostForm("http://"+addr+"/login", url.Values{"_csrf": {string(m[1])}, "email": {"o@acme.test"}, "password": {"a long enough password"}})
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("login: %v %v", err, res.Status)
	}
	res.Body.Close()
	stream, err := client.Get("http://" + addr + "/events")
	if err != nil || stream.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %v", err)
	}
	defer stream.Body.Close()
	start := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("graceful stop took %s with a live stream open", d)
	}
}
