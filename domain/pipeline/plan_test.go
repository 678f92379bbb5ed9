package pipeline

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func plan(t *testing.T, src string, opt PlanOptions) *Plan {
	t.Helper()
	cfg, err := parseOne(t, src)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// walk runs the scheduler to the end, failing the steps in fail, and
// returns every step's fate: "ran", or "skipped: reason".
func walk(p *Plan, fail map[string]Outcome) map[string]string {
	s := NewScheduler(p)
	fate := map[string]string{}
	for !s.Finished() {
		ds := s.Next()
		if len(ds) == 0 {
			panic("scheduler stuck")
		}
		for _, d := range ds {
			k := p.Steps[d.Index].Key
			if !d.Run {
				fate[k] = "skipped: " + d.Reason
				continue
			}
			fate[k] = "ran"
			o := Passed
			if f, ok := fail[k]; ok {
				o = f
			}
			s.Done(d.Index, o)
		}
	}
	return fate
}

func TestPlanDAG(t *testing.T) {
	t.Parallel()
	p := plan(t, example, PlanOptions{Event: EventPush, Branch: "feature"})
	needs := map[string][]int{}
	for _, s := range p.Steps {
		needs[s.Key] = s.Needs
	}
	want := map[string][]int{"build": nil, "test": {0}, "lint": nil, "release": {1, 2}}
	if !reflect.DeepEqual(needs, want) {
		t.Fatalf("needs %v, want %v", needs, want)
	}
	if p.Steps[3].Skip != "when: branch [main, release/*]" {
		t.Fatalf("release on a feature branch: %q", p.Steps[3].Skip)
	}
	if p := plan(t, example, PlanOptions{Event: EventPush, Branch: "release/1.2"}); p.Steps[3].Skip != "" {
		t.Fatalf("release on release/1.2: %q", p.Steps[3].Skip)
	}
	if p := plan(t, example, PlanOptions{Event: EventManual, Branch: "main"}); p.Steps[3].Skip != "when: event [push]" {
		t.Fatalf("release on a manual run: %q", p.Steps[3].Skip)
	}
}

// A failing step skips its dependents (and theirs); a step asking for
// status failure runs; an ignored failure does not count.
func TestScheduleFailure(t *testing.T) {
	t.Parallel()
	src := `
steps:
  - name: build
    commands: [x]
  - name: test
    commands: [x]
  - name: deploy
    commands: [x]
  - name: notify
    commands: [x]
    when: {status: [failure]}
  - name: lint
    depends_on: []
    failure: ignore
    commands: [x]
  - name: after-lint
    depends_on: [lint]
    commands: [x]
`
	p := plan(t, src, PlanOptions{Event: EventPush, Branch: "main"})
	got := walk(p, map[string]Outcome{"build": Failed, "lint": Ignored})
	want := map[string]string{
		"build": "ran", "test": "skipped: a step before it failed: build",
		"deploy": "skipped: a step before it failed: build", "notify": "ran",
		"lint": "ran", "after-lint": "ran",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
	got = walk(p, nil)
	if got["notify"] != "skipped: when: status [failure]" {
		t.Fatalf("notify on success: %q", got["notify"])
	}
}

func TestPlanMatrix(t *testing.T) {
	t.Parallel()
	src := "matrix:\n  GO: ['1.22', '1.23']\nsteps:\n  - name: test\n    commands: [go test]\n  - name: vet\n    commands: [go vet]\n"
	p := plan(t, src, PlanOptions{})
	var keys []string
	for _, s := range p.Steps {
		keys = append(keys, s.Key)
	}
	if strings.Join(keys, "|") != "test (GO=1.22)|vet (GO=1.22)|test (GO=1.23)|vet (GO=1.23)" {
		t.Fatal(keys)
	}
	if p.Steps[3].Needs[0] != 2 {
		t.Fatalf("a combination's steps follow each other within it: %v", p.Steps[3].Needs)
	}
	env, err := Env(p.Steps[2], CI{CommitSHA: "abc", Event: EventPush}, nil)
	if err != nil || env["GO"] != "1.23" || env["CI_STEP_NAME"] != "test" || env["CI"] != "true" || env["CI_COMMIT_SHA"] != "abc" {
		t.Fatalf("env %v %v", env, err)
	}
	inc := "matrix:\n  include:\n    - {GO: '1.22', DB: pg}\n    - {GO: '1.23', DB: sqlite}\nsteps:\n  - name: test\n    commands: [x]\n"
	p = plan(t, inc, PlanOptions{})
	if len(p.Steps) != 2 || p.Steps[1].Key != "test (GO=1.23, DB=sqlite)" {
		t.Fatalf("include: %+v", p.Steps[1])
	}
}

func TestPlanRefusesImagesUntilEnabled(t *testing.T) {
	t.Parallel()
	src := "steps:\n  - name: a\n    commands: [x]\n  - name: b\n    image: golang:1.23\n    commands: [go test]\n"
	cfg, err := parseOne(t, src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Build(cfg, PlanOptions{}); err == nil || !strings.HasPrefix(err.Error(), ".anvil.yaml:5: step \"b\": image:") {
		t.Fatalf("image: %v", err)
	}
	p, err := Build(cfg, PlanOptions{Images: true})
	if err != nil || p.Steps[1].Step.Image != "golang:1.23" {
		t.Fatalf("with images: %v", err)
	}
	svc := "services:\n  - name: postgres\n    image: postgres:16\n    ports: [5432]\n    healthcheck: {command: pg_isready, interval: 1s, retries: 30}\nsteps:\n  - name: a\n    commands: [x]\n"
	cfg, err = parseOne(t, svc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Build(cfg, PlanOptions{}); err == nil || !strings.HasPrefix(err.Error(), ".anvil.yaml:2: service \"postgres\"") {
		t.Fatalf("service: %v", err)
	}
	if p, err := Build(cfg, PlanOptions{Images: true}); err != nil || len(p.Steps[0].Services) != 1 {
		t.Fatalf("a step knows its workflow's services: %v", err)
	}
	if s := cfg.Workflows[0].Services[0]; s.Healthcheck.Retries != 30 || s.Ports[0].Number != 5432 {
		t.Fatalf("service model: %+v", s)
	}
}

func TestPlanPathAndWorkflows(t *testing.T) {
	t.Parallel()
	src := "steps:\n  - name: docs\n    commands: [x]\n    when: {path: ['docs/**', '*.md']}\n"
	if p := plan(t, src, PlanOptions{ChangedKnown: true, ChangedFiles: []string{"src/main.go"}}); p.Steps[0].Skip != "when: path [docs/**, *.md]" {
		t.Fatalf("path: %q", p.Steps[0].Skip)
	}
	if p := plan(t, src, PlanOptions{ChangedKnown: true, ChangedFiles: []string{"docs/a/b.txt"}}); p.Steps[0].Skip != "" {
		t.Fatal("docs/** must match docs/a/b.txt")
	}
	if p := plan(t, src, PlanOptions{}); p.Steps[0].Skip != "" {
		t.Fatal("unknown changes: the path condition holds")
	}
	cfg, err := Parse([]Source{
		{Path: ".anvil/build.yaml", Data: []byte("steps: [{name: a, commands: [x]}, {name: b, commands: [x]}]\n")},
		{Path: ".anvil/deploy.yaml", Data: []byte("depends_on: [build]\nwhen: {branch: main}\nsteps: [{name: ship, commands: [x]}]\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(cfg, PlanOptions{Branch: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Steps[2].Key != "deploy/ship" || !reflect.DeepEqual(p.Steps[2].Needs, []int{0, 1}) || p.Steps[2].Skip != "workflow when: branch [main]" {
		t.Fatalf("%+v", p.Steps[2])
	}
}

func TestMatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		g, s  string
		paths bool
		want  bool
	}{
		{"release/*", "release/1.0", false, true},
		{"release/*", "release/1/x", false, false},
		{"**/*.go", "a/b/c.go", true, true},
		{"**/*.go", "c.go", true, true},
		{"docs/**", "docs", true, true},
		{"src/**/test_*.py", "src/x/y/test_a.py", true, true},
		{"*.md", "docs/a.md", true, false},
	} {
		if got := Match(tc.g, tc.s, tc.paths); got != tc.want {
			t.Errorf("Match(%q, %q) = %v", tc.g, tc.s, got)
		}
	}
}

func TestEnvSecret(t *testing.T) {
	t.Parallel()
	p := plan(t, "steps:\n  - name: a\n    commands: [x]\n    environment:\n      TOKEN: {from_secret: DEPLOY}\n", PlanOptions{})
	env, err := Env(p.Steps[0], CI{}, map[string]string{"DEPLOY": "s3cret"})
	if err != nil || env["TOKEN"] != "s3cret" {
		t.Fatalf("%v %v", env, err)
	}
	if _, err := Env(p.Steps[0], CI{}, nil); err == nil || !strings.HasPrefix(err.Error(), ".anvil.yaml:5: environment TOKEN") {
		t.Fatalf("missing secret: %v", err)
	}
}

// Parse and plan of a 100-step file: the bound is 5 ms.
func BenchmarkParsePlan100(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("steps:\n")
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&sb, "  - name: step-%d\n    commands:\n      - echo %d\n      - make target-%d\n    environment: {N: '%d'}\n    when: {branch: [main, 'release/*'], event: [push, manual]}\n", i, i, i, i)
		if i%10 == 0 {
			sb.WriteString("    depends_on: []\n")
		}
	}
	src := []Source{{Path: ".anvil.yaml", Data: []byte(sb.String())}}
	b.ReportAllocs()
	for b.Loop() {
		cfg, err := Parse(src)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Build(cfg, PlanOptions{Event: EventPush, Branch: "main"}); err != nil {
			b.Fatal(err)
		}
	}
}
