package pipeline

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func parseOne(t *testing.T, src string) (*Config, error) {
	t.Helper()
	return Parse([]Source{{Path: ".anvil.yaml", Data: []byte(src)}})
}

const example = `
variables:
  - &go_env
    GOFLAGS: -mod=readonly
steps:
  - name: build
    commands:
      - go build ./...
    environment:
      <<: *go_env
      TOKEN: {from_secret: DEPLOY_TOKEN}
  - name: test
    commands: go test ./...
    timeout: 10m
    artifacts: [coverage/**, report.xml]
  - name: lint
    depends_on: []
    commands: [make lint]
    failure: ignore
  - name: release
    depends_on: [test, lint]
    when:
      - branch: [main, release/*]
        event: push
    commands: ./release.sh
    directory: scripts
`

func TestParseExample(t *testing.T) {
	t.Parallel()
	cfg, err := parseOne(t, example)
	if err != nil {
		t.Fatal(err)
	}
	w := cfg.Workflows[0]
	if len(w.Steps) != 4 {
		t.Fatalf("steps: %d", len(w.Steps))
	}
	b := w.Steps[0]
	if b.Name != "build" || b.Line != 6 || len(b.Environment) != 2 {
		t.Fatalf("build: %+v", b)
	}
	if b.Environment[0].Name != "TOKEN" || b.Environment[0].FromSecret != "DEPLOY_TOKEN" || b.Environment[1].Value != "-mod=readonly" {
		t.Fatalf("environment: %+v", b.Environment)
	}
	if b.DependsOn != nil {
		t.Fatal("build: depends_on absent must be nil")
	}
	if s := w.Steps[1]; s.Timeout != 10*time.Minute || len(s.Artifacts) != 2 || s.Commands[0] != "go test ./..." {
		t.Fatalf("test: %+v", s)
	}
	if s := w.Steps[2]; s.DependsOn == nil || len(s.DependsOn) != 0 || !s.FailureIgnore {
		t.Fatalf("lint: %+v", s)
	}
	if s := w.Steps[3]; len(s.When) != 1 || s.When[0].Event[0] != "push" || s.Directory != "scripts" {
		t.Fatalf("release: %+v", s)
	}
}

func TestParseMapForm(t *testing.T) {
	t.Parallel()
	cfg, err := parseOne(t, "steps:\n  one:\n    commands: [a]\n  two:\n    commands: [b]\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Workflows[0].Steps; got[0].Name != "one" || got[1].Name != "two" || got[1].Line != 4 {
		t.Fatalf("%+v %+v", got[0], got[1])
	}
}

// Each refusal names its line: the contract's "refuse, never ignore".
func TestParseRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, src, want string
	}{
		{"unknown top key", "steps:\n  - name: a\n    commands: [x]\nclone: false\n", ".anvil.yaml:4: unknown key \"clone\""},
		{"typo depend_on", "steps:\n  - name: a\n    commands: [x]\n  - name: b\n    depend_on: [a]\n    commands: [x]\n", ".anvil.yaml:5: unknown key \"depend_on\" in a step (did you mean depends_on?)"},
		{"settings", "steps:\n  - name: a\n    settings: {x: 1}\n    commands: [x]\n", ".anvil.yaml:3: unknown key \"settings\""},
		{"volumes", "steps:\n  - name: a\n    commands: [x]\n    volumes: [/x:/y]\n", ".anvil.yaml:4: unknown key \"volumes\""},
		{"privileged", "steps:\n  - name: a\n    commands: [x]\n    privileged: true\n", ".anvil.yaml:4: unknown key \"privileged\""},
		{"colon in command", "steps:\n  - name: a\n    commands:\n      - echo ok\n      - echo key: value\n", ".anvil.yaml:5: commands: a map where a text was expected (an unquoted \": \""},
		{"cycle", "steps:\n  - name: a\n    depends_on: [b]\n    commands: [x]\n  - name: b\n    depends_on: [a]\n    commands: [x]\n", ".anvil.yaml:5: depends_on: a cycle through \"b\" and \"a\""},
		{"duplicate name", "steps:\n  - name: a\n    commands: [x]\n  - name: a\n    commands: [x]\n", ".anvil.yaml:4: step name \"a\" used twice"},
		{"unknown dependency", "steps:\n  - name: a\n    commands: [x]\n    depends_on:\n      - nope\n", ".anvil.yaml:5: step \"a\" depends on \"nope\""},
		{"self dependency", "steps:\n  - name: a\n    commands: [x]\n    depends_on: [a]\n", ".anvil.yaml:4: step \"a\" depends on itself"},
		{"bad name", "steps:\n  - name: Build Me\n    commands: [x]\n", ".anvil.yaml:2: step name \"Build Me\""},
		{"long name", "steps:\n  - name: " + strings.Repeat("a", 65) + "\n    commands: [x]\n", ".anvil.yaml:2: step name"},
		{"no name", "steps:\n  - commands: [x]\n", ".anvil.yaml:2: a step needs a name"},
		{"no commands", "steps:\n  - name: a\n", ".anvil.yaml:2: step \"a\" has no commands"},
		{"no steps", "when: {branch: main}\n", ".anvil.yaml:1: no steps"},
		{"bad yaml", "steps:\n  - name: a\n\tcommands: x\n", ".anvil.yaml:2: not valid YAML: found a tab character"},
		{"bad event", "steps:\n  - name: a\n    commands: [x]\n    when:\n      event: tag\n", ".anvil.yaml:5: when: event \"tag\""},
		{"bad status", "steps:\n  - name: a\n    commands: [x]\n    when: {status: always}\n", ".anvil.yaml:4: when: status \"always\""},
		{"when key", "steps:\n  - name: a\n    commands: [x]\n    when:\n      ref: main\n", ".anvil.yaml:5: unknown key \"ref\" in when"},
		{"bad timeout", "steps:\n  - name: a\n    commands: [x]\n    timeout: soon\n", ".anvil.yaml:4: timeout: \"soon\""},
		{"failure value", "steps:\n  - name: a\n    commands: [x]\n    failure: maybe\n", ".anvil.yaml:4: failure: ignore or fail"},
		{"directory escapes", "steps:\n  - name: a\n    commands: [x]\n    directory: ../x\n", ".anvil.yaml:4: directory:"},
		{"artifact absolute", "steps:\n  - name: a\n    commands: [x]\n    artifacts: [/etc/passwd]\n", ".anvil.yaml:4: artifacts:"},
		{"from_secret shape", "steps:\n  - name: a\n    commands: [x]\n    environment:\n      A: {secret: B}\n", ".anvil.yaml:5: environment A: a value, or {from_secret: NAME}"},
		{"env name", "steps:\n  - name: a\n    commands: [x]\n    environment:\n      1A: b\n", ".anvil.yaml:5: environment: \"1A\""},
		{"duplicate key", "steps:\n  - name: a\n    commands: [x]\n    commands: [y]\n", ".anvil.yaml:4: a step: key \"commands\" given twice"},
		{"too many axes", "matrix:\n" + axes(11, 1) + "steps:\n  - name: a\n    commands: [x]\n", ".anvil.yaml:2: matrix: 11 axes; at most 10"},
		{"too many combinations", "matrix:\n" + axes(2, 6) + "steps:\n  - name: a\n    commands: [x]\n", ".anvil.yaml:2: matrix: more than 25 combinations"},
		{"services same port", "services:\n  - name: db\n    image: postgres\n    ports: [5432]\n  - name: db2\n    image: postgres\n    ports: [\"5432/tcp\"]\nsteps:\n  - name: a\n    commands: [x]\n", ".anvil.yaml:7: port 5432: services \"db\" and \"db2\""},
		{"service key", "services:\n  - name: db\n    image: postgres\n    volumes: [x]\nsteps:\n  - name: a\n    commands: [x]\n", ".anvil.yaml:4: unknown key \"volumes\" in a service"},
		{"two documents", "steps:\n  - name: a\n    commands: [x]\n---\nsteps: []\n", ".anvil.yaml:4: one YAML document"},
		{"steps not a list", "steps: build\n", ".anvil.yaml:1: steps must be a list or a map"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseOne(t, tc.src)
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("want a refusal, got %v", err)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("got  %q\nwant %q…", err.Error(), tc.want)
			}
		})
	}
}

func axes(n, values int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  A%d: [", i)
		for v := 0; v < values; v++ {
			if v > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%d", v)
		}
		b.WriteString("]\n")
	}
	return b.String()
}

func TestParseBounds(t *testing.T) {
	t.Parallel()
	big := "steps:\n" + strings.Repeat("  - name: a\n    commands: ["+strings.Repeat("x", 1000)+"]\n", 300)
	if _, err := parseOne(t, big); err == nil || !strings.Contains(err.Error(), "at most 262144") {
		t.Fatalf("file bound: %v", err)
	}
	var b strings.Builder
	b.WriteString("steps:\n")
	for i := 0; i <= MaxSteps; i++ {
		fmt.Fprintf(&b, "  - name: s%d\n    commands: [x]\n", i)
	}
	if _, err := parseOne(t, b.String()); err == nil || !strings.Contains(err.Error(), "101 steps; at most 100") {
		t.Fatalf("step bound: %v", err)
	}
	var files []Source
	for i := 0; i <= MaxWorkflows; i++ {
		files = append(files, Source{Path: fmt.Sprintf(".anvil/w%d.yaml", i), Data: []byte("steps: [{name: a, commands: [x]}]")})
	}
	if _, err := Parse(files); err == nil || !strings.Contains(err.Error(), "at most 20") {
		t.Fatalf("workflow bound: %v", err)
	}
}

// A billion laughs: nine levels of ten aliases each would be 10^9 nodes;
// the walk stops at its node bound instead.
func TestParseBillionLaughs(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("variables:\n  - &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&b, "  - &a%d [", i)
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	b.WriteString("steps:\n  - name: a\n    commands: *a8\n")
	_, err := parseOne(t, b.String())
	if err == nil || !(strings.Contains(err.Error(), "YAML nodes") || strings.Contains(err.Error(), "a list where a text") || strings.Contains(err.Error(), "excessive aliasing")) {
		t.Fatalf("want a bounded refusal, got %v", err)
	}
}

func TestParseWorkflows(t *testing.T) {
	t.Parallel()
	files := []Source{
		{Path: ".anvil/build.yaml", Data: []byte("steps: [{name: compile, commands: [make]}]\n")},
		{Path: ".anvil/deploy.yaml", Data: []byte("depends_on: [build]\nsteps: [{name: ship, commands: [./ship]}]\n")},
	}
	cfg, err := Parse(files)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Workflows[1].Name != "deploy" || cfg.Workflows[1].DependsOn[0].Name != "build" {
		t.Fatalf("%+v", cfg.Workflows[1])
	}
	files[0].Data = []byte("depends_on: [deploy]\nsteps: [{name: compile, commands: [make]}]\n")
	if _, err := Parse(files); err == nil || !strings.Contains(err.Error(), "cycle through workflows") {
		t.Fatalf("workflow cycle: %v", err)
	}
	files[0].Data = []byte("depends_on: [nope]\nsteps: [{name: compile, commands: [make]}]\n")
	if _, err := Parse(files); err == nil || !strings.HasPrefix(err.Error(), ".anvil/build.yaml:1: depends_on: no other workflow") {
		t.Fatalf("unknown workflow: %v", err)
	}
}

func TestSelect(t *testing.T) {
	t.Parallel()
	if got, err := Select(false, false, nil); err != nil || got != nil {
		t.Fatalf("none: %v %v", got, err)
	}
	if got, _ := Select(false, true, nil); got[0] != ".anvil.yml" {
		t.Fatal(got)
	}
	if _, err := Select(true, true, nil); err == nil {
		t.Fatal("both root names must be refused")
	}
	if _, err := Select(true, false, []string{"a.yaml"}); err == nil {
		t.Fatal("a root file and the folder must be refused")
	}
	if got, err := Select(true, false, []string{"README.md"}); err != nil || got[0] != ".anvil.yaml" {
		t.Fatalf("other files in .anvil/: %v %v", got, err)
	}
	if got, _ := Select(false, false, []string{"a.yaml", "b.yaml", "notes.txt"}); len(got) != 2 || got[1] != ".anvil/b.yaml" {
		t.Fatal(got)
	}
}

func TestScript(t *testing.T) {
	t.Parallel()
	got := Script(&Step{Commands: []string{"echo 'hi'", "make"}, Directory: "sub dir"})
	want := "set -e\ncd -- 'sub dir'\nprintf '%s\\n' '+ echo '\\''hi'\\'''\necho 'hi'\nprintf '%s\\n' '+ make'\nmake\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
