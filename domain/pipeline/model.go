// Package pipeline reads a repository's pipeline files (.anvil.yaml,
// .anvil.yml or .anvil/*.yaml) and plans what a run executes: the parser
// checks every key by hand, with its line, and refuses what it does not know;
// the planner expands the matrix, evaluates `when`, builds the DAG of steps;
// the scheduler walks that DAG as steps finish. All of it is pure: no files,
// no processes, no database. The executor (jobs/run_pipeline.go) does the
// IO around it. Schema and semantics: docs/pipelines.md.
package pipeline

import (
	"fmt"
	"time"
)

// Bounds of a pipeline (docs/pipelines.md, "Bounds").
const (
	MaxFileBytes     = 256 << 10
	MaxSteps         = 100 // per workflow, as written
	MaxWorkflows     = 20
	MaxAxes          = 10
	MaxCombinations  = 25
	MaxPlannedSteps  = 500 // per run, after the matrix
	MaxNodes         = 200_000
	MaxDepth         = 64
	MaxNameLen       = 64
	MaxCommands      = 1000
	MaxValueBytes    = 64 << 10
	MaxEnv           = 200
	MaxGlobs         = 100
	MaxTimeout       = 24 * time.Hour
	MaxPorts         = 20
	MaxServices      = 20
	MaxWhenClauses   = 20
	MaxDependsOn     = 100
	MaxMatrixValues  = 25
	MaxMatrixInclude = MaxCombinations
)

// Error is a refusal of a pipeline file: the file, the line of the node at
// fault (0: the file as a whole) and what is wrong. Its text is what the run
// log's first line and pipeline.error show: ".anvil.yaml:12: message".
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return e.File + ": " + e.Msg
}

// Config is every workflow of a commit.
type Config struct {
	Workflows []*Workflow
}

// Workflow is one pipeline file.
type Workflow struct {
	// Name is "" for a root .anvil.yaml, else the file's name without .yaml.
	Name      string
	File      string
	Steps     []*Step
	Services  []*Service
	Matrix    *Matrix
	When      []*When
	DependsOn []Ref
	Timeout   time.Duration
}

// Ref is a name written in the file, with its line.
type Ref struct {
	Name string
	Line int
}

// Step is one step as written.
type Step struct {
	Name            string
	Line            int
	Commands        []string
	Image           string
	ImageLine       int
	ImagePullSecret string
	Environment     []EnvVar
	When            []*When
	// DependsOn is nil when the key is absent (the step follows the one
	// before) and empty for `depends_on: []` (it starts at once).
	DependsOn     []Ref
	FailureIgnore bool
	Detach        bool
	Directory     string
	Timeout       time.Duration
	Artifacts     []string
}

// EnvVar is one environment variable: a value, or the name of a run secret.
type EnvVar struct {
	Name       string
	Value      string
	FromSecret string
	Line       int
}

// When is one condition map; a list of them holds when any of them does.
// An empty field does not constrain.
type When struct {
	Line   int
	Branch []string
	Event  []string
	Path   []string
	Status []string
}

// Matrix is a workflow's matrix: axes with their values, or an explicit list
// of combinations (include).
type Matrix struct {
	Line    int
	Axes    []Axis
	Include [][]KV
}

// Axis is one matrix axis.
type Axis struct {
	Name   string
	Values []string
}

// KV is one name and value, in written order.
type KV struct {
	Key   string
	Value string
}

// Service is a long-running companion of the steps (a database…), reachable
// by its name. Executing it needs images (see PlanOptions.Images).
type Service struct {
	Name            string
	Line            int
	Image           string
	ImagePullSecret string
	Environment     []EnvVar
	Commands        []string
	Ports           []Port
	Healthcheck     *Healthcheck
}

// Port is a service's port ("5432" or "5432/tcp").
type Port struct {
	Number   int
	Protocol string
	Line     int
}

// Healthcheck tells when a service is ready.
type Healthcheck struct {
	Command  string
	Interval time.Duration
	Retries  int
	Timeout  time.Duration
}
