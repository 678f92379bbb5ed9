package pipeline

import (
	"fmt"
	"path"
	"strings"
	"time"
)

// PlanOptions is what the planner knows of the run and of the worker.
type PlanOptions struct {
	// Images is the one switch for images: a worker that can run a step in
	// an image (and services beside it) sets it. Without it a step's image
	// and every service are refused with their line, as any key this
	// worker cannot honour is.
	Images bool
	// Event is push, pull_request or manual; Branch the run's branch.
	Event  string
	Branch string
	// ChangedFiles are the paths the commit changes against its parent,
	// when ChangedKnown. A `when: path` condition holds when they are not
	// known (a root commit, a parent the remote would not give): running a
	// step too often is safer than skipping the one that checks the change
	// (docs/pipelines.md).
	ChangedFiles []string
	ChangedKnown bool
}

// Plan is what a run executes: its steps in a stable order (the order of
// the files, of the matrix, then of the steps), each with the steps it
// waits for.
type Plan struct {
	Steps []*Planned
	// Services are each workflow's services, by workflow name: they run
	// for the whole workflow, beside its steps (docs/images.md).
	Services map[string][]*Service
}

// Planned is one step of the run: a step of a workflow for one combination
// of its matrix.
type Planned struct {
	Index int
	// Key names the step in the run, unique: its name, prefixed by its
	// workflow when the commit has several and followed by its matrix
	// combination, as in "test (GO=1.22)".
	Key      string
	Name     string
	Workflow string
	File     string
	Matrix   []KV
	Step     *Step
	// Services are the step's workflow's services, for a launcher that
	// runs them beside it (PlanOptions.Images).
	Services []*Service
	// Needs are the indices of the steps this one waits for.
	Needs []int
	// Skip is why the step will not run whatever happens before it
	// (its when's branch, event or path; its workflow's when); "" when it
	// may run.
	Skip string
	// clauses are the step's when conditions that hold statically; the
	// step runs when one of them accepts the status of the run so far.
	clauses [][]string
	// Timeout bounds the step (0: the run's own timeout bounds it).
	Timeout time.Duration
}

// Implicit is the plan of a commit without a pipeline file: the project's
// command as one step named "run", as before pipelines existed.
func Implicit(command string) *Plan {
	s := &Step{Name: "run", Commands: []string{command}}
	return &Plan{Steps: []*Planned{{Key: "run", Name: "run", Step: s, clauses: [][]string{nil}}}}
}

// Build plans a parsed configuration for one run.
func Build(cfg *Config, opt PlanOptions) (*Plan, error) {
	plan := &Plan{}
	wfSteps := map[string][]int{} // workflow → every planned index
	wfRoots := map[string][]int{} // workflow → planned indices with no need inside it
	for _, w := range cfg.Workflows {
		if !opt.Images {
			for _, s := range w.Steps {
				if s.Image != "" {
					return nil, &Error{File: w.File, Line: s.ImageLine, Msg: fmt.Sprintf("step %q: image: this worker runs steps in its own sandbox and has no images support (docs/pipelines.md)", s.Name)}
				}
			}
			if len(w.Services) > 0 {
				s := w.Services[0]
				return nil, &Error{File: w.File, Line: s.Line, Msg: fmt.Sprintf("service %q: services need the images support this worker does not have (docs/pipelines.md)", s.Name)}
			}
		}
		if len(w.Services) > 0 {
			if plan.Services == nil {
				plan.Services = map[string][]*Service{}
			}
			plan.Services[w.Name] = w.Services
		}
		combos, err := combinations(w)
		if err != nil {
			return nil, err
		}
		if len(plan.Steps)+len(combos)*len(w.Steps) > MaxPlannedSteps {
			return nil, &Error{File: w.File, Msg: fmt.Sprintf("more than %d steps in the run once the matrix is expanded", MaxPlannedSteps)}
		}
		wfSkip := ""
		if len(w.When) > 0 {
			if _, reason := holds(w.When, opt); reason != "" {
				wfSkip = "workflow " + reason
			}
		}
		deps := stepDeps(w)
		for _, combo := range combos {
			base := len(plan.Steps)
			for i, s := range w.Steps {
				p := &Planned{
					Index: base + i, Name: s.Name, Workflow: w.Name, File: w.File, Matrix: combo, Step: s,
					Services: w.Services, Timeout: s.Timeout,
				}
				if p.Timeout == 0 {
					p.Timeout = w.Timeout
				}
				p.Key = stepKey(len(cfg.Workflows) > 1, w.Name, s.Name, combo)
				for _, d := range deps[i] {
					p.Needs = append(p.Needs, base+d)
				}
				if len(deps[i]) == 0 {
					wfRoots[w.Name] = append(wfRoots[w.Name], p.Index)
				}
				wfSteps[w.Name] = append(wfSteps[w.Name], p.Index)
				switch {
				case wfSkip != "":
					p.Skip = wfSkip
				case len(s.When) == 0:
					p.clauses = [][]string{nil}
				default:
					p.clauses, p.Skip = holds(s.When, opt)
				}
				plan.Steps = append(plan.Steps, p)
			}
		}
	}
	// A workflow's first steps wait for every step of the workflows it
	// depends on.
	for _, w := range cfg.Workflows {
		for _, d := range w.DependsOn {
			for _, r := range wfRoots[w.Name] {
				plan.Steps[r].Needs = append(plan.Steps[r].Needs, wfSteps[d.Name]...)
			}
		}
	}
	return plan, nil
}

func stepKey(many bool, workflow, name string, combo []KV) string {
	k := name
	if many {
		k = workflow + "/" + name
	}
	if len(combo) > 0 {
		parts := make([]string, len(combo))
		for i, kv := range combo {
			parts[i] = kv.Key + "=" + kv.Value
		}
		k += " (" + strings.Join(parts, ", ") + ")"
	}
	return k
}

// combinations expands a workflow's matrix ([nil] without one).
func combinations(w *Workflow) ([][]KV, error) {
	m := w.Matrix
	if m == nil {
		return [][]KV{nil}, nil
	}
	if len(m.Include) > 0 {
		return m.Include, nil
	}
	out := [][]KV{nil}
	for _, a := range m.Axes {
		next := make([][]KV, 0, len(out)*len(a.Values))
		for _, c := range out {
			for _, v := range a.Values {
				combo := append(append([]KV{}, c...), KV{a.Name, v})
				next = append(next, combo)
			}
		}
		if len(next) > MaxCombinations {
			return nil, &Error{File: w.File, Line: m.Line, Msg: fmt.Sprintf("matrix: more than %d combinations (none is dropped silently)", MaxCombinations)}
		}
		out = next
	}
	return out, nil
}

// holds evaluates the static part (branch, event, path) of when clauses:
// the status lists of those that hold, or, when none does, why (the first
// clause's first failing condition).
func holds(when []*When, opt PlanOptions) (clauses [][]string, reason string) {
	for _, w := range when {
		r := ""
		switch {
		case len(w.Branch) > 0 && !anyMatch(w.Branch, opt.Branch, false):
			r = "when: branch [" + strings.Join(w.Branch, ", ") + "]"
		case len(w.Event) > 0 && !contains(w.Event, opt.Event):
			r = "when: event [" + strings.Join(w.Event, ", ") + "]"
		case len(w.Path) > 0 && opt.ChangedKnown && !pathsMatch(w.Path, opt.ChangedFiles):
			r = "when: path [" + strings.Join(w.Path, ", ") + "]"
		}
		if r == "" {
			clauses = append(clauses, w.Status)
		} else if reason == "" {
			reason = r
		}
	}
	if len(clauses) > 0 {
		return clauses, ""
	}
	return nil, reason
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func pathsMatch(globs, files []string) bool {
	for _, f := range files {
		if anyMatch(globs, f, true) {
			return true
		}
	}
	return false
}

func anyMatch(globs []string, s string, paths bool) bool {
	for _, g := range globs {
		if Match(g, s, paths) {
			return true
		}
	}
	return false
}

// Match reports whether s matches the glob g. With paths, "**" as a whole
// segment matches any number of segments (docs/**, **/*.go); otherwise (a
// branch) "*" does not cross "/" as in path.Match.
func Match(g, s string, paths bool) bool {
	if !paths || !strings.Contains(g, "**") {
		ok, _ := path.Match(g, s)
		return ok
	}
	return matchSegs(strings.Split(g, "/"), strings.Split(s, "/"), 0)
}

func matchSegs(g, s []string, depth int) bool {
	if depth > 32 {
		return false
	}
	for len(g) > 0 {
		if g[0] == "**" {
			g = g[1:]
			if len(g) == 0 {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if matchSegs(g, s[i:], depth+1) {
					return true
				}
			}
			return false
		}
		if len(s) == 0 {
			return false
		}
		if ok, _ := path.Match(g[0], s[0]); !ok {
			return false
		}
		g, s = g[1:], s[1:]
	}
	return len(s) == 0
}

// NeedsChangedFiles reports whether a `when: path` condition appears
// anywhere: only then does the executor ask git for the commit's changes.
func NeedsChangedFiles(cfg *Config) bool {
	has := func(ws []*When) bool {
		for _, w := range ws {
			if len(w.Path) > 0 {
				return true
			}
		}
		return false
	}
	for _, w := range cfg.Workflows {
		if has(w.When) {
			return true
		}
		for _, s := range w.Steps {
			if has(s.When) {
				return true
			}
		}
	}
	return false
}
