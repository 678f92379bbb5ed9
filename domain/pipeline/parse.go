package pipeline

import (
	"bytes"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Source is one pipeline file as read from the commit.
type Source struct {
	Path string // relative to the repository: .anvil.yaml, .anvil/build.yaml
	Data []byte
}

var (
	nameRE = regexp.MustCompile(`^[a-z0-9._-]{1,64}$`)
	envRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// Parse reads the pipeline files of a commit. Every key is checked by hand,
// with its line: yaml's own strict decoding let a misspelt key through, and
// an unknown key silently ignored is a step that silently does something
// else. Aliases are expanded by this walk and counted, so a small file cannot
// grow into a large tree ("billion laughs").
func Parse(files []Source) (*Config, error) {
	if len(files) == 0 {
		return nil, &Error{File: ".anvil.yaml", Msg: "no pipeline file"}
	}
	if len(files) > MaxWorkflows {
		return nil, &Error{File: ".anvil", Msg: fmt.Sprintf("%d workflows; at most %d", len(files), MaxWorkflows)}
	}
	cfg := &Config{}
	seen := map[string]bool{}
	for _, f := range files {
		name := ""
		if dir, base := path.Split(f.Path); dir != "" {
			name = strings.TrimSuffix(base, ".yaml")
			if !nameRE.MatchString(name) {
				return nil, &Error{File: f.Path, Msg: fmt.Sprintf("workflow name %q: use lower-case letters, digits, '.', '_' or '-' (at most 64)", name)}
			}
		}
		if seen[name] {
			return nil, &Error{File: f.Path, Msg: fmt.Sprintf("workflow %q defined twice", name)}
		}
		seen[name] = true
		w, err := parseFile(f, name)
		if err != nil {
			return nil, err
		}
		cfg.Workflows = append(cfg.Workflows, w)
	}
	// Workflow depends_on must name workflows of this commit.
	for _, w := range cfg.Workflows {
		for _, d := range w.DependsOn {
			if !seen[d.Name] || d.Name == w.Name {
				return nil, &Error{File: w.File, Line: d.Line, Msg: fmt.Sprintf("depends_on: no other workflow is named %q", d.Name)}
			}
		}
	}
	if err := workflowCycle(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// parser walks one file's node tree.
type parser struct {
	file  string
	nodes int
}

func (p *parser) errf(n *yaml.Node, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &Error{File: p.file, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// resolve follows aliases and counts the nodes the walk visits.
func (p *parser) resolve(n *yaml.Node, depth int) (*yaml.Node, error) {
	for i := 0; n.Kind == yaml.AliasNode; i++ {
		if n.Alias == nil || i > MaxDepth {
			return nil, p.errf(n, "alias does not resolve")
		}
		n = n.Alias
	}
	p.nodes++
	if p.nodes > MaxNodes {
		return nil, p.errf(n, "the file expands to more than %d YAML nodes (aliases?)", MaxNodes)
	}
	if depth > MaxDepth {
		return nil, p.errf(n, "nested deeper than %d levels", MaxDepth)
	}
	return n, nil
}

// entry is one key of a mapping, merges (<<) applied.
type entry struct {
	key string
	k   *yaml.Node
	v   *yaml.Node
}

// mapping returns the entries of a mapping node in written order, with
// merge keys expanded (an explicit key wins over a merged one) and
// duplicate keys refused.
func (p *parser) mapping(n *yaml.Node, what string, depth int) ([]entry, error) {
	n, err := p.resolve(n, depth)
	if err != nil {
		return nil, err
	}
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n, "%s must be a map", what)
	}
	var out, merged []entry
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, err := p.resolve(n.Content[i], depth+1)
		if err != nil {
			return nil, err
		}
		if k.Kind != yaml.ScalarNode {
			return nil, p.errf(k, "%s: a key must be a plain name", what)
		}
		if k.Tag == "!!merge" || (k.Value == "<<" && k.Style == 0) {
			srcs := []*yaml.Node{n.Content[i+1]}
			if v, err := p.resolve(n.Content[i+1], depth+1); err != nil {
				return nil, err
			} else if v.Kind == yaml.SequenceNode {
				srcs = v.Content
			}
			for _, s := range srcs {
				es, err := p.mapping(s, what, depth+1)
				if err != nil {
					return nil, err
				}
				merged = append(merged, es...)
			}
			continue
		}
		if seen[k.Value] {
			return nil, p.errf(k, "%s: key %q given twice", what, k.Value)
		}
		seen[k.Value] = true
		out = append(out, entry{key: k.Value, k: k, v: n.Content[i+1]})
	}
	for _, e := range merged {
		if !seen[e.key] {
			seen[e.key] = true
			out = append(out, e)
		}
	}
	return out, nil
}

// scalar returns a scalar's text (strings, numbers and booleans alike).
func (p *parser) scalar(n *yaml.Node, what string, depth int) (string, error) {
	n, err := p.resolve(n, depth)
	if err != nil {
		return "", err
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "", p.errf(n, "%s: a value is missing", what)
		}
		if len(n.Value) > MaxValueBytes {
			return "", p.errf(n, "%s: longer than %d bytes", what, MaxValueBytes)
		}
		return n.Value, nil
	case yaml.MappingNode:
		return "", p.errf(n, "%s: a map where a text was expected (an unquoted \": \" in it? quote the whole value)", what)
	default:
		return "", p.errf(n, "%s: a list where a text was expected", what)
	}
}

// strings returns a string or a list of strings.
func (p *parser) strings(n *yaml.Node, what string, max, depth int) ([]string, error) {
	n, err := p.resolve(n, depth)
	if err != nil {
		return nil, err
	}
	if n.Kind != yaml.SequenceNode {
		s, err := p.scalar(n, what, depth)
		if err != nil {
			return nil, err
		}
		return []string{s}, nil
	}
	if len(n.Content) > max {
		return nil, p.errf(n, "%s: more than %d entries", what, max)
	}
	out := make([]string, 0, len(n.Content))
	for _, c := range n.Content {
		s, err := p.scalar(c, what, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (p *parser) boolean(n *yaml.Node, what string, depth int) (bool, error) {
	s, err := p.scalar(n, what, depth)
	if err != nil {
		return false, err
	}
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, p.errf(n, "%s: true or false, not %q", what, s)
}

func (p *parser) duration(n *yaml.Node, what string, depth int) (time.Duration, error) {
	s, err := p.scalar(n, what, depth)
	if err != nil {
		return 0, err
	}
	var d time.Duration
	if m, err := strconv.Atoi(s); err == nil {
		d = time.Duration(m) * time.Minute // Woodpecker's plain number: minutes
	} else if d, err = time.ParseDuration(s); err != nil {
		return 0, p.errf(n, "%s: %q is not a duration such as 30s, 10m or 1h", what, s)
	}
	if d <= 0 || d > MaxTimeout {
		return 0, p.errf(n, "%s: %s is outside (0, %s]", what, s, MaxTimeout)
	}
	return d, nil
}

func (p *parser) name(n *yaml.Node, what string, depth int) (string, error) {
	s, err := p.scalar(n, what, depth)
	if err != nil {
		return "", err
	}
	if !nameRE.MatchString(s) {
		return "", p.errf(n, "%s %q: use lower-case letters, digits, '.', '_' or '-' (1 to 64)", what, s)
	}
	return s, nil
}

// refs returns a list of names (or one name).
func (p *parser) refs(n *yaml.Node, what string, depth int) ([]Ref, error) {
	r, err := p.resolve(n, depth)
	if err != nil {
		return nil, err
	}
	items := []*yaml.Node{r}
	if r.Kind == yaml.SequenceNode {
		items = r.Content
	}
	if len(items) > MaxDependsOn {
		return nil, p.errf(r, "%s: more than %d names", what, MaxDependsOn)
	}
	out := make([]Ref, 0, len(items))
	for _, c := range items {
		s, err := p.name(c, what, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, Ref{Name: s, Line: c.Line})
	}
	return out, nil
}

func parseFile(f Source, name string) (*Workflow, error) {
	p := &parser{file: f.Path}
	if len(f.Data) > MaxFileBytes {
		return nil, &Error{File: f.Path, Msg: fmt.Sprintf("%d bytes; at most %d", len(f.Data), MaxFileBytes)}
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(f.Data))
	if err := dec.Decode(&doc); err != nil {
		return nil, p.yamlError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, p.errf(&extra, "one YAML document a file (found a second)")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, &Error{File: f.Path, Msg: "empty file"}
	}
	w := &Workflow{Name: name, File: f.Path}
	top, err := p.mapping(doc.Content[0], "the file", 0)
	if err != nil {
		return nil, err
	}
	var stepsNode, servicesNode *yaml.Node
	for _, e := range top {
		switch e.key {
		case "steps":
			stepsNode = e.v
		case "services":
			servicesNode = e.v
		case "matrix":
			if w.Matrix, err = p.matrix(e.v); err != nil {
				return nil, err
			}
		case "when":
			if w.When, err = p.when(e.v, 1); err != nil {
				return nil, err
			}
		case "depends_on":
			if w.DependsOn, err = p.refs(e.v, "depends_on", 1); err != nil {
				return nil, err
			}
		case "variables":
			// A home for anchors; walked only through the aliases that use it.
		case "timeout":
			if w.Timeout, err = p.duration(e.v, "timeout", 1); err != nil {
				return nil, err
			}
		default:
			return nil, p.unknown(e.k, "at the top level", "steps, services, matrix, when, depends_on, variables, timeout")
		}
	}
	if stepsNode == nil {
		return nil, &Error{File: f.Path, Line: doc.Content[0].Line, Msg: "no steps"}
	}
	if w.Steps, err = p.steps(stepsNode); err != nil {
		return nil, err
	}
	if servicesNode != nil {
		if w.Services, err = p.services(servicesNode); err != nil {
			return nil, err
		}
	}
	if err := p.checkSteps(w); err != nil {
		return nil, err
	}
	return w, nil
}

// yamlError turns yaml's error into ours, keeping its line.
func (p *parser) yamlError(err error) error {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.IndexByte(rest, ':'); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				line, msg = n, strings.TrimSpace(rest[i+1:])
			}
		}
	}
	return &Error{File: p.file, Line: line, Msg: "not valid YAML: " + msg}
}

// unknown refuses a key, with a hint for the usual suspects.
func (p *parser) unknown(k *yaml.Node, where, known string) error {
	hint := ""
	switch k.Value {
	case "settings":
		hint = " (plugins are not supported: write the commands)"
	case "volumes", "privileged", "network_mode", "networks", "devices", "cap_add", "extra_hosts", "dns":
		hint = " (the sandbox decides this; it cannot be asked for)"
	case "depend_on", "dependson", "depends-on", "needs":
		hint = " (did you mean depends_on?)"
	case "command", "script", "run":
		hint = " (did you mean commands?)"
	case "env":
		hint = " (did you mean environment?)"
	case "clone", "skip_clone", "workspace", "labels", "platform", "runs_on", "pull", "entrypoint", "secrets":
		hint = " (not supported by anvil)"
	}
	return p.errf(k, "unknown key %q %s%s; known: %s", k.Value, where, hint, known)
}

// items returns the steps (or services) as a list of (name node, body),
// from a list of maps with name, or a map name → body.
func (p *parser) items(n *yaml.Node, what string) ([]*yaml.Node, []*yaml.Node, error) {
	r, err := p.resolve(n, 1)
	if err != nil {
		return nil, nil, err
	}
	var names, bodies []*yaml.Node
	switch r.Kind {
	case yaml.SequenceNode:
		for _, c := range r.Content {
			names = append(names, nil)
			bodies = append(bodies, c)
		}
	case yaml.MappingNode:
		es, err := p.mapping(r, what, 1)
		if err != nil {
			return nil, nil, err
		}
		for _, e := range es {
			names = append(names, e.k)
			bodies = append(bodies, e.v)
		}
	default:
		return nil, nil, p.errf(r, "%s must be a list or a map of name → %s", what, strings.TrimSuffix(what, "s"))
	}
	return names, bodies, nil
}

var stepKeys = "name, commands, image, image_pull_secret, environment, when, depends_on, failure, detach, directory, timeout, artifacts"

func (p *parser) steps(n *yaml.Node) ([]*Step, error) {
	names, bodies, err := p.items(n, "steps")
	if err != nil {
		return nil, err
	}
	if len(bodies) == 0 {
		return nil, p.errf(n, "no steps")
	}
	if len(bodies) > MaxSteps {
		return nil, p.errf(n, "%d steps; at most %d a workflow", len(bodies), MaxSteps)
	}
	out := make([]*Step, 0, len(bodies))
	for i, body := range bodies {
		es, err := p.mapping(body, "a step", 2)
		if err != nil {
			return nil, err
		}
		s := &Step{Line: body.Line}
		if names[i] != nil {
			if s.Name, err = p.name(names[i], "step name", 2); err != nil {
				return nil, err
			}
			s.Line = names[i].Line
		}
		haveCommands := false
		for _, e := range es {
			switch e.key {
			case "name":
				nm, err := p.name(e.v, "step name", 3)
				if err != nil {
					return nil, err
				}
				if s.Name != "" && nm != s.Name {
					return nil, p.errf(e.v, "name %q differs from the step's key %q", nm, s.Name)
				}
				s.Name = nm
			case "commands":
				haveCommands = true
				if s.Commands, err = p.commands(e.v); err != nil {
					return nil, err
				}
			case "image":
				if s.Image, err = p.scalar(e.v, "image", 3); err != nil {
					return nil, err
				}
				s.ImageLine = e.k.Line
			case "image_pull_secret":
				if s.ImagePullSecret, err = p.scalar(e.v, "image_pull_secret", 3); err != nil {
					return nil, err
				}
			case "environment":
				if s.Environment, err = p.environment(e.v); err != nil {
					return nil, err
				}
			case "when":
				if s.When, err = p.when(e.v, 3); err != nil {
					return nil, err
				}
			case "depends_on":
				if s.DependsOn, err = p.refs(e.v, "depends_on", 3); err != nil {
					return nil, err
				}
				if s.DependsOn == nil {
					s.DependsOn = []Ref{}
				}
			case "failure":
				v, err := p.scalar(e.v, "failure", 3)
				if err != nil {
					return nil, err
				}
				switch v {
				case "ignore":
					s.FailureIgnore = true
				case "fail":
				default:
					return nil, p.errf(e.v, "failure: ignore or fail, not %q", v)
				}
			case "detach":
				if s.Detach, err = p.boolean(e.v, "detach", 3); err != nil {
					return nil, err
				}
			case "directory":
				if s.Directory, err = p.scalar(e.v, "directory", 3); err != nil {
					return nil, err
				}
				if err := checkRelative(s.Directory); err != nil {
					return nil, p.errf(e.v, "directory: %v", err)
				}
			case "timeout":
				if s.Timeout, err = p.duration(e.v, "timeout", 3); err != nil {
					return nil, err
				}
			case "artifacts":
				if s.Artifacts, err = p.strings(e.v, "artifacts", MaxGlobs, 3); err != nil {
					return nil, err
				}
				for _, g := range s.Artifacts {
					if err := checkGlob(g); err != nil {
						return nil, p.errf(e.v, "artifacts: %q: %v", g, err)
					}
				}
			default:
				return nil, p.unknown(e.k, "in a step", stepKeys)
			}
		}
		if s.Name == "" {
			return nil, p.errf(body, "a step needs a name")
		}
		if !haveCommands && s.Image == "" {
			return nil, p.errf(body, "step %q has no commands", s.Name)
		}
		out = append(out, s)
	}
	return out, nil
}

func (p *parser) commands(n *yaml.Node) ([]string, error) {
	r, err := p.resolve(n, 3)
	if err != nil {
		return nil, err
	}
	cmds, err := p.strings(r, "commands", MaxCommands, 3)
	if err != nil {
		return nil, err
	}
	for _, c := range cmds {
		if strings.ContainsRune(c, 0) {
			return nil, p.errf(r, "commands: a NUL byte")
		}
	}
	return cmds, nil
}

func (p *parser) environment(n *yaml.Node) ([]EnvVar, error) {
	es, err := p.mapping(n, "environment", 3)
	if err != nil {
		return nil, err
	}
	if len(es) > MaxEnv {
		return nil, p.errf(n, "environment: more than %d variables", MaxEnv)
	}
	out := make([]EnvVar, 0, len(es))
	for _, e := range es {
		if !envRE.MatchString(e.key) {
			return nil, p.errf(e.k, "environment: %q is not a variable name", e.key)
		}
		ev := EnvVar{Name: e.key, Line: e.k.Line}
		v, err := p.resolve(e.v, 4)
		if err != nil {
			return nil, err
		}
		if v.Kind == yaml.MappingNode {
			sub, err := p.mapping(v, "environment "+e.key, 4)
			if err != nil {
				return nil, err
			}
			if len(sub) != 1 || sub[0].key != "from_secret" {
				return nil, p.errf(v, "environment %s: a value, or {from_secret: NAME}", e.key)
			}
			if ev.FromSecret, err = p.scalar(sub[0].v, "from_secret", 5); err != nil {
				return nil, err
			}
			if !envRE.MatchString(ev.FromSecret) {
				return nil, p.errf(sub[0].v, "from_secret: %q is not a secret's name", ev.FromSecret)
			}
		} else if ev.Value, err = p.scalar(v, "environment "+e.key, 4); err != nil {
			return nil, err
		}
		if strings.ContainsRune(ev.Value, 0) {
			return nil, p.errf(v, "environment %s: a NUL byte", e.key)
		}
		out = append(out, ev)
	}
	return out, nil
}

// Events a `when: event` may name.
const (
	EventPush        = "push"
	EventPullRequest = "pull_request"
	EventManual      = "manual"
)

// Statuses a `when: status` may name.
const (
	StatusSuccess = "success"
	StatusFailure = "failure"
)

func (p *parser) when(n *yaml.Node, depth int) ([]*When, error) {
	r, err := p.resolve(n, depth)
	if err != nil {
		return nil, err
	}
	items := []*yaml.Node{r}
	if r.Kind == yaml.SequenceNode {
		items = r.Content
	}
	if len(items) > MaxWhenClauses {
		return nil, p.errf(r, "when: more than %d conditions", MaxWhenClauses)
	}
	out := make([]*When, 0, len(items))
	for _, it := range items {
		es, err := p.mapping(it, "when", depth+1)
		if err != nil {
			return nil, err
		}
		w := &When{Line: it.Line}
		for _, e := range es {
			switch e.key {
			case "branch":
				w.Branch, err = p.strings(e.v, "when: branch", MaxGlobs, depth+2)
			case "path":
				w.Path, err = p.strings(e.v, "when: path", MaxGlobs, depth+2)
			case "event":
				if w.Event, err = p.strings(e.v, "when: event", MaxGlobs, depth+2); err == nil {
					for _, ev := range w.Event {
						if ev != EventPush && ev != EventPullRequest && ev != EventManual {
							return nil, p.errf(e.v, "when: event %q: push, pull_request or manual", ev)
						}
					}
				}
			case "status":
				if w.Status, err = p.strings(e.v, "when: status", MaxGlobs, depth+2); err == nil {
					for _, st := range w.Status {
						if st != StatusSuccess && st != StatusFailure {
							return nil, p.errf(e.v, "when: status %q: success or failure", st)
						}
					}
				}
			default:
				return nil, p.unknown(e.k, "in when", "branch, event, path, status")
			}
			if err != nil {
				return nil, err
			}
		}
		for _, g := range append(append([]string{}, w.Branch...), w.Path...) {
			if _, err := path.Match(g, ""); err != nil {
				return nil, p.errf(it, "when: pattern %q: %v", g, err)
			}
		}
		out = append(out, w)
	}
	return out, nil
}

func (p *parser) matrix(n *yaml.Node) (*Matrix, error) {
	es, err := p.mapping(n, "matrix", 1)
	if err != nil {
		return nil, err
	}
	m := &Matrix{Line: n.Line}
	seen := map[string]bool{}
	for _, e := range es {
		if e.key == "include" {
			r, err := p.resolve(e.v, 2)
			if err != nil {
				return nil, err
			}
			if r.Kind != yaml.SequenceNode {
				return nil, p.errf(r, "matrix include: a list of maps")
			}
			if len(r.Content) > MaxCombinations {
				return nil, p.errf(r, "matrix: %d combinations; at most %d (none is dropped silently)", len(r.Content), MaxCombinations)
			}
			for _, c := range r.Content {
				kvs, err := p.mapping(c, "matrix include", 3)
				if err != nil {
					return nil, err
				}
				if len(kvs) > MaxAxes {
					return nil, p.errf(c, "matrix: %d axes; at most %d", len(kvs), MaxAxes)
				}
				var combo []KV
				for _, kv := range kvs {
					if !envRE.MatchString(kv.key) {
						return nil, p.errf(kv.k, "matrix: %q is not a variable name", kv.key)
					}
					v, err := p.scalar(kv.v, "matrix "+kv.key, 4)
					if err != nil {
						return nil, err
					}
					combo = append(combo, KV{kv.key, v})
				}
				m.Include = append(m.Include, combo)
			}
			continue
		}
		if !envRE.MatchString(e.key) {
			return nil, p.errf(e.k, "matrix: %q is not a variable name", e.key)
		}
		if seen[e.key] {
			return nil, p.errf(e.k, "matrix: axis %q twice", e.key)
		}
		seen[e.key] = true
		vals, err := p.strings(e.v, "matrix "+e.key, MaxMatrixValues, 2)
		if err != nil {
			return nil, err
		}
		m.Axes = append(m.Axes, Axis{Name: e.key, Values: vals})
	}
	if len(m.Axes) > 0 && m.Include != nil {
		return nil, p.errf(n, "matrix: axes or include, not both")
	}
	if len(m.Axes) > MaxAxes {
		return nil, p.errf(n, "matrix: %d axes; at most %d", len(m.Axes), MaxAxes)
	}
	combos := 1
	for _, a := range m.Axes {
		if len(a.Values) == 0 {
			return nil, p.errf(n, "matrix: axis %s has no values", a.Name)
		}
		combos *= len(a.Values)
		if combos > MaxCombinations {
			return nil, p.errf(n, "matrix: more than %d combinations (none is dropped silently)", MaxCombinations)
		}
	}
	if len(m.Axes) == 0 && len(m.Include) == 0 {
		return nil, p.errf(n, "matrix: no axes")
	}
	return m, nil
}

var serviceKeys = "name, image, image_pull_secret, environment, commands, ports, healthcheck"

func (p *parser) services(n *yaml.Node) ([]*Service, error) {
	names, bodies, err := p.items(n, "services")
	if err != nil {
		return nil, err
	}
	if len(bodies) > MaxServices {
		return nil, p.errf(n, "%d services; at most %d", len(bodies), MaxServices)
	}
	var out []*Service
	ports := map[int]string{}
	for i, body := range bodies {
		es, err := p.mapping(body, "a service", 2)
		if err != nil {
			return nil, err
		}
		s := &Service{Line: body.Line}
		if names[i] != nil {
			if s.Name, err = p.name(names[i], "service name", 2); err != nil {
				return nil, err
			}
			s.Line = names[i].Line
		}
		for _, e := range es {
			switch e.key {
			case "name":
				nm, err := p.name(e.v, "service name", 3)
				if err != nil {
					return nil, err
				}
				if s.Name != "" && nm != s.Name {
					return nil, p.errf(e.v, "name %q differs from the service's key %q", nm, s.Name)
				}
				s.Name = nm
			case "image":
				s.Image, err = p.scalar(e.v, "image", 3)
			case "image_pull_secret":
				s.ImagePullSecret, err = p.scalar(e.v, "image_pull_secret", 3)
			case "environment":
				s.Environment, err = p.environment(e.v)
			case "commands":
				s.Commands, err = p.commands(e.v)
			case "ports":
				s.Ports, err = p.ports(e.v)
			case "healthcheck":
				s.Healthcheck, err = p.healthcheck(e.v)
			default:
				return nil, p.unknown(e.k, "in a service", serviceKeys)
			}
			if err != nil {
				return nil, err
			}
		}
		if s.Name == "" {
			return nil, p.errf(body, "a service needs a name")
		}
		if s.Image == "" {
			return nil, p.errf(body, "service %q needs an image", s.Name)
		}
		for _, pt := range s.Ports {
			if other, dup := ports[pt.Number]; dup {
				return nil, p.errf(&yaml.Node{Line: pt.Line}, "port %d: services %q and %q both listen on it", pt.Number, other, s.Name)
			}
			ports[pt.Number] = s.Name
		}
		out = append(out, s)
	}
	seen := map[string]bool{}
	for _, s := range out {
		if seen[s.Name] {
			return nil, p.errf(&yaml.Node{Line: s.Line}, "service name %q used twice", s.Name)
		}
		seen[s.Name] = true
	}
	return out, nil
}

func (p *parser) ports(n *yaml.Node) ([]Port, error) {
	r, err := p.resolve(n, 3)
	if err != nil {
		return nil, err
	}
	if r.Kind != yaml.SequenceNode {
		return nil, p.errf(r, "ports: a list")
	}
	if len(r.Content) > MaxPorts {
		return nil, p.errf(r, "ports: more than %d", MaxPorts)
	}
	var out []Port
	for _, c := range r.Content {
		s, err := p.scalar(c, "ports", 4)
		if err != nil {
			return nil, err
		}
		num, proto, _ := strings.Cut(s, "/")
		if proto == "" {
			proto = "tcp"
		}
		v, err := strconv.Atoi(num)
		if err != nil || v < 1 || v > 65535 || (proto != "tcp" && proto != "udp") {
			return nil, p.errf(c, "ports: %q is not a port (5432 or 5432/tcp)", s)
		}
		out = append(out, Port{Number: v, Protocol: proto, Line: c.Line})
	}
	return out, nil
}

func (p *parser) healthcheck(n *yaml.Node) (*Healthcheck, error) {
	es, err := p.mapping(n, "healthcheck", 3)
	if err != nil {
		return nil, err
	}
	h := &Healthcheck{}
	for _, e := range es {
		switch e.key {
		case "command":
			h.Command, err = p.scalar(e.v, "healthcheck command", 4)
		case "interval":
			h.Interval, err = p.duration(e.v, "healthcheck interval", 4)
		case "timeout":
			h.Timeout, err = p.duration(e.v, "healthcheck timeout", 4)
		case "retries":
			var s string
			if s, err = p.scalar(e.v, "healthcheck retries", 4); err == nil {
				h.Retries, err = strconv.Atoi(s)
				if err != nil || h.Retries < 0 || h.Retries > 1000 {
					return nil, p.errf(e.v, "healthcheck retries: a number from 0 to 1000")
				}
			}
		default:
			return nil, p.unknown(e.k, "in healthcheck", "command, interval, retries, timeout")
		}
		if err != nil {
			return nil, err
		}
	}
	if h.Command == "" {
		return nil, p.errf(n, "healthcheck: command is missing")
	}
	return h, nil
}

// checkSteps refuses duplicate names, unknown dependencies and cycles.
func (p *parser) checkSteps(w *Workflow) error {
	index := map[string]int{}
	for i, s := range w.Steps {
		if _, dup := index[s.Name]; dup {
			return p.errf(&yaml.Node{Line: s.Line}, "step name %q used twice", s.Name)
		}
		index[s.Name] = i
	}
	for _, s := range w.Steps {
		for _, d := range s.DependsOn {
			if _, ok := index[d.Name]; !ok {
				return p.errf(&yaml.Node{Line: d.Line}, "step %q depends on %q, which is no step of this workflow", s.Name, d.Name)
			}
			if d.Name == s.Name {
				return p.errf(&yaml.Node{Line: d.Line}, "step %q depends on itself", s.Name)
			}
		}
	}
	deps := stepDeps(w)
	// Depth-first search for a cycle, reporting the step where it closes.
	state := make([]int, len(w.Steps)) // 0 new, 1 on the path, 2 done
	var visit func(i int) error
	visit = func(i int) error {
		state[i] = 1
		for _, d := range deps[i] {
			switch state[d] {
			case 1:
				return p.errf(&yaml.Node{Line: w.Steps[i].Line}, "depends_on: a cycle through %q and %q", w.Steps[i].Name, w.Steps[d].Name)
			case 0:
				if err := visit(d); err != nil {
					return err
				}
			}
		}
		state[i] = 2
		return nil
	}
	for i := range w.Steps {
		if state[i] == 0 {
			if err := visit(i); err != nil {
				return err
			}
		}
	}
	return nil
}

// stepDeps returns each step's dependencies as indices: its depends_on, or
// the step before it when it has none.
func stepDeps(w *Workflow) [][]int {
	index := map[string]int{}
	for i, s := range w.Steps {
		index[s.Name] = i
	}
	deps := make([][]int, len(w.Steps))
	for i, s := range w.Steps {
		if s.DependsOn == nil {
			if i > 0 {
				deps[i] = []int{i - 1}
			}
			continue
		}
		for _, d := range s.DependsOn {
			deps[i] = append(deps[i], index[d.Name])
		}
	}
	return deps
}

func workflowCycle(cfg *Config) error {
	index := map[string]*Workflow{}
	for _, w := range cfg.Workflows {
		index[w.Name] = w
	}
	state := map[string]int{}
	var visit func(w *Workflow) error
	visit = func(w *Workflow) error {
		state[w.Name] = 1
		for _, d := range w.DependsOn {
			switch state[d.Name] {
			case 1:
				return &Error{File: w.File, Line: d.Line, Msg: fmt.Sprintf("depends_on: a cycle through workflows %q and %q", w.Name, d.Name)}
			case 0:
				if err := visit(index[d.Name]); err != nil {
					return err
				}
			}
		}
		state[w.Name] = 2
		return nil
	}
	names := make([]string, 0, len(index))
	for n := range index {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if state[n] == 0 {
			if err := visit(index[n]); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkRelative refuses a path that leaves the workspace.
func checkRelative(p string) error {
	if p == "" || path.IsAbs(p) || strings.ContainsRune(p, 0) || strings.Contains(p, "\\") {
		return fmt.Errorf("a relative path under the workspace")
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return fmt.Errorf("%q leaves the workspace", p)
	}
	if len(p) > 1024 {
		return fmt.Errorf("longer than 1024 bytes")
	}
	return nil
}

func checkGlob(g string) error {
	if err := checkRelative(g); err != nil {
		return err
	}
	for _, part := range strings.Split(g, "/") {
		if part == "**" {
			continue
		}
		if _, err := path.Match(part, ""); err != nil {
			return err
		}
	}
	return nil
}
