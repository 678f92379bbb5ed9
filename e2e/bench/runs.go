package main

// Run execution's figures, against a real `anvil serve` executing in bubblewrap
// (the process executor where bubblewrap cannot run): per-run time through
// the queue for a trivial command compared with a bare `git clone` plus the
// same command; terminal report → next run running; a log line → an open
// run page's event stream.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"anvil/jobs/sandbox"
)

// logStampRE finds the stamps the log bench's command prints.
var logStampRE = regexp.MustCompile(`t=(\d{19})`)

func init() {
	register("runs/execute", benchRuns)
}

// benchRepo makes a bare repository with one commit.
func benchRepo(dir string) (string, error) {
	bare := filepath.Join(dir, "repo.git")
	work := filepath.Join(dir, "work")
	env := append(os.Environ(), "GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@b", "GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@b")
	for _, args := range [][]string{
		{"init", "-q", "--bare", "-b", "main", bare},
		{"init", "-q", "-b", "main", work},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("git %v: %w %s", args, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(work, "README"), []byte("bench\n"), 0o644); err != nil {
		return "", err
	}
	for _, args := range [][]string{{"add", "."}, {"commit", "-q", "-m", "one"}, {"push", "-q", bare, "main"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = work, env
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("git %v: %w %s", args, err, out)
		}
	}
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil {
			if info.IsDir() {
				_ = os.Chmod(p, 0o755)
			} else {
				_ = os.Chmod(p, 0o644)
			}
		}
		return nil
	})
	return "file://" + bare, nil
}

func apiDo(client *http.Client, method, url, token string, body any) (map[string]any, error) {
	var r io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		r = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, url, r)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	out := map[string]any{}
	_ = json.NewDecoder(res.Body).Decode(&out)
	if res.StatusCode >= 300 {
		return nil, fmt.Errorf("%s %s: %d %v", method, url, res.StatusCode, out)
	}
	return out, nil
}

func waitRun(ctx context.Context, base, token, id string, done func(map[string]any) bool) (map[string]any, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		r, err := apiDo(http.DefaultClient, "GET", base+"/api/private/runs/"+id, token, nil)
		if err != nil {
			return nil, err
		}
		if done(r) {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("run %s did not finish", id)
}

func isTerminal(r map[string]any) bool {
	s := r["status"]
	return s == "passed" || s == "failed" || s == "canceled"
}

func stamp(r map[string]any, k string) time.Time {
	s, _ := r[k].(string)
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

func benchRuns(ctx context.Context, env *benchEnv) error {
	mode := "bwrap"
	if sandbox.BwrapAvailable() != nil {
		mode = "process"
	}
	env.note("runs", "sandbox="+mode, 1)
	url, err := env.newDatabase(ctx)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "anvil-bench-runs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	_ = os.Chmod(work, 0o755)
	repo, err := benchRepo(work)
	if err != nil {
		return err
	}
	if _, err := env.run(ctx, url, "", "migrate"); err != nil {
		return err
	}
	token, err := env.bootstrap(ctx, url, "bench", "bench@anvil.test", "correct horse battery")
	if err != nil {
		return err
	}
	p, err := env.startWith(url, "ANVIL_SANDBOX="+mode, "ANVIL_WORK_DIR="+filepath.Join(work, "ws"))
	if err != nil {
		return err
	}
	defer func() { _ = p.stop() }()
	if err := p.waitReady(ctx); err != nil {
		return err
	}
	base := p.URL

	// 1. A bare clone plus the command, as the baseline.
	const n = 10
	var bare []time.Duration
	for i := 0; i < n; i++ {
		dir := filepath.Join(work, "bare-"+strconv.Itoa(i))
		t0 := time.Now()
		if out, err := exec.Command("git", "clone", "-q", "--depth", "1", repo, dir).CombinedOutput(); err != nil {
			return fmt.Errorf("git clone: %w %s", err, out)
		}
		cmd := exec.Command("/bin/sh", "-c", "true")
		cmd.Dir = dir
		if err := cmd.Run(); err != nil {
			return err
		}
		bare = append(bare, time.Since(t0))
		_ = os.RemoveAll(dir)
	}

	proj, err := apiDo(http.DefaultClient, "POST", base+"/api/private/projects", token, map[string]any{
		"slug": "bench", "repo_url": repo, "default_branch": "main", "run_command": "true"})
	if err != nil {
		return err
	}
	pid := proj["id"].(string)
	var through []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		r, err := apiDo(http.DefaultClient, "POST", base+"/api/private/projects/"+pid+"/runs", token, nil)
		if err != nil {
			return err
		}
		got, err := waitRun(ctx, base, token, r["run_id"].(string), isTerminal)
		if err != nil {
			return err
		}
		if got["status"] != "passed" {
			return fmt.Errorf("bench run %v", got)
		}
		through = append(through, time.Since(t0))
	}
	sortDurations(bare)
	sortDurations(through)
	b, t := percentile(bare, 50), percentile(through, 50)
	env.note("runs", "bare_clone_plus_command_p50_ms", ms(b))
	env.note("runs", "run_through_queue_p50_ms", ms(t))
	env.report("runs", "run_over_bare_ratio", float64(int(float64(t)/float64(b)*100))/100, 3)

	// 2. Terminal report → next run running, for back-to-back runs.
	var gaps []time.Duration
	for i := 0; i < n; i++ {
		a, err := apiDo(http.DefaultClient, "POST", base+"/api/private/projects/"+pid+"/runs", token, nil)
		if err != nil {
			return err
		}
		bRun, err := apiDo(http.DefaultClient, "POST", base+"/api/private/projects/"+pid+"/runs", token, nil)
		if err != nil {
			return err
		}
		first, err := waitRun(ctx, base, token, a["run_id"].(string), isTerminal)
		if err != nil {
			return err
		}
		second, err := waitRun(ctx, base, token, bRun["run_id"].(string), func(r map[string]any) bool { return r["started_at"] != nil })
		if err != nil {
			return err
		}
		gaps = append(gaps, stamp(second, "started_at").Sub(stamp(first, "finished_at")))
		if _, err := waitRun(ctx, base, token, bRun["run_id"].(string), isTerminal); err != nil {
			return err
		}
	}
	sortDurations(gaps)
	env.note("runs", "terminal_to_next_running_p50_ms", ms(percentile(gaps, 50)))
	env.report("runs", "terminal_to_next_running_p99_ms", ms(percentile(gaps, 99)), 250)

	// 3. A log line → the run page's event stream.
	if _, err := apiDo(http.DefaultClient, "PATCH", base+"/api/private/projects/"+pid, token, map[string]any{
		"run_command": `i=0; while [ $i -lt 40 ]; do i=$((i+1)); echo "t=$(date +%s%N)"; sleep 0.05; done`}); err != nil {
		return err
	}
	client, err := loginClient(base, "bench@anvil.test", "correct horse battery")
	if err != nil {
		return err
	}
	r, err := apiDo(http.DefaultClient, "POST", base+"/api/private/projects/"+pid+"/runs", token, nil)
	if err != nil {
		return err
	}
	id := r["run_id"].(string)
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, "GET", base+"/events?run="+id+"&after=0", nil)
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	var lags []time.Duration
	sc := bufio.NewScanner(res.Body)
	// The stream carries the log as rendered lines (views.LogHTML: a
	// time gutter, ANSI spans), several to a chunk: every stamp counts.
	for sc.Scan() && len(lags) < 40 {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		for _, m := range logStampRE.FindAllStringSubmatch(line, -1) {
			if ns, err := strconv.ParseInt(m[1], 10, 64); err == nil {
				lags = append(lags, time.Since(time.Unix(0, ns)))
			}
		}
	}
	if len(lags) == 0 {
		return fmt.Errorf("no log lines arrived on the stream")
	}
	sortDurations(lags)
	env.note("runs", "log_line_to_page_p50_ms", ms(percentile(lags, 50)))
	env.report("runs", "log_line_to_page_p99_ms", ms(percentile(lags, 99)), 500)
	return nil
}
