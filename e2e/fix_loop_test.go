//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/playwright-community/playwright-go"

	"anvil/db"
	"anvil/jobs/jobstest"
)

// TestFixLoopFromThePages: the whole loop of docs/releases.md for a
// project without a forge, by a person in the browser — the verification
// window set on the edit form, an error opened from the inbox, its fix
// recorded by hand with a commit of the project's repository, a release
// containing that commit declared on the Releases page — then the release
// serves events and the window passes, and the incident's header reads
// closed with the evidence. Each page is looked at again at 420 px, where
// nothing may scroll sideways.
func TestFixLoopFromThePages(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	repo := jobstest.GitRepo(t)
	p := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{"slug": "shop", "name": "Shop", "repo_url": repo.URL,
		"default_branch": "main", "run_command": "true"})
	pid := p["id"].(string)
	conn := apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/connections", map[string]any{"name": "shop-api"})
	apiJSON(t, s, "PUT", "/api/private/projects/"+pid+"/bindings/production", map[string]any{"repair_policy": "observe"})
	// event is what an SDK in production sends: an error, maybe of a release.
	event := func(title, release string) {
		ev := map[string]any{"schema_version": "1.0", "event_id": uuid.NewString(), "timestamp": time.Now().UTC().Format(time.RFC3339),
			"title": title, "level": "error", "environment": "production", "service": "shop-api",
			"sdk":       map[string]any{"name": "anvil-feed-java", "version": "0.1.0"},
			"exception": map[string]any{"type": "java.lang.NullPointerException", "message": title}}
		if release != "" {
			ev["release"] = release
		}
		raw, _ := json.Marshal(ev)
		sendFeedEvent(t, s.URL, conn["token"].(string), raw)
	}
	var pages [][2]string // the pages of the loop (name, path), for the 420 px pass

	page := loggedIn(t, s)

	// The verification window, on the project's edit form.
	gotoPage(t, page, s.URL+"/projects/shop/edit")
	pages = append(pages, [2]string{"edit", "/projects/shop/edit"})
	window := page.Locator("[name=fix_verification_window]")
	must(t, expect.Locator(window).ToHaveValue("24h"), "the default window")
	must(t, window.Fill("1m"), "a one-minute window")
	must(t, testID(page, "project-save").Click(), "save the project")
	must(t, page.WaitForURL(urlPath(s, "/projects/shop")), "saved, the project page")
	if got := apiJSON(t, s, "GET", "/api/private/projects/"+pid, nil)["fix_verification_window"]; got != "1m" {
		t.Fatalf("the window saved as %v", got)
	}

	// An error arrives; the person opens it from the inbox.
	gotoPage(t, page, s.URL+"/inbox")
	pages = append(pages, [2]string{"inbox", "/inbox"})
	event("NullPointerException in CheckoutService", "")
	row := page.Locator("[data-testid=incident-row]")
	must(t, expect.Locator(row).ToHaveCount(1), "the incident appears live")
	must(t, row.Locator("[data-testid=incident-link]").Click(), "open the incident")
	must(t, expect.Locator(testID(page, "incident-title")).ToHaveText("NullPointerException in CheckoutService"), "the incident page")
	incidentPath := urlPathOf(t, page, s)
	pages = append(pages, [2]string{"incident", incidentPath})

	// The fix, recorded by hand: the head commit of the project's repository.
	must(t, page.GetByText("Record a fix by hand").Click(), "open the fix form")
	must(t, testID(page, "fix-commit").Fill(repo.Head), "the fix's commit")
	must(t, testID(page, "record-fix-submit").Click(), "record the fix")
	must(t, expect.Locator(testID(page, "fix-chain")).ToContainText(repo.Head[:7]), "the chain names the commit")
	screenshot(t, page, "fix-recorded")

	// A release that contains it, declared on the Releases page.
	gotoPage(t, page, s.URL+"/projects/shop/releases")
	pages = append(pages, [2]string{"releases", "/projects/shop/releases"})
	must(t, testID(page, "declare-version").Fill("shop@2.5.0"), "version")
	must(t, testID(page, "declare-commit").Fill(repo.Head), "commit")
	must(t, testID(page, "declare-environment").Fill("production"), "environment")
	must(t, testID(page, "declare-submit").Click(), "declare the release")
	must(t, expect.Locator(page.Locator("main")).ToContainText("declared by a member"), "the release is listed as declared")
	screenshot(t, page, "release-declared")

	// The release serves traffic (another error, not this one): the
	// periodic fix check asks the project's mirror whether the release
	// contains the fix, and ships it.
	event("TimeoutException in PaymentGateway", "shop@2.5.0")
	incID := strings.TrimPrefix(incidentPath, "/incidents/")
	fix := pollFix(t, s, incID, 90*time.Second, "the fix to ship in shop@2.5.0", func(f map[string]any) bool { return f["shipped_at"] != nil })
	if fix["release"] != "shop@2.5.0" || fix["verified_at"] != nil {
		t.Fatalf("shipped: %v", fix)
	}
	// More traffic of the release during the window, then the one-minute
	// window is made to have ended: its start moves back a minute, as the
	// server's clock would after a minute.
	event("TimeoutException in PaymentGateway", "shop@2.5.0")
	d, err := db.Open(context.Background(), s.DBURL, 2)
	must(t, err, "open the database")
	defer d.Close()
	if _, err := d.Bun.NewRaw(`UPDATE incidents SET fix_shipped_at = fix_shipped_at - interval '1 minute',
		fix_verify_until = fix_verify_until - interval '1 minute' WHERE id = ?`, incID).Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	pollFix(t, s, incID, 60*time.Second, "the fix to be verified", func(f map[string]any) bool { return f["verified_at"] != nil })

	// The incident's page says so, with the evidence.
	gotoPage(t, page, s.URL+incidentPath)
	must(t, expect.Locator(testID(page, "incident-header")).ToHaveAttribute("data-status", "CLOSED"), "closed")
	verified := page.Locator("[data-testid=fix-step][data-step=verified]")
	must(t, expect.Locator(verified).ToHaveAttribute("data-done", "true"), "the verified step")
	must(t, expect.Locator(verified.Locator("[data-testid=fix-evidence]")).ToContainText("shipped in shop@2.5.0"), "the evidence")
	must(t, expect.Locator(verified.Locator("[data-testid=fix-evidence]")).ToContainText("1m window"), "the evidence names the window")
	screenshot(t, page, "verified")

	// The same pages on a phone: nothing scrolls sideways.
	must(t, page.SetViewportSize(420, 900), "420 px")
	for _, np := range pages {
		name, path := np[0], np[1]
		gotoPage(t, page, s.URL+path)
		fits, err := page.Evaluate(`() => document.documentElement.scrollWidth <= window.innerWidth`)
		must(t, err, "measure "+path)
		screenshot(t, page, "narrow-"+name)
		if fits != true {
			t.Errorf("%s scrolls sideways at 420 px", path)
		}
	}
}

// urlPathOf is the path of the page's URL on s.
func urlPathOf(t *testing.T, page playwright.Page, s *server) string {
	t.Helper()
	must(t, page.WaitForURL(regexp.MustCompile("^"+regexp.QuoteMeta(s.URL)+"/incidents/[0-9a-f-]{36}$")), "the incident's address")
	return strings.TrimPrefix(page.URL(), s.URL)
}

// pollFix polls the incident's fix through the API until ok or the budget ends.
func pollFix(t *testing.T, s *server, id string, budget time.Duration, what string, ok func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(budget)
	for {
		inc := apiJSON(t, s, "GET", "/api/private/incidents/"+id, nil)["incident"].(map[string]any)
		if f, _ := inc["fix"].(map[string]any); f != nil && ok(f) {
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s: %v", budget, what, inc)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
