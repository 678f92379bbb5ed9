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
	screenshot(t, page, "created")

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
	ping, _ := json.Marshal(map[string]any{"zen": "Keep it logically awesome.", "hook_id": 1})
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
		"slug": "shop", "name": "Shop", "repo_url": "https://git.example/shop.git", "default_branch": "main", "run_command": "true"})
	pid := p["id"].(string)
	page := loggedIn(t, s)

	gotoPage(t, page, s.URL+"/projects/"+pid)
	must(t, testID(page, "project-feed").Click(), "open the feed page")
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

	out, err := exec.Command("bash", "-c", cmd).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"accepted":["f4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f30"]`) {
		t.Fatalf("curl example: %v\n%s", err, out)
	}
	gotoPage(t, page, s.URL+"/inbox")
	row := page.Locator("[data-testid=incident-row]")
	must(t, expect.Locator(row).ToContainText("NullPointerException in CheckoutService"), "incident in the inbox")
	screenshot(t, page, "inbox")

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
	out, err = exec.Command("bash", "-c", cmd+" -w '%{http_code}'").CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "204") {
		t.Fatalf("card curl example: %v\n%s", err, out)
	}
	gotoPage(t, page, s.URL+"/")
	must(t, expect.Locator(page.Locator("[data-testid=card-incident]")).ToContainText("Checkout fails for gold customers"), "the producer's incident on the dashboard")
	screenshot(t, page, "external-card")
}
