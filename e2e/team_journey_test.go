//go:build e2e

package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/playwright-community/playwright-go"

	"anvil/jobs/jobstest"
)

// postAs posts a form from page's browser context (its session cookie) with
// the page's CSRF token and returns the status, without following redirects.
func postAs(t *testing.T, page playwright.Page, url string, form map[string]any) int {
	t.Helper()
	csrf, err := page.Locator("meta[name=csrf-token]").GetAttribute("content")
	must(t, err, "read the CSRF token")
	form["_csrf"] = csrf
	res, err := page.Context().Request().Post(url, playwright.APIRequestContextPostOptions{Form: form, MaxRedirects: playwright.Int(0)})
	must(t, err, "post "+url)
	return res.Status()
}

// TestTeamJourney: the owner invites a colleague as member; the colleague
// opens the one-time link in a fresh browser, sets a password, triggers a
// run and takes an inbox decision, and finds no write controls on the
// members page; the owner demotes them to viewer and their next write is
// refused; the audit log shows each step.
func TestTeamJourney(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	repo := jobstest.GitRepo(t)
	p := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{
		"slug": "shop", "name": "Shop", "repo_url": repo.URL, "default_branch": "main", "run_command": "sleep 20",
	})
	pid := p["id"].(string)
	conn := apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/connections", map[string]any{"name": "shop-api"})
	apiJSON(t, s, "PUT", "/api/private/projects/"+pid+"/bindings/production", map[string]any{"repair_policy": "observe"})
	ev := map[string]any{"schema_version": "1.0", "event_id": uuid.NewString(), "timestamp": time.Now().UTC().Format(time.RFC3339),
		"title": "TypeError in cart", "level": "error", "environment": "production", "service": "shop-api",
		"sdk":       map[string]any{"name": "anvil-feed-js", "version": "0.1.0"},
		"exception": map[string]any{"type": "TypeError", "message": "cart is undefined"}}
	raw, _ := json.Marshal(ev)
	sendFeedEvent(t, s.URL, conn["token"].(string), raw)

	// The owner invites a colleague as member and sees the link once.
	owner := loggedIn(t, s)
	must(t, testID(owner, "nav").GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "Members"}).Click(), "open members")
	must(t, expect.Page(owner).ToHaveURL(urlPath(s, "/settings/members")), "members page")
	must(t, owner.Locator("#invite-email").Fill("colleague@acme.test"), "invite email")
	_, err := testID(owner, "invite-role").SelectOption(playwright.SelectOptionValues{Values: &[]string{"member"}})
	must(t, err, "invite role")
	must(t, testID(owner, "invite-submit").Click(), "create the invitation")
	must(t, expect.Locator(testID(owner, "invite-link-value")).ToContainText(s.URL+"/invite/anv_inv_"), "the one-time link")
	link, err := testID(owner, "invite-link-value").TextContent()
	must(t, err, "read the link")
	must(t, expect.Locator(owner.Locator("[data-testid=invitation-row][data-email='colleague@acme.test']")).ToBeVisible(), "pending invitation")
	screenshot(t, owner, "invited")
	// Shown once: a reload no longer shows it.
	_, err = owner.Reload()
	must(t, err, "reload")
	must(t, expect.Locator(testID(owner, "invite-link")).ToHaveCount(0), "the link is not shown again")

	// The colleague, in a browser of their own.
	col := newPage(t)
	gotoPage(t, col, link)
	must(t, expect.Locator(testID(col, "invite-role")).ToHaveText("member"), "the invitation page")
	must(t, col.Locator("#name").Fill("Colleague"), "name")
	must(t, col.Locator("#password").Fill("a colleague's password"), "password")
	must(t, testID(col, "invite-accept").Click(), "accept")
	must(t, expect.Locator(testID(col, "whoami")).ToContainText("colleague@acme.test"), "the colleague is in")
	// The link works once.
	other := newPage(t)
	if st := gotoPage(t, other, link); st != http.StatusNotFound {
		t.Fatalf("a used link answered %d", st)
	}
	must(t, expect.Locator(other.GetByText("This invitation is no longer valid")).ToBeVisible(), "the generic refusal")

	// As a member: trigger a run and take an inbox decision.
	gotoPage(t, col, s.URL+"/projects/"+pid)
	must(t, expect.Locator(testID(col, "edit-project")).ToHaveCount(0), "members do not edit projects")
	must(t, testID(col, "run-now").Click(), "run now")
	must(t, expect.Locator(testID(col, "run-header")).ToBeVisible(), "the run is accepted, its page open")
	gotoPage(t, col, s.URL+"/inbox")
	row := col.Locator("[data-testid=incident-row]")
	must(t, expect.Locator(row).ToHaveAttribute("data-status", "TRIAGED"), "the incident")
	must(t, row.Locator("[data-testid=decide-ignore]").Click(), "ignore")
	// The inbox shows the unresolved: the ignored incident leaves it and
	// waits behind its filter.
	must(t, expect.Locator(row).ToHaveCount(0), "decided")
	must(t, expect.Locator(col.Locator("[data-testid=status-count][data-status=IGNORED]")).ToHaveText("ignored · 1"), "behind its filter")
	screenshot(t, col, "member-decided")

	// The members page has no write controls for a member, and a forged
	// write is refused.
	gotoPage(t, col, s.URL+"/settings/members")
	must(t, expect.Locator(testID(col, "member-row")).ToHaveCount(2), "members listed")
	must(t, expect.Locator(testID(col, "invite-form")).ToHaveCount(0), "no invite form")
	must(t, expect.Locator(testID(col, "member-role-select")).ToHaveCount(0), "no role controls")
	must(t, expect.Locator(testID(col, "member-remove")).ToHaveCount(0), "no remove buttons")
	if st := postAs(t, col, s.URL+"/settings/invitations", map[string]any{"email": "x@acme.test", "role": "viewer"}); st != http.StatusForbidden {
		t.Fatalf("a member's invitation answered %d", st)
	}
	screenshot(t, col, "member-members")

	// The owner demotes the colleague to viewer.
	gotoPage(t, owner, s.URL+"/settings/members")
	crow := owner.Locator("[data-testid=member-row][data-email='colleague@acme.test']")
	_, err = crow.Locator("[data-testid=member-role-select]").SelectOption(playwright.SelectOptionValues{Values: &[]string{"viewer"}})
	must(t, err, "choose viewer")
	must(t, crow.Locator("[data-testid=member-role-save]").Click(), "save the role")
	must(t, expect.Locator(testID(owner, "flash")).ToContainText("Role changed"), "role changed")
	must(t, expect.Locator(crow).ToHaveAttribute("data-role", "viewer"), "now a viewer")

	// The colleague's next write is refused, on the page and the API alike.
	if st := postAs(t, col, s.URL+"/projects/"+pid+"/runs", map[string]any{}); st != http.StatusForbidden {
		t.Fatalf("a viewer's run answered %d", st)
	}
	gotoPage(t, col, s.URL+"/projects/"+pid)
	must(t, expect.Locator(testID(col, "run-now")).ToHaveCount(0), "no run button for a viewer")

	// The audit log shows each step.
	gotoPage(t, owner, s.URL+"/settings/audit")
	for _, kind := range []string{"project.created", "connection.created", "binding.changed", "invitation.created", "invitation.used", "member.added", "member.role_changed"} {
		must(t, expect.Locator(owner.Locator("[data-testid=audit-row][data-kind='"+kind+"']").First()).ToBeVisible(), "audit shows "+kind)
	}
	must(t, expect.Locator(owner.Locator("[data-testid=audit-row][data-kind='member.role_changed']")).ToContainText("colleague@acme.test"), "the demotion names the colleague")
	screenshot(t, owner, "audit")
}
