//go:build e2e

package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/playwright-community/playwright-go"

	"anvil/jobs/jobstest"
)

// TestWebhookJourney: create a GitHub webhook from the settings page, take
// the URL and the secret it shows once, deliver a signed push and a ping as
// GitHub would, and watch both land in the deliveries list live; the push
// became a run of the pushed commit.
func TestWebhookJourney(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	repo := jobstest.GitRepo(t)
	p := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{
		"slug": "hooked", "name": "Hooked", "repo_url": repo.URL, "default_branch": "main", "run_command": "git rev-parse HEAD"})
	pid := p["id"].(string)
	page := loggedIn(t, s)

	gotoPage(t, page, s.URL+"/projects/"+pid)
	must(t, testID(page, "project-webhooks").Click(), "open webhooks")
	card := testID(page, "webhook-card-github")
	must(t, expect.Locator(card).ToHaveAttribute("data-state", "not_configured"), "github not configured")
	screenshot(t, page, "webhooks")
	must(t, testID(page, "webhook-create-github").Click(), "create github webhook")
	must(t, expect.Locator(card.Locator("[data-testid=webhook-secret]")).ToBeVisible(), "secret shown once")
	url, err := card.Locator("[data-testid=webhook-url]").TextContent()
	must(t, err, "url")
	secret, err := card.Locator("[data-testid=webhook-secret]").TextContent()
	must(t, err, "secret")
	url, secret = strings.TrimSpace(url), strings.TrimSpace(secret)
	if !strings.HasSuffix(url, "/api/public/webhooks/"+pid+"/github") {
		t.Fatalf("payload URL %q", url)
	}
	// The URL stays on one line (it used to wrap at the UUID's hyphens); a
	// narrow card scrolls it instead.
	lines, err := card.Locator("[data-testid=webhook-url]").Evaluate(`el => Math.round((el.clientHeight - parseFloat(getComputedStyle(el).paddingTop) - parseFloat(getComputedStyle(el).paddingBottom)) / parseFloat(getComputedStyle(el).lineHeight))`, nil)
	must(t, err, "measure the payload URL")
	if n, _ := lines.(int); n != 1 {
		t.Fatalf("the payload URL takes %v lines", lines)
	}
	screenshot(t, page, "created")
	// The create answered with a redirect: a reload shows the secret no
	// more, and creates nothing.
	_, err = page.Reload()
	must(t, err, "reload")
	must(t, expect.Locator(card.Locator("[data-testid=webhook-reveal]")).ToHaveCount(0), "the secret is not shown again")
	must(t, expect.Locator(card).ToHaveAttribute("data-state", "enabled"), "still one enabled webhook")

	deliver := func(event string, body []byte) int {
		t.Helper()
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(body)
		req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", event)
		req.Header.Set("X-GitHub-Delivery", uuid.NewString())
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	// A delivery signed with a wrong secret is refused, is not in the
	// ledger, and is counted on the card.
	secret, right := "not the secret", secret
	ping, _ := json.Marshal(map[string]any{"zen": "Keep it logically awesome.", "hook_id": 1})
	if st := deliver("ping", ping); st != 401 {
		t.Fatalf("wrongly signed ping: %d", st)
	}
	secret = right
	_, err = page.Reload()
	must(t, err, "reload")
	refusal := card.Locator("[data-testid=webhook-refusal][data-reason=invalid_signature]")
	must(t, expect.Locator(refusal).ToHaveAttribute("data-count", "1"), "the refusal is counted on the card")
	must(t, expect.Locator(refusal).ToContainText("signature does not verify"), "the refusal says why")
	must(t, expect.Locator(testID(page, "no-deliveries")).ToBeVisible(), "the refused delivery is not in the ledger")
	screenshot(t, page, "refused")
	if st := deliver("ping", ping); st != 200 {
		t.Fatalf("ping: %d", st)
	}
	must(t, expect.Locator(page.Locator("[data-testid=delivery-row]:has([data-testid=delivery-outcome]:text-is('ignored_ping'))")).ToBeVisible(), "ping listed live")

	push, _ := json.Marshal(map[string]any{"ref": "refs/heads/main", "before": repo.Old, "after": repo.Head,
		"repository": map[string]any{"clone_url": repo.URL, "html_url": "https://git.example/hooked"}})
	if st := deliver("push", push); st != 200 {
		t.Fatalf("push: %d", st)
	}
	accepted := page.Locator("[data-testid=delivery-row]:has([data-testid=delivery-outcome]:text-is('accepted'))")
	must(t, expect.Locator(accepted).ToBeVisible(), "push listed live")
	screenshot(t, page, "deliveries")
	must(t, accepted.Locator("[data-testid=delivery-run]").Click(), "open the run")
	must(t, expect.Locator(testID(page, "run-header")).ToHaveAttribute("data-status", "passed"), "the push's run passes")
	must(t, expect.Locator(testID(page, "run-log")).ToContainText(repo.Head), "the pushed commit ran")
	screenshot(t, page, "run")
}

// TestFeedCurlJourney: create a connection on the project's feed page, bind
// production, run the curl example exactly as the page prints it, and find
// the incident in the inbox.
func TestFeedCurlJourney(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	p := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{
		"slug": "shop", "name": "Shop", "repo_url": "https://git.example/shop.git", "default_branch": "main", "run_command": "true", "repair_command": "true"})
	pid := p["id"].(string)
	page := loggedIn(t, s)

	gotoPage(t, page, s.URL+"/projects/"+pid)
	must(t, testID(page, "project-feed").Click(), "open the feed page")
	// Without a binding there is no example, and the page says why.
	must(t, expect.Locator(testID(page, "curl-unavailable")).ToContainText("no_binding"), "why there is no example yet")
	must(t, expect.Locator(testID(page, "curl-example")).ToHaveCount(0), "no example without a binding")
	must(t, testID(page, "binding-environment").Fill("production"), "environment")
	must(t, testID(page, "add-binding").Click(), "bind production")
	must(t, expect.Locator(page.Locator("[data-testid=binding-row]")).ToContainText("production"), "binding listed")
	must(t, testID(page, "connection-name").Fill("shop-api"), "connection name")
	must(t, testID(page, "create-connection").Click(), "create connection")
	example := testID(page, "curl-example")
	must(t, expect.Locator(example).ToContainText("anv_srv_"), "curl example with the token")
	screenshot(t, page, "connection")
	cmd, err := example.TextContent()
	must(t, err, "curl example")
	// The create answered with a redirect: a reload shows no token and makes
	// no second connection.
	_, err = page.Reload()
	must(t, err, "reload")
	must(t, expect.Locator(testID(page, "new-connection")).ToHaveCount(0), "the token is not shown again")
	must(t, expect.Locator(page.Locator("[data-testid=connection-row]")).ToHaveCount(1), "one connection after a reload")
	must(t, expect.Locator(example).ToContainText("$ANVIL_FEED_TOKEN"), "the example names the token's variable now")

	// The example as printed, twice: the shell makes a fresh event_id and
	// timestamp each time, so both are new events of the incident.
	ids := map[string]bool{}
	for i := 0; i < 2; i++ {
		out, err := exec.Command("bash", "-c", cmd).CombinedOutput()
		var answer struct {
			Accepted []string `json:"accepted"`
		}
		if err != nil || json.Unmarshal(out, &answer) != nil || len(answer.Accepted) != 1 {
			t.Fatalf("curl example: %v\n%s", err, out)
		}
		ids[answer.Accepted[0]] = true
	}
	if len(ids) != 2 {
		t.Fatalf("the example sent the same event_id twice: %v", ids)
	}
	gotoPage(t, page, s.URL+"/inbox")
	row := page.Locator("[data-testid=incident-row]")
	must(t, expect.Locator(row).ToContainText("NullPointerException in CheckoutService"), "incident in the inbox")
	screenshot(t, page, "inbox")

	// A binding's policy is changed in its row; the add form never replaces it.
	gotoPage(t, page, s.URL+"/projects/"+pid+"/feed")
	prod := page.Locator("[data-testid=binding-row][data-environment=production]")
	_, err = prod.Locator("[data-testid=binding-policy-select]").SelectOption(playwright.SelectOptionValues{Values: &[]string{"approve"}})
	must(t, err, "choose approve")
	must(t, prod.Locator("[data-testid=change-binding]").Click(), "change production to approve")
	must(t, expect.Locator(prod.Locator("[data-testid=binding-policy-select]")).ToHaveValue("approve"), "production shows approve")
	must(t, testID(page, "binding-environment").Fill("production"), "environment again")
	must(t, testID(page, "add-binding").Click(), "add production with the default policy")
	must(t, expect.Locator(testID(page, "feed-error")).ToContainText("already has a binding with repair policy approve"), "the add form is refused")
	must(t, expect.Locator(prod.Locator("[data-testid=binding-policy-select]")).ToHaveValue("approve"), "production keeps approve")
	screenshot(t, page, "binding-kept")

	// Hand the production card to an external producer on the same page
	// (confirming), run its curl example as printed, and find the
	// producer's incident on the dashboard.
	page.OnDialog(func(d playwright.Dialog) { _ = d.Accept() })
	gotoPage(t, page, s.URL+"/projects/"+pid+"/feed")
	must(t, testID(page, "card-hand-over").Click(), "hand the card over")
	cardCurl := testID(page, "card-curl")
	must(t, expect.Locator(cardCurl).ToContainText("anv_dsh_"), "card curl example with the token")
	screenshot(t, page, "card-handed-over")
	cmd, err = cardCurl.TextContent()
	must(t, err, "card curl example")
	out, err := exec.Command("bash", "-c", cmd+" -w '%{http_code}'").CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "204") {
		t.Fatalf("card curl example: %v\n%s", err, out)
	}
	gotoPage(t, page, s.URL+"/")
	must(t, expect.Locator(page.Locator("[data-testid=card-incident]")).ToContainText("Checkout fails for gold customers"), "the producer's incident on the dashboard")
	screenshot(t, page, "external-card")
}
