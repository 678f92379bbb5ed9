package web_test

import (
	"strings"
	"testing"
)

// Each configured webhook card asks for the events anvil needs: pushes
// start runs; pull (merge) request events start pull requests' runs and
// tell anvil that a repair's pull request was merged.
func TestWebhookCardsAskForPushesAndPullRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.newProject(t, "cards", "main")
	for _, provider := range []string{"github", "gitlab", "gitea"} {
		if status, out := b.api(t, b.owner.Token, "PUT", "/api/private/projects/"+p+"/webhooks/"+provider, map[string]any{"enabled": true}); status != 201 {
			t.Fatalf("configure %s: %d %v", provider, status, out)
		}
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	_, body := br.get("/projects/" + p + "/webhooks")
	for provider, want := range map[string][]string{
		"github": {"<b data-testid=\"webhook-events\">Pushes</b> and <b>Pull requests</b>"},
		"gitlab": {"<b data-testid=\"webhook-events\">Push events</b> and <b>Merge request events</b>"},
		"gitea":  {"<b data-testid=\"webhook-events\">Push</b> and <b>Pull request</b>"},
	} {
		i := strings.Index(body, `data-testid="webhook-card-`+provider+`"`)
		if i < 0 {
			t.Fatalf("no %s card", provider)
		}
		card := body[i:]
		if j := strings.Index(card[1:], `data-testid="webhook-card-`); j > 0 {
			card = card[:j+1]
		}
		for _, w := range want {
			if !strings.Contains(card, w) {
				t.Errorf("the %s card lacks %s", provider, w)
			}
		}
	}
}
