package pipeline

import (
	"fmt"
	"strings"
)

// Script returns a step's commands as one shell script for /bin/sh -c: set
// -e (the first failing command ends the step), each command echoed as
// "+ command" before it runs (the log masks secrets in the echo as in any
// output), after a cd into the step's directory.
func Script(s *Step) string {
	var b strings.Builder
	b.WriteString("set -e\n")
	if s.Directory != "" {
		fmt.Fprintf(&b, "cd -- %s\n", quote(s.Directory))
	}
	for _, c := range s.Commands {
		fmt.Fprintf(&b, "printf '%%s\\n' %s\n%s\n", quote("+ "+c), c)
	}
	return b.String()
}

// quote single-quotes s for the shell.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// CI is what a step learns of its run through the CI_ variables.
type CI struct {
	CommitSHA string
	Branch    string
	Event     string
	Workspace string
}

// Env returns a step's variables: CI's (Woodpecker's names), the matrix
// combination's, then its environment, values or run secrets. A
// from_secret naming no secret of the run is an error with its line (the
// secret may be missing, or withheld from a fork's run).
func Env(p *Planned, ci CI, secrets map[string]string) (map[string]string, error) {
	env := map[string]string{
		"CI":                "true",
		"CI_COMMIT_SHA":     ci.CommitSHA,
		"CI_COMMIT_BRANCH":  ci.Branch,
		"CI_PIPELINE_EVENT": ci.Event,
		"CI_WORKSPACE":      ci.Workspace,
		"CI_STEP_NAME":      p.Name,
	}
	for _, kv := range p.Matrix {
		env[kv.Key] = kv.Value
	}
	for _, e := range p.Step.Environment {
		if e.FromSecret == "" {
			env[e.Name] = e.Value
			continue
		}
		v, ok := secrets[e.FromSecret]
		if !ok {
			return nil, &Error{File: p.File, Line: e.Line, Msg: fmt.Sprintf("environment %s: the run has no secret %s (not set on the project, or withheld from a fork's run)", e.Name, e.FromSecret)}
		}
		env[e.Name] = v
	}
	return env, nil
}

// Select picks the pipeline files of a commit from what its root holds:
// .anvil.yaml or .anvil.yml, or the *.yaml files of .anvil/ (dirEntries,
// their names). None: nil, and the project's command runs. Both a root file
// and the folder, or both root names, is an error: which one counts would
// be a guess.
func Select(hasYAML, hasYML bool, dirEntries []string) ([]string, error) {
	var roots []string
	if hasYAML {
		roots = append(roots, ".anvil.yaml")
	}
	if hasYML {
		roots = append(roots, ".anvil.yml")
	}
	if len(roots) == 2 {
		return nil, &Error{File: ".anvil.yaml", Msg: "both .anvil.yaml and .anvil.yml exist; keep one"}
	}
	var out []string
	for _, n := range dirEntries {
		switch {
		case strings.HasSuffix(n, ".yaml"):
			out = append(out, ".anvil/"+n)
		case strings.HasSuffix(n, ".yml"):
			return nil, &Error{File: ".anvil/" + n, Msg: "workflow files are named *.yaml"}
		}
	}
	if len(roots) == 1 {
		if len(out) > 0 {
			return nil, &Error{File: roots[0], Msg: "both " + roots[0] + " and .anvil/*.yaml hold pipelines; keep one"}
		}
		return roots, nil
	}
	if len(out) > MaxWorkflows {
		return nil, &Error{File: ".anvil", Msg: fmt.Sprintf("%d workflows; at most %d", len(out), MaxWorkflows)}
	}
	return out, nil
}
