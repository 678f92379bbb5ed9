package pipeline

import (
	"os"
	"strings"
	"testing"
)

// TestDocsExample: the example of docs/pipelines.md parses and plans as
// the page says it does.
func TestDocsExample(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../../docs/pipelines.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(page), "```yaml\n")
	src, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("no yaml example in docs/pipelines.md")
	}
	cfg, err := Parse([]Source{{Path: ".anvil.yaml", Data: []byte(src)}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(cfg, PlanOptions{Event: EventPush, Branch: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) != 10 || p.Steps[0].Key != "build (GO_VERSION=1.22)" || p.Steps[3].Skip != "" {
		t.Fatalf("%d steps, first %q", len(p.Steps), p.Steps[0].Key)
	}
	if env := p.Steps[0].Step.Environment; len(env) != 1 || env[0].Value != "-mod=readonly" {
		t.Fatalf("the anchor: %+v", env)
	}
}
