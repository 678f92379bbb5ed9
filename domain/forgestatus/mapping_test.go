package forgestatus

import (
	"testing"
	"time"

	runs "anvil/domain/run"
)

// TestMappingTable is docs/webhooks.md's table ("Commit statuses"), row by row.
func TestMappingTable(t *testing.T) {
	t.Parallel()
	s := func(v string) *string { return &v }
	one := 1
	rows := []struct {
		state, reason       string
		github, gitlab, tea string
	}{
		{runs.StatePending, "", "pending", "pending", "pending"},
		{runs.StateExecutable, "", "pending", "pending", "pending"},
		{runs.StateStarting, "", "pending", "running", "pending"},
		{runs.StateRunning, "", "pending", "running", "pending"},
		{runs.StateCancelRequested, "", "pending", "running", "pending"},
		{runs.StateCanceling, "", "pending", "running", "pending"},
		{runs.StatePassed, "", "success", "success", "success"},
		{runs.StateFailed, runs.ReasonExitCode, "failure", "failed", "failure"},
		{runs.StateFailed, runs.ReasonTimeout, "failure", "failed", "failure"},
		{runs.StateFailed, runs.ReasonRunnerLost, "error", "failed", "error"},
		{runs.StateFailed, runs.ReasonSandbox, "error", "failed", "error"},
		{runs.StateFailed, runs.ReasonCheckout, "error", "failed", "error"},
		{runs.StateCanceled, "", "error", "canceled", "error"},
	}
	for _, r := range rows {
		run := &runs.Run{State: r.state}
		if r.reason != "" {
			run.FailureReason = s(r.reason)
		}
		if r.reason == runs.ReasonExitCode {
			run.ExitCode = &one
		}
		for provider, want := range map[string]string{"github": r.github, "gitlab": r.gitlab, "gitea": r.tea} {
			if got := ForgeState(provider, run); got != want {
				t.Errorf("%s %s/%s = %s, want %s", provider, r.state, r.reason, got, want)
			}
		}
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	end := start.Add(42 * time.Second)
	s := func(v string) *string { return &v }
	one := 1
	for _, tc := range []struct {
		run  runs.Run
		f    Facts
		want string
	}{
		{runs.Run{State: runs.StatePending}, Facts{InLine: 3}, "queued — 3rd in line"},
		{runs.Run{State: runs.StatePending}, Facts{InLine: 11}, "queued — 11th in line"},
		{runs.Run{State: runs.StatePending}, Facts{InLine: 22}, "queued — 22nd in line"},
		{runs.Run{State: runs.StateRunning}, Facts{}, "running"},
		{runs.Run{State: runs.StatePassed, StartedAt: &start, FinishedAt: &end}, Facts{}, "passed in 42 s"},
		{runs.Run{State: runs.StateFailed, ExitCode: &one, FailureReason: s(runs.ReasonExitCode)}, Facts{}, "failed: exit code 1"},
		{runs.Run{State: runs.StateCanceled}, Facts{CanceledBy: "ada@example.com"}, "canceled by ada@example.com"},
		{runs.Run{State: runs.StateFailed, FailureReason: s(runs.ReasonRunnerLost)}, Facts{}, "runner lost"},
		// A pipeline's failure names its step; a refused file says where.
		{runs.Run{State: runs.StateFailed, ExitCode: &one, FailureReason: s(runs.ReasonExitCode)}, Facts{FailedStep: "test (GO=1.23)"}, "failed: step test (GO=1.23) (exit code 1)"},
		{runs.Run{State: runs.StateFailed, FailureReason: s(runs.ReasonPipeline), PipelineError: s(`.anvil.yaml:5: unknown key "depend_on"`)}, Facts{}, `failed: .anvil.yaml:5: unknown key "depend_on"`},
	} {
		if got := Describe(&tc.run, tc.f); got != tc.want {
			t.Errorf("Describe(%s) = %q, want %q", tc.run.State, got, tc.want)
		}
	}
}
