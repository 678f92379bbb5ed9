package run_test

import (
	"strings"
	"testing"
	"time"

	"anvil/domain/run"
)

// TestEveryFailureReasonInWords: no reason reaches a person as its code.
func TestEveryFailureReasonInWords(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		run.ReasonExitCode:            "the command exited with code 1",
		run.ReasonTimeout:             "timed out after 30 min",
		run.ReasonRunnerLost:          "the runner was lost: no heartbeat for 60 s",
		run.ReasonCheckout:            "the repository could not be checked out: exit status 128",
		run.ReasonSandbox:             "the sandbox could not run the command: exit status 128",
		run.ReasonInfra:               "anvil failed to run it (an internal error; see the log): exit status 128",
		run.ReasonRepairPush:          "the repair's branch could not be pushed: exit status 128",
		run.ReasonRepairNoOp:          "the repair changed nothing",
		run.ReasonRepairForge:         "the forge refused the repair's pull request: exit status 128",
		run.ReasonCanceledWhileQueued: "canceled before it started",
		run.ReasonIncidentClosed:      "withdrawn before it started: its incident was closed",
		run.ReasonIncidentIgnored:     "withdrawn before it started: its incident was ignored",
		run.ReasonPipeline:            "the pipeline file was refused before any step ran",
	}
	code := 1
	for _, reason := range run.FailureReasons {
		r := &run.Run{State: run.StateFailed, FailureReason: &reason, ExitCode: &code}
		got := run.WhyEnded(r, "exit status 128", 30*time.Minute, 60*time.Second)
		if got != want[reason] || strings.Contains(got, "_") {
			t.Errorf("%s: %q, want %q", reason, got, want[reason])
		}
	}
	if len(want) != len(run.FailureReasons) {
		t.Errorf("%d reasons in words, %d reasons", len(want), len(run.FailureReasons))
	}
	if got := run.WhyEnded(&run.Run{State: run.StatePassed}, "", 0, 0); got != "" {
		t.Errorf("passed: %q", got)
	}
	for d, w := range map[time.Duration]string{5 * time.Second: "5 s", 90 * time.Second: "90 s", 150 * time.Second: "2 min 30 s", 2 * time.Hour: "2 h", 150 * time.Minute: "2 h 30 min"} {
		if got := run.Words(d); got != w {
			t.Errorf("Words(%s) = %q, want %q", d, got, w)
		}
	}
}
