package pipeline

import "strings"

// Outcome is how a step ended, as the scheduler counts it.
type Outcome int

// Outcomes of a step.
const (
	Passed Outcome = iota + 1
	Failed
	Ignored // failed, with failure: ignore
	Skipped
	Canceled
)

// Decision is the scheduler's answer for a step whose dependencies are done.
type Decision struct {
	Index int
	Run   bool
	// Reason is why a step is skipped.
	Reason string
}

// Scheduler walks a plan's DAG: it tells which steps may start once the
// steps they wait for are done, and which are skipped and why. A failed step
// makes the run's status "failure" for everything downstream of it: its
// dependents are skipped, except those whose when asks for status failure.
// Not safe for concurrent use; the executor calls it from one goroutine.
type Scheduler struct {
	plan    *Plan
	done    []bool
	started []bool
	// bad: the step failed, or a step upstream of it did.
	bad []bool
	// badBy names the first failed step upstream, for the skip reason.
	badBy []string
}

// NewScheduler starts a walk of plan.
func NewScheduler(plan *Plan) *Scheduler {
	n := len(plan.Steps)
	return &Scheduler{plan: plan, done: make([]bool, n), started: make([]bool, n), bad: make([]bool, n), badBy: make([]string, n)}
}

// Next returns the decisions for every step not yet decided whose
// dependencies are all done, and marks them started. Skipped steps count as
// done at once (so their own dependents are decided in the same call).
func (s *Scheduler) Next() []Decision {
	var out []Decision
	for progress := true; progress; {
		progress = false
		for i, p := range s.plan.Steps {
			if s.started[i] || !s.ready(p) {
				continue
			}
			s.started[i] = true
			d := s.decide(p)
			out = append(out, d)
			if !d.Run {
				s.done[i] = true
				progress = true
			}
		}
	}
	return out
}

func (s *Scheduler) ready(p *Planned) bool {
	for _, n := range p.Needs {
		if !s.done[n] {
			return false
		}
	}
	return true
}

func (s *Scheduler) decide(p *Planned) Decision {
	for _, n := range p.Needs {
		if s.bad[n] {
			s.bad[p.Index] = true
			if s.badBy[p.Index] == "" {
				s.badBy[p.Index] = s.badBy[n]
			}
		}
	}
	if p.Skip != "" {
		return Decision{Index: p.Index, Reason: p.Skip}
	}
	status := StatusSuccess
	if s.bad[p.Index] {
		status = StatusFailure
	}
	for _, c := range p.clauses {
		if (len(c) == 0 && status == StatusSuccess) || contains(c, status) {
			return Decision{Index: p.Index, Run: true}
		}
	}
	if status == StatusFailure {
		return Decision{Index: p.Index, Reason: "a step before it failed: " + s.badBy[p.Index]}
	}
	var sts []string
	for _, c := range p.clauses {
		sts = append(sts, c...)
	}
	return Decision{Index: p.Index, Reason: "when: status [" + strings.Join(sts, ", ") + "]"}
}

// Done records how a started step ended.
func (s *Scheduler) Done(i int, o Outcome) {
	s.done[i] = true
	if o == Failed || o == Canceled {
		s.bad[i] = true
		s.badBy[i] = s.plan.Steps[i].Key
	}
}

// Pending returns the steps not yet started (for a cancel: they are
// canceled without running).
func (s *Scheduler) Pending() []int {
	var out []int
	for i := range s.plan.Steps {
		if !s.started[i] {
			out = append(out, i)
			s.started[i], s.done[i] = true, true
		}
	}
	return out
}

// Finished reports whether every step is done.
func (s *Scheduler) Finished() bool {
	for _, d := range s.done {
		if !d {
			return false
		}
	}
	return true
}
