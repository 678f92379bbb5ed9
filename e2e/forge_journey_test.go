//go:build e2e

package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"anvil/internal/anviltest"
	"anvil/jobs/jobstest"
)

// fakeGitHub implements, as GitHub's REST documentation describes them, the
// two endpoints a project's forge is asked: "Get a branch" (for "run the
// latest commit") and "Create a commit status".
type fakeGitHub struct {
	srv      *httptest.Server
	head     string
	mu       sync.Mutex
	statuses []map[string]any // the bodies posted, with "sha" added
}

func newFakeGitHub(t *testing.T, head string) *fakeGitHub {
	f := &fakeGitHub{head: head}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer ghp_journey" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"message":"Bad credentials"}`)
			return
		}
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/api/v3/repos/acme/app/branches/main":
			fmt.Fprintf(w, `{"name":"main","commit":{"sha":%q}}`, f.head)
		case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/api/v3/repos/acme/app/statuses/"):
			body := map[string]any{}
			raw, _ := io.ReadAll(r.Body)
			if err := json.Unmarshal(raw, &body); err != nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			body["sha"] = strings.TrimPrefix(r.URL.Path, "/api/v3/repos/acme/app/statuses/")
			f.mu.Lock()
			f.statuses = append(f.statuses, body)
			f.mu.Unlock()
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"id":%d,"state":%q}`, len(f.statuses), body["state"])
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"message":"Not Found"}`)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// posted is the statuses posted so far.
func (f *fakeGitHub) posted() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.statuses...)
}

// TestForgeJourney: a project connected to a (fake) GitHub. "Run latest
// commit" on the project page pins a run to the branch's head; it passes,
// its statuses reach GitHub under the project's own context with a link to
// the run page, and the run page says "reported to GitHub: success". Then a
// push that found the queue full is evaluated again from the webhook page:
// refused while the queue is full, a run once there is room.
func TestForgeJourney(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	repo := jobstest.GitRepo(t)
	gh := newFakeGitHub(t, repo.Head)
	p := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{
		"slug": "app", "name": "App", "repo_url": repo.URL, "default_branch": "main", "run_command": "git rev-parse HEAD",
		"provider": "github", "provider_api_url": gh.srv.URL + "/api/v3", "provider_repo": "acme/app", "provider_token": "ghp_journey",
		"status_context": "ci/anvil"})
	pid := p["id"].(string)
	page := loggedIn(t, s)

	gotoPage(t, page, s.URL+"/projects/"+pid)
	must(t, testID(page, "run-latest").Click(), "run latest commit")
	// Like Run now, it leads to the new run's page.
	must(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/runs/[0-9a-f-]{36}$`)), "run latest commit opens the run's page")
	screenshot(t, page, "forge-latest")
	var runID string
	deadline := time.Now().Add(30 * time.Second)
	for runID == "" && time.Now().Before(deadline) {
		for _, st := range gh.posted() {
			if u, _ := st["target_url"].(string); strings.Contains(u, "/runs/") {
				runID = u[strings.LastIndex(u, "/runs/")+len("/runs/"):]
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if runID == "" {
		t.Fatalf("no status reached the forge: %v", gh.posted())
	}
	gotoPage(t, page, s.URL+"/runs/"+runID)
	must(t, expect.Locator(testID(page, "run-header")).ToHaveAttribute("data-status", "passed"), "the run passes")
	must(t, expect.Locator(testID(page, "run-commit")).ToHaveText(repo.Head[:10]), "pinned to the branch's head")
	must(t, expect.Locator(testID(page, "run-log")).ToContainText(repo.Head), "the head ran")
	// The last report is written by its job after the run ends: the page
	// shows it on the next load.
	report := testID(page, "forge-report")
	for i := 0; i < 60; i++ {
		if txt, _ := report.TextContent(); strings.HasPrefix(strings.TrimSpace(txt), "reported to GitHub: success") {
			break
		}
		time.Sleep(250 * time.Millisecond)
		_, err := page.Reload()
		must(t, err, "reload")
	}
	must(t, expect.Locator(report).ToContainText("reported to GitHub: success (passed in"), "the run page shows the report")
	screenshot(t, page, "forge-reported")
	posted := gh.posted()
	last := posted[len(posted)-1]
	if last["state"] != "success" || last["context"] != "ci/anvil" || last["sha"] != repo.Head ||
		!strings.HasSuffix(fmt.Sprint(last["target_url"]), "/runs/"+runID) {
		t.Fatalf("last status %v", last)
	}
	for _, st := range posted {
		if st["context"] != "ci/anvil" || st["sha"] != repo.Head {
			t.Fatalf("status %v: not the project's context or the run's commit", st)
		}
	}

	// A push that finds the queue full, evaluated again from the ledger.
	hook := apiJSON(t, s, "PUT", "/api/private/projects/"+pid+"/webhooks/github", map[string]any{"enabled": true})
	secret := hook["secret"].(string)
	apiJSON(t, s, "PATCH", "/api/private/projects/"+pid, map[string]any{"run_command": "sleep 600"})
	var queued []string
	for range 25 {
		status, out := anviltest.CallJSON(t, s.Token, "POST", s.URL+"/api/private/projects/"+pid+"/runs", map[string]any{})
		if status == http.StatusConflict {
			break
		}
		if status != http.StatusAccepted {
			t.Fatalf("queue a run: %d %v", status, out)
		}
		queued = append(queued, out["run_id"].(string))
	}
	push, _ := json.Marshal(map[string]any{"ref": "refs/heads/main", "before": repo.Old, "after": repo.Head,
		"repository": map[string]any{"clone_url": repo.URL}})
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(push)
	req, _ := http.NewRequest("POST", s.URL+"/api/public/webhooks/"+pid+"/github", bytes.NewReader(push))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", "journey-full-1")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	res, err := http.DefaultClient.Do(req)
	must(t, err, "deliver")
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("push into a full queue: %d", res.StatusCode)
	}

	gotoPage(t, page, s.URL+"/projects/"+pid+"/webhooks")
	row := page.Locator(`[data-testid=delivery-row][data-delivery-id="journey-full-1"]`)
	must(t, expect.Locator(row).ToHaveAttribute("data-outcome", "queue_full"), "queue_full in the ledger")
	must(t, row.Locator("[data-testid=redeliver]").Click(), "evaluate again while full")
	must(t, expect.Locator(testID(page, "redeliver-error")).ToContainText("still holds 20 runs"), "still full")
	screenshot(t, page, "forge-redeliver-full")
	apiJSON(t, s, "POST", "/api/private/runs/"+queued[len(queued)-1]+"/cancel", nil)
	must(t, row.Locator("[data-testid=redeliver]").Click(), "evaluate again with room")
	must(t, expect.Locator(testID(page, "redeliver-notice")).ToContainText("accepted"), "accepted")
	must(t, expect.Locator(row).ToHaveAttribute("data-outcome", "accepted"), "the same delivery id, accepted")
	must(t, expect.Locator(row.Locator("[data-testid=redeliver]")).ToHaveCount(0), "no button on an accepted delivery")
	screenshot(t, page, "forge-redelivered")
	must(t, row.Locator("[data-testid=delivery-run]").Click(), "open its run")
	must(t, expect.Locator(testID(page, "run-commit")).ToHaveText(repo.Head[:10]), "the push's run, pinned")

	// Leave nothing sleeping: the server stops gracefully only once its
	// runs have.
	ds := apiJSON(t, s, "GET", "/api/private/projects/"+pid+"/webhooks/github/deliveries", nil)
	for _, d := range ds["deliveries"].([]any) {
		if id, ok := d.(map[string]any)["run_id"].(string); ok {
			queued = append(queued, id)
		}
	}
	for _, id := range queued {
		anviltest.CallJSON(t, s.Token, "POST", s.URL+"/api/private/runs/"+id+"/cancel", nil)
	}
	must(t, expect.Locator(testID(page, "run-header")).ToHaveAttribute("data-status", "canceled"), "the push's run canceled")
}
