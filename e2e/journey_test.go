//go:build e2e

package e2e

import (
	"bytes"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"

	"anvil/jobs/jobstest"
)

// must fails the test on a playwright error.
// sendFeedEvent posts one event (raw JSON) to the feed's native door with
// a connection's token and wants it accepted.
func sendFeedEvent(t *testing.T, base, token string, raw []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/api/feed/events", bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	must(t, err, "send the event")
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("feed answered %d", res.StatusCode)
	}
}

func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// testID is the locator of the element with data-testid=id.
func testID(page playwright.Page, id string) playwright.Locator {
	return page.Locator("[data-testid=" + id + "]")
}

// gotoPage navigates and returns the response's status.
func gotoPage(t *testing.T, page playwright.Page, url string) int {
	t.Helper()
	res, err := page.Goto(url)
	must(t, err, "goto "+url)
	return res.Status()
}

// login fills the login form with the owner's email and password.
func login(t *testing.T, page playwright.Page, s *server, password string) {
	t.Helper()
	must(t, page.Locator("#email").Fill(s.Email), "fill email")
	must(t, page.Locator("#password").Fill(password), "fill password")
	must(t, testID(page, "login-submit").Click(), "submit login")
}

// loggedIn opens a page on s and logs in as the owner, screenshotting the
// login page and the dashboard it lands on.
func loggedIn(t *testing.T, s *server) playwright.Page {
	t.Helper()
	page := newPage(t)
	gotoPage(t, page, s.URL+"/login")
	must(t, expect.Locator(testID(page, "login-form")).ToBeVisible(), "login form")
	screenshot(t, page, "login")
	login(t, page, s, s.Password)
	must(t, expect.Locator(testID(page, "whoami")).ToContainText(s.Email), "logged in")
	screenshot(t, page, "dashboard")
	return page
}

// urlPath matches a page URL whose path is exactly p (any query).
func urlPath(s *server, p string) *regexp.Regexp {
	return regexp.MustCompile("^" + regexp.QuoteMeta(s.URL+p) + `(\?.*)?$`)
}

func TestLoginJourney(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	page := newPage(t)

	gotoPage(t, page, s.URL+"/")
	must(t, expect.Page(page).ToHaveURL(urlPath(s, "/login")), "anonymous / lands on /login")
	must(t, expect.Locator(testID(page, "login-form")).ToBeVisible(), "login form")
	screenshot(t, page, "login")

	login(t, page, s, "not the password")
	must(t, expect.Locator(testID(page, "login-error")).ToBeVisible(), "wrong password shows an error")
	must(t, expect.Locator(page.Locator("#email")).ToHaveValue(s.Email), "email kept")
	screenshot(t, page, "login-error")

	login(t, page, s, s.Password)
	must(t, expect.Page(page).ToHaveURL(urlPath(s, "/")), "lands on the dashboard")
	must(t, expect.Locator(testID(page, "empty-state")).ToBeVisible(), "dashboard empty state")
	must(t, expect.Locator(testID(page, "whoami")).ToContainText(s.Email), "whoami shows the email")
	screenshot(t, page, "dashboard")
}

func TestCreateProjectJourney(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	page := loggedIn(t, s)
	repo := jobstest.GitRepo(t) // a repository that answers: no warning

	fill := func(slug, shot string) {
		t.Helper()
		gotoPage(t, page, s.URL+"/projects/new")
		must(t, expect.Locator(testID(page, "project-form")).ToBeVisible(), "project form")
		for id, v := range map[string]string{
			"slug":           slug,
			"name":           "Widget factory",
			"repo_url":       repo.URL,
			"default_branch": "main",
			"run_command":    "make test",
		} {
			must(t, page.Locator("#"+id).Fill(v), "fill "+id)
		}
		screenshot(t, page, shot)
	}

	fill("widgets", "new-project")
	must(t, testID(page, "project-save").Click(), "save project")
	must(t, expect.Locator(testID(page, "flash")).ToBeVisible(), "flash after create")
	screenshot(t, page, "created")

	gotoPage(t, page, s.URL+"/projects")
	row := page.Locator(`[data-testid=project-row][data-slug="widgets"]`)
	must(t, expect.Locator(row).ToBeVisible(), "project row")
	must(t, expect.Locator(row).ToContainText("Widget factory"), "project row name")
	screenshot(t, page, "projects")

	fill("widgets", "new-project-again")
	must(t, testID(page, "project-save").Click(), "save duplicate")
	must(t, expect.Locator(testID(page, "form-error")).ToContainText("already exists"), "duplicate slug refused")
	screenshot(t, page, "duplicate")
}

func TestTokenJourney(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	page := loggedIn(t, s)

	gotoPage(t, page, s.URL+"/settings")
	must(t, expect.Locator(testID(page, "tokens")).ToBeVisible(), "tokens section")
	screenshot(t, page, "settings")

	must(t, page.Locator("#token-name").Fill("e2e"), "fill token name")
	must(t, testID(page, "create-token").Click(), "create token")
	value := testID(page, "new-token-value")
	must(t, expect.Locator(value).ToContainText("anv_pat_"), "new token shown")
	screenshot(t, page, "token-created")
	token, err := value.TextContent()
	must(t, err, "token text")
	token = strings.TrimSpace(token)

	if got := apiStatus(t, s, token); got != http.StatusOK {
		t.Fatalf("GET /api/private/projects with the new token = %d, want 200", got)
	}

	page.OnDialog(func(d playwright.Dialog) { _ = d.Accept() })
	row := page.Locator("[data-testid=token-row]", playwright.PageLocatorOptions{HasText: "e2e"})
	must(t, row.Locator("[data-testid=revoke-token]").Click(), "revoke")
	must(t, expect.Locator(testID(page, "flash")).ToBeVisible(), "flash after revoke")
	must(t, expect.Locator(row).ToContainText("revoked"), "token marked revoked")
	screenshot(t, page, "token-revoked")

	if got := apiStatus(t, s, token); got != http.StatusUnauthorized {
		t.Fatalf("GET /api/private/projects with the revoked token = %d, want 401", got)
	}
}

// apiStatus calls GET /api/private/projects with a bearer token.
func apiStatus(t *testing.T, s *server, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL+"/api/private/projects", nil)
	must(t, err, "request")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	must(t, err, "GET /api/private/projects")
	res.Body.Close()
	return res.StatusCode
}

func TestLogoutJourney(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	page := loggedIn(t, s)

	must(t, testID(page, "logout").Click(), "log out")
	must(t, expect.Page(page).ToHaveURL(urlPath(s, "/login")), "lands on /login")
	must(t, expect.Locator(testID(page, "login-form")).ToBeVisible(), "login form")
	screenshot(t, page, "logged-out")

	gotoPage(t, page, s.URL+"/projects")
	must(t, expect.Page(page).ToHaveURL(urlPath(s, "/login")), "/projects redirects to /login")
	must(t, expect.Locator(testID(page, "login-form")).ToBeVisible(), "login form again")
	screenshot(t, page, "projects-redirect")
}

func TestNotFoundJourney(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	page := loggedIn(t, s)

	if got := gotoPage(t, page, s.URL+"/no/such/page"); got != http.StatusNotFound {
		t.Errorf("GET /no/such/page = %d, want 404", got)
	}
	must(t, expect.Locator(testID(page, "error-page")).ToBeVisible(), "error page")
	must(t, expect.Locator(testID(page, "error-page")).ToContainText("404"), "error page shows 404")
	screenshot(t, page, "not-found")
}
