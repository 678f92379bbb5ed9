package run

import (
	"fmt"
	"strings"
	"time"
)

// ReasonCanceledWhileQueued is a run canceled before it started.
const ReasonCanceledWhileQueued = "canceled_while_queued"

// A repair run still queued when a person closes or ignores its incident
// is withdrawn with one of these.
const (
	ReasonIncidentClosed  = "incident_closed"
	ReasonIncidentIgnored = "incident_ignored"
)

// FailureReasons are every failure reason a run can end with.
var FailureReasons = []string{ReasonExitCode, ReasonTimeout, ReasonRunnerLost, ReasonCheckout, ReasonSandbox, ReasonInfra,
	ReasonRepairPush, ReasonRepairNoOp, ReasonRepairForge, ReasonCanceledWhileQueued, ReasonIncidentClosed, ReasonIncidentIgnored,
	ReasonPipeline}

// WhyEnded says in words why a run ended the way it did ("" while it runs
// or when it passed). detail is what the log said about it (the checkout's
// error, say), "" when nothing; runTimeout and heartbeat are the project's
// and the operator's bounds at the time of reading.
func WhyEnded(r *Run, detail string, runTimeout, heartbeat time.Duration) string {
	if r.FailureReason == nil {
		if r.State == StateCanceled {
			return "canceled while it ran"
		}
		return ""
	}
	code := "?"
	if r.ExitCode != nil {
		code = fmt.Sprint(*r.ExitCode)
	}
	with := func(s string) string {
		if detail = strings.TrimSpace(detail); detail != "" {
			return s + ": " + detail
		}
		return s
	}
	switch *r.FailureReason {
	case ReasonExitCode:
		if r.PipelineFile != nil {
			return "a step failed with exit code " + code
		}
		return "the command exited with code " + code
	case ReasonPipeline:
		if r.PipelineError != nil {
			return "the pipeline file was refused before any step ran: " + *r.PipelineError
		}
		return "the pipeline file was refused before any step ran"
	case ReasonTimeout:
		return "timed out after " + Words(runTimeout)
	case ReasonRunnerLost:
		return "the runner was lost: no heartbeat for " + Words(heartbeat)
	case ReasonCheckout:
		return with("the repository could not be checked out")
	case ReasonSandbox:
		return with("the sandbox could not run the command")
	case ReasonInfra:
		return with("anvil failed to run it (an internal error; see the log)")
	case ReasonRepairPush:
		return with("the repair's branch could not be pushed")
	case ReasonRepairNoOp:
		return "the repair changed nothing"
	case ReasonRepairForge:
		return with("the forge refused the repair's pull request")
	case ReasonCanceledWhileQueued:
		return "canceled before it started"
	case ReasonIncidentClosed:
		return "withdrawn before it started: its incident was closed"
	case ReasonIncidentIgnored:
		return "withdrawn before it started: its incident was ignored"
	}
	return *r.FailureReason
}

// Words says a duration as a person would: "60 s", "30 min", "1 h 30 min".
func Words(d time.Duration) string {
	switch {
	case d <= 2*time.Minute && d%time.Minute != 0 || d <= time.Minute:
		return fmt.Sprintf("%d s", int(d.Round(time.Second)/time.Second))
	case d < time.Hour && d%time.Minute == 0:
		return fmt.Sprintf("%d min", int(d/time.Minute))
	case d < time.Hour:
		return fmt.Sprintf("%d min %d s", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d%time.Hour == 0:
		return fmt.Sprintf("%d h", int(d/time.Hour))
	}
	return fmt.Sprintf("%d h %d min", int(d/time.Hour), int(d%time.Hour/time.Minute))
}
