package main

// Pipelines' figures (docs/pipelines.md, docs/figures.md): parsing and
// planning a 100-step file; a one-step .anvil.yaml against the same
// repository without one, through the queue of a real `anvil serve`; six
// independent steps that each sleep 1 s with ANVIL_RUN_PARALLEL_STEPS=6.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"anvil/domain/pipeline"
	"anvil/jobs/sandbox"
)

func init() {
	register("runs/pipelines", benchPipelines)
}

// benchRepoWith is benchRepo whose commit also holds files.
func benchRepoWith(dir string, files map[string]string) (string, error) {
	if err := os.MkdirAll(filepath.Join(dir, "work"), 0o755); err != nil {
		return "", err
	}
	for name, body := range files {
		p := filepath.Join(dir, "work", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	// benchRepo inits "work" (git init on an existing folder keeps its
	// files) and commits everything in it.
	return benchRepo(dir)
}

func hundredSteps() []byte {
	var b strings.Builder
	b.WriteString("steps:\n")
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&b, "  - name: step-%d\n    commands:\n      - echo %d\n      - make target-%d\n    environment: {N: '%d'}\n    when: {branch: [main, 'release/*'], event: [push, manual]}\n", i, i, i, i)
		if i%10 == 0 {
			b.WriteString("    depends_on: []\n")
		}
	}
	return []byte(b.String())
}

func benchPipelines(ctx context.Context, env *benchEnv) error {
	// 1. Parse and plan a 100-step file, in process.
	src := []pipeline.Source{{Path: ".anvil.yaml", Data: hundredSteps()}}
	var parse []time.Duration
	for i := 0; i < 200; i++ {
		t0 := time.Now()
		cfg, err := pipeline.Parse(src)
		if err != nil {
			return err
		}
		if _, err := pipeline.Build(cfg, pipeline.PlanOptions{Event: pipeline.EventPush, Branch: "main"}); err != nil {
			return err
		}
		parse = append(parse, time.Since(t0))
	}
	sortDurations(parse)
	env.report("pipelines", "parse_plan_100_steps_p50_ms", ms(percentile(parse, 50)), 5)

	mode := "bwrap"
	if sandbox.BwrapAvailable() != nil {
		mode = "process"
	}
	url, err := env.newDatabase(ctx)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "anvil-bench-pipelines-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	_ = os.Chmod(work, 0o755)
	plain, err := benchRepoWith(filepath.Join(work, "plain"), nil)
	if err != nil {
		return err
	}
	oneStep, err := benchRepoWith(filepath.Join(work, "one"), map[string]string{".anvil.yaml": "steps:\n  - name: run\n    commands: ['true']\n"})
	if err != nil {
		return err
	}
	var sleeps strings.Builder
	sleeps.WriteString("steps:\n")
	for i := 0; i < 6; i++ {
		fmt.Fprintf(&sleeps, "  - name: sleep-%d\n    depends_on: []\n    commands: [sleep 1]\n", i)
	}
	six, err := benchRepoWith(filepath.Join(work, "six"), map[string]string{".anvil.yaml": sleeps.String()})
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
	p, err := env.startWith(url, "ANVIL_SANDBOX="+mode, "ANVIL_WORK_DIR="+filepath.Join(work, "ws"), "ANVIL_RUN_PARALLEL_STEPS=6")
	if err != nil {
		return err
	}
	defer func() { _ = p.stop() }()
	if err := p.waitReady(ctx); err != nil {
		return err
	}
	base := p.URL
	project := func(slug, repo string) (string, error) {
		proj, err := apiDo(http.DefaultClient, "POST", base+"/api/private/projects", token, map[string]any{
			"slug": slug, "repo_url": repo, "default_branch": "main", "run_command": "true"})
		if err != nil {
			return "", err
		}
		return proj["id"].(string), nil
	}
	runOnce := func(pid string) (map[string]any, time.Duration, error) {
		t0 := time.Now()
		r, err := apiDo(http.DefaultClient, "POST", base+"/api/private/projects/"+pid+"/runs", token, nil)
		if err != nil {
			return nil, 0, err
		}
		got, err := waitRun(ctx, base, token, r["run_id"].(string), isTerminal)
		if err != nil {
			return nil, 0, err
		}
		if got["status"] != "passed" {
			return nil, 0, fmt.Errorf("bench run %v", got)
		}
		return got, time.Since(t0), nil
	}

	// 2. The same command without a file and as a one-step pipeline,
	// interleaved so that both see the same machine.
	plainID, err := project("plain", plain)
	if err != nil {
		return err
	}
	oneID, err := project("one", oneStep)
	if err != nil {
		return err
	}
	const n = 12
	var without, with []time.Duration
	for i := 0; i < n; i++ {
		_, d, err := runOnce(plainID)
		if err != nil {
			return err
		}
		without = append(without, d)
		_, d, err = runOnce(oneID)
		if err != nil {
			return err
		}
		with = append(with, d)
	}
	sortDurations(without)
	sortDurations(with)
	a, b := percentile(without, 50), percentile(with, 50)
	env.note("pipelines", "no_file_run_p50_ms", ms(a))
	env.note("pipelines", "one_step_file_run_p50_ms", ms(b))
	env.report("pipelines", "one_step_over_no_file_ratio", float64(int(float64(b)/float64(a)*1000))/1000, 1.05)

	// 3. Six 1 s sleeps at once: the pipeline's time, from the first
	// step's start to the last one's end.
	sixID, err := project("six", six)
	if err != nil {
		return err
	}
	var spans []time.Duration
	for i := 0; i < 3; i++ {
		got, _, err := runOnce(sixID)
		if err != nil {
			return err
		}
		var first, last time.Time
		for _, s := range got["pipeline"].(map[string]any)["steps"].([]any) {
			st, en := stamp(s.(map[string]any), "started_at"), stamp(s.(map[string]any), "finished_at")
			if first.IsZero() || st.Before(first) {
				first = st
			}
			if en.After(last) {
				last = en
			}
		}
		spans = append(spans, last.Sub(first))
	}
	sortDurations(spans)
	env.report("pipelines", "six_parallel_1s_steps_s", float64(percentile(spans, 50).Milliseconds())/1000, 1.5)
	return nil
}
