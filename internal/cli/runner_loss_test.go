package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"anvil/db"
	"anvil/db/testdb"
	"anvil/internal/anviltest"
	"anvil/jobs/jobstest"
	"anvil/jobs/sandbox"
)

// startAnvil starts the binary and stops it (SIGTERM) when the test ends.
func startAnvil(t *testing.T, env []string, args ...string) (*exec.Cmd, string, *bytes.Buffer) {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(binary, append(args, "--addr", addr)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	logs := &bytes.Buffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	waitReady(t, addr)
	return cmd, addr, logs
}

func apiCall(t *testing.T, token, method, url string, body any) map[string]any {
	t.Helper()
	return anviltest.MustJSON(t, token, method, url, body)
}

func pollUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", within, what)
}

// TestWorkerKilledRunnerLost kills River's leader with SIGKILL in the
// middle of a run it executes, while a second worker is up: no sandbox
// survives it, the surviving worker — which is not River's leader, and
// River needs about 15 s to elect a new one — declares the run runner_lost
// within ANVIL_HEARTBEAT_TIMEOUT + 3 s of the kill, and the next run
// starts on it.
func TestWorkerKilledRunnerLost(t *testing.T) {
	t.Parallel()
	if err := sandbox.BwrapAvailable(); err != nil {
		t.Skipf("bubblewrap cannot run here: %v", err)
	}
	const timeout = 4 * time.Second
	dbURL := testdb.URLFor(testdb.Name(t))
	env := []string{"ANVIL_DATABASE_URL=" + dbURL, "ANVIL_SECRET_KEY=" + testKey,
		"ANVIL_HEARTBEAT_TIMEOUT=" + timeout.String(), "ANVIL_WORK_DIR=" + t.TempDir(), "ANVIL_CHECKOUT_ALLOW_LOCAL=true"}
	if code, _, stderr := anvil(t, env, "", "migrate"); code != 0 {
		t.Fatal(stderr)
	}
	_, out, _ := anvil(t, env, "a long enough password\n", "admin", "bootstrap", "--org", "acme", "--email", "o@acme.test")
	var boot map[string]string
	json.Unmarshal([]byte(out), &boot)
	token := boot["token"]
	ctx := context.Background()
	d, err := db.Open(ctx, dbURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	leader := func() string {
		var id string
		_ = d.Bun.NewRaw(`SELECT leader_id FROM river_leader`).Scan(ctx, &id)
		return id
	}
	executor := func(runID string) string {
		var ex string
		_ = d.Bun.NewRaw(`SELECT coalesce(executor, '') FROM project_runs WHERE id = ?`, runID).Scan(ctx, &ex)
		return ex
	}

	_, web, _ := startAnvil(t, env, "serve", "--role", "web")
	base := "http://" + web
	repo := jobstest.GitRepo(t)
	marker := fmt.Sprintf("%d", 300+time.Now().UnixNano()%1000)
	p := apiCall(t, token, "POST", base+"/api/private/projects", map[string]any{"slug": "doomed", "repo_url": repo.URL,
		"default_branch": "main", "run_command": "echo started; sleep " + marker})
	pid := p["id"].(string)
	first := apiCall(t, token, "POST", base+"/api/private/projects/"+pid+"/runs", nil)["run_id"].(string)
	second := apiCall(t, token, "POST", base+"/api/private/projects/"+pid+"/runs", nil)["run_id"].(string)

	// Worker A, alone, becomes River's leader and executes the first run.
	a, _, _ := startAnvil(t, env, "worker")
	pollUntil(t, 30*time.Second, "worker A to lead River", func() bool {
		return strings.Contains(leader(), fmt.Sprintf("_%d_", a.Process.Pid))
	})
	status := func(id string) map[string]any { return apiCall(t, token, "GET", base+"/api/private/runs/"+id, nil) }
	pollUntil(t, 60*time.Second, "the first run to run", func() bool { return status(first)["status"] == "running" })
	if ex := executor(first); !strings.Contains(ex, fmt.Sprintf(":%d:", a.Process.Pid)) {
		t.Fatalf("the first run executes on %q, not on worker A (pid %d)", ex, a.Process.Pid)
	}
	pollUntil(t, 10*time.Second, "the command to start", func() bool {
		return exec.Command("pgrep", "-f", "sleep "+marker).Run() == nil
	})
	// Worker B joins; A keeps the leadership.
	b, _, _ := startAnvil(t, env, "worker")
	if l := leader(); !strings.Contains(l, fmt.Sprintf("_%d_", a.Process.Pid)) {
		t.Fatalf("River's leader is %q, not worker A (pid %d)", l, a.Process.Pid)
	}

	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = a.Wait()
	// Worker B declares the runner lost, well before River has a new leader.
	deadline := killed.Add(timeout + 3*time.Second)
	pollUntil(t, time.Until(deadline), "runner_lost within the heartbeat timeout + 3 s of the kill", func() bool {
		r := status(first)
		return r["status"] == "failed" && r["failure_reason"] == "runner_lost"
	})
	t.Logf("runner_lost %s after the kill; River's leader then: %q", time.Since(killed).Round(100*time.Millisecond), leader())
	// The sandbox died with its parent.
	pollUntil(t, 10*time.Second, "the sandbox to die with the worker", func() bool {
		return exec.Command("pgrep", "-f", "sleep "+marker).Run() != nil
	})

	// The queue moves: the next run executes on worker B.
	pollUntil(t, 60*time.Second, "the next run to start", func() bool { return status(second)["status"] == "running" })
	if ex := executor(second); !strings.Contains(ex, fmt.Sprintf(":%d:", b.Process.Pid)) {
		t.Fatalf("the next run executes on %q, not on worker B (pid %d)", ex, b.Process.Pid)
	}
	apiCall(t, token, "POST", base+"/api/private/runs/"+second+"/cancel", nil)
	pollUntil(t, 30*time.Second, "the second run to be canceled", func() bool { return status(second)["status"] == "canceled" })
	if logs := strings.TrimSpace(fmt.Sprint(status(first)["exit_code"])); logs != "<nil>" {
		t.Fatalf("a lost run has no exit code, got %s", logs)
	}
}
