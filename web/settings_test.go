package web_test

import (
	"net/http"
	"strings"
	"testing"
)

// Settings shows the organisation's slug, copyable, as the SENTRY_ORG that
// sentry-cli needs (docs/sourcemap.md).
func TestSettingsShowsTheOrganisationSlug(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	res, body := br.get("/settings")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("settings: %d", res.StatusCode)
	}
	for _, want := range []string{`id="org-slug" data-testid="org-slug">acme<`, `data-copy="#org-slug"`, "SENTRY_ORG=acme"} {
		if !strings.Contains(body, want) {
			t.Errorf("the settings page lacks %s", want)
		}
	}
}
