package forgestatus

import (
	"testing"
	"time"

	"anvil/domain"
)

// TestMappingTable is README's table, row by row.
func TestMappingTable(t *testing.T) {
	t.Parallel()
	s := func(v string) *string { return &v }
	one := 1
	rows := []struct {
		state, reason       string
		github, gitlab, tea string
	}{
		{domain.StatePending, "", "pending", "pending", "pending"},
		{domain.StateExecutable, "", "pending", "pending", "pending"},
		{domain.StateStarting, "", "pending", "running", "pending"},
		{domain.StateRunning, "", "pending", "running", "pending"},
		{domain.StateCancelRequested, "", "pending", "running", "pending"},
		{domain.StateCanceling, "", "pending", "running", "pending"},
		{domain.StatePassed, "", "success", "success", "success"},
		{domain.StateFailed, domain.ReasonExitCode, "failure", "failed", "failure"},
		{domain.StateFailed, domain.ReasonTimeout, "failure", "failed", "failure"},
		{domain.StateFailed, domain.ReasonRunnerLost, "error", "failed", "error"},
		{domain.StateFailed, domain.ReasonSandbox, "error", "failed", "error"},
		{domain.StateFailed, domain.ReasonCheckout, "error", "failed", "error"},
		{domain.StateCanceled, "", "error", "canceled", "error"},
	}
	for _, r := range rows {
		run := &domain.Run{State: r.state}
		if r.reason != "" {
			run.FailureReason = s(r.reason)
		}
		if r.reason == domain.ReasonExitCode {
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
		run  domain.Run
		f    Facts
		want string
	}{
		{domain.Run{State: domain.StatePending}, Facts{InLine: 3}, "queued — 3rd in line"},
		{domain.Run{State: domain.StatePending}, Facts{InLine: 11}, "queued — 11th in line"},
		{domain.Run{State: domain.StatePending}, Facts{InLine: 22}, "queued — 22nd in line"},
		{domain.Run{State: domain.StateRunning}, Facts{}, "running"},
		{domain.Run{State: domain.StatePassed, StartedAt: &start, FinishedAt: &end}, Facts{}, "passed in 42 s"},
		{domain.Run{State: domain.StateFailed, ExitCode: &one, FailureReason: s(domain.ReasonExitCode)}, Facts{}, "failed: exit code 1"},
		{domain.Run{State: domain.StateCanceled}, Facts{CanceledBy: "ada@example.com"}, "canceled by ada@example.com"},
		{domain.Run{State: domain.StateFailed, FailureReason: s(domain.ReasonRunnerLost)}, Facts{}, "runner lost"},
	} {
		if got := Describe(&tc.run, tc.f); got != tc.want {
			t.Errorf("Describe(%s) = %q, want %q", tc.run.State, got, tc.want)
		}
	}
}
