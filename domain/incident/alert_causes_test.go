package incident_test

import (
	"testing"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/incident"
)

// One regression sends one alert, whatever the policy then does with the
// incident; a new incident under approve is alerted as new and as waiting.
func TestAlertCausesOneRegressionOneAlert(t *testing.T) {
	t.Parallel()
	org, proj, id := uuid.New(), uuid.New(), uuid.New()
	kinds := func(trs []incident.Transition) []string {
		var out []string
		for _, c := range incident.AlertCauses(org, proj, trs) {
			if c.IncidentID != id || c.OrgID != org || c.ProjectID != proj {
				t.Fatalf("cause %+v", c)
			}
			out = append(out, c.Kind)
		}
		return out
	}
	for _, policy := range []string{domain.PolicyObserve, domain.PolicyApprove, domain.PolicyAuto} {
		if got := kinds(incident.Regressed(id, "production", policy)); len(got) != 1 || got[0] != domain.AlertIncidentRegressed {
			t.Errorf("a regression under %s alerts %v, want one %s", policy, got, domain.AlertIncidentRegressed)
		}
	}
	if got := kinds(incident.Created(id, "production", domain.PolicyApprove)); len(got) != 2 || got[0] != domain.AlertIncidentNew || got[1] != domain.AlertIncidentApproval {
		t.Errorf("a new incident under approve alerts %v", got)
	}
}
