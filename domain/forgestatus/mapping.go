// Package forgestatus reports runs to their forge as commit statuses:
// the mapping of anvil's states onto each forge's, the one-line
// description, and the delivery rules — the latest state wins, an unchanged
// state is not posted again, rate-limit answers are honoured, and at most
// [MaxInFlightPerHost] posts go to one forge host at a time per process.
//
// A status that cannot be posted never changes the run: this package only
// reads runs and writes its own table, run_forge_reports.
package forgestatus

import (
	"fmt"
	"time"

	"anvil/domain/run"
)

// Forge states, per provider, as their APIs spell them.
const (
	stPending  = "pending"
	stRunning  = "running"
	stSuccess  = "success"
	stFailure  = "failure"
	stFailed   = "failed"
	stError    = "error"
	stCanceled = "canceled"
)

// ForgeState maps a run onto the provider's status state (docs/webhooks.md,
// "Commit statuses"). Failures of the code (exit code, timeout) are failure; failures
// of anvil's machinery (runner lost, sandbox, checkout) are error, so branch
// protection tells "your code is broken" from "CI could not say".
func ForgeState(provider string, r *run.Run) string {
	gitlab := provider == "gitlab"
	switch r.Status() {
	case run.StatusQueued:
		return stPending
	case run.StatusStarting, run.StatusRunning, run.StatusCancelRequested, run.StatusCanceling:
		if gitlab {
			return stRunning
		}
		return stPending
	case run.StatusPassed:
		return stSuccess
	case run.StatusFailed:
		if gitlab {
			return stFailed
		}
		if codeFailure(r) {
			return stFailure
		}
		return stError
	case run.StatusCanceled:
		if gitlab {
			return stCanceled
		}
		return stError
	}
	return stPending
}

func codeFailure(r *run.Run) bool {
	if r.FailureReason == nil {
		return r.ExitCode != nil && *r.ExitCode != 0
	}
	// A refused pipeline file is the commit's own fault, as a failing
	// command is (docs/pipelines.md).
	return *r.FailureReason == run.ReasonExitCode || *r.FailureReason == run.ReasonTimeout || *r.FailureReason == run.ReasonPipeline
}

// Facts are what a description needs beyond the run row.
type Facts struct {
	InLine     int    // queued runs: 1 for the next to start
	CanceledBy string // canceled runs: the person's email, when a person did
	// FailedStep is the first pipeline step that failed (not ignored), for
	// a failed run of a pipeline file (docs/pipelines.md).
	FailedStep string
}

// Describe says in one line what a person needs to know about the run.
func Describe(r *run.Run, f Facts) string {
	switch r.Status() {
	case run.StatusQueued:
		if f.InLine > 0 {
			return "queued — " + ordinal(f.InLine) + " in line"
		}
		return "queued"
	case run.StatusStarting:
		return "starting"
	case run.StatusRunning:
		return "running"
	case run.StatusCancelRequested, run.StatusCanceling:
		return "canceling"
	case run.StatusPassed:
		return "passed in " + took(r)
	case run.StatusFailed:
		reason := ""
		if r.FailureReason != nil {
			reason = *r.FailureReason
		}
		switch reason {
		case run.ReasonPipeline:
			if r.PipelineError != nil {
				return clip("failed: "+*r.PipelineError, 140)
			}
			return "failed: the pipeline file was refused"
		case run.ReasonExitCode, "":
			if f.FailedStep != "" && r.ExitCode != nil {
				return clip(fmt.Sprintf("failed: step %s (exit code %d)", f.FailedStep, *r.ExitCode), 140)
			}
			if r.ExitCode != nil {
				return fmt.Sprintf("failed: exit code %d", *r.ExitCode)
			}
			return "failed"
		case run.ReasonTimeout:
			return "failed: timed out after " + took(r)
		case run.ReasonRunnerLost:
			return "runner lost"
		case run.ReasonCheckout:
			return "failed: checkout failed"
		case run.ReasonSandbox:
			return "failed: sandbox error"
		}
		return "failed: " + reason
	case run.StatusCanceled:
		if r.FailureReason != nil && *r.FailureReason == run.ReasonRunnerLost {
			return "runner lost"
		}
		if f.CanceledBy != "" {
			return "canceled by " + f.CanceledBy
		}
		return "canceled"
	}
	return r.Status()
}

// clip bounds a description (GitHub takes 140 characters), on a rune.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func took(r *run.Run) string {
	start := r.StartedAt
	if start == nil {
		start = r.ClaimedAt
	}
	if start == nil || r.FinishedAt == nil {
		return "0 s"
	}
	d := r.FinishedAt.Sub(*start).Round(time.Second)
	if d < time.Minute {
		return fmt.Sprintf("%d s", int(d.Seconds()))
	}
	return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
}

func ordinal(n int) string {
	suffix := "th"
	if n%100 < 11 || n%100 > 13 {
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return fmt.Sprintf("%d%s", n, suffix)
}
