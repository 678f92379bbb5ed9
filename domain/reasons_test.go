package domain_test

import (
	"strings"
	"testing"
	"time"

	"anvil/domain"
)

// TestEveryFailureReasonInWords: no reason reaches a person as its code.
func TestEveryFailureReasonInWords(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		domain.ReasonExitCode:            "the command exited with code 1",
		domain.ReasonTimeout:             "timed out after 30 min",
		domain.ReasonRunnerLost:          "the runner was lost: no heartbeat for 60 s",
		domain.ReasonCheckout:            "the repository could not be checked out: exit status 128",
		domain.ReasonSandbox:             "the sandbox could not run the command: exit status 128",
		domain.ReasonInfra:               "anvil failed to run it (an internal error; see the log): exit status 128",
		domain.ReasonRepairPush:          "the repair's branch could not be pushed: exit status 128",
		domain.ReasonRepairNoOp:          "the repair changed nothing",
		domain.ReasonRepairForge:         "the forge refused the repair's pull request: exit status 128",
		domain.ReasonCanceledWhileQueued: "canceled before it started",
		domain.ReasonIncidentClosed:      "withdrawn before it started: its incident was closed",
		domain.ReasonIncidentIgnored:     "withdrawn before it started: its incident was ignored",
	}
	code := 1
	for _, reason := range domain.FailureReasons {
		r := &domain.Run{State: domain.StateFailed, FailureReason: &reason, ExitCode: &code}
		got := domain.WhyEnded(r, "exit status 128", 30*time.Minute, 60*time.Second)
		if got != want[reason] || strings.Contains(got, "_") {
			t.Errorf("%s: %q, want %q", reason, got, want[reason])
		}
	}
	if len(want) != len(domain.FailureReasons) {
		t.Errorf("%d reasons in words, %d reasons", len(want), len(domain.FailureReasons))
	}
	if got := domain.WhyEnded(&domain.Run{State: domain.StatePassed}, "", 0, 0); got != "" {
		t.Errorf("passed: %q", got)
	}
	for d, w := range map[time.Duration]string{5 * time.Second: "5 s", 90 * time.Second: "90 s", 150 * time.Second: "2 min 30 s", 2 * time.Hour: "2 h", 150 * time.Minute: "2 h 30 min"} {
		if got := domain.Words(d); got != w {
			t.Errorf("Words(%s) = %q, want %q", d, got, w)
		}
	}
}
