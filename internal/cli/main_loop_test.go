package cli

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/db"
	"anvil/db/testdb"
	"anvil/internal/anviltest"
	"anvil/jobs/jobstest"
	"anvil/jobs/sandbox"
)

// The loop closes itself (docs/releases.md), end to end: the
// whole binary (web and River workers), a real git repository, a fake
// forge speaking GitHub's documented pulls API, the real webhook captures
// of shared/fixtures/webhooks (read in place, with the pull request's
// number and merge commit filled in), and the events of the releases.

// fixture reads one capture, decoded, for the test to fill in.
func fixture(t *testing.T, dir, name string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

// fakeForge answers GitHub's "create a pull request" with the next number
// (7, 8, …) and accepts commit statuses.
type fakeForge struct {
	srv  *httptest.Server
	mu   sync.Mutex
	next int
	prs  []map[string]any
}

func newFakeForge(t *testing.T) *fakeForge {
	f := &fakeForge{next: 7}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/repos/acme/shop/statuses/"):
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, `{"id":1}`)
		case r.Method == http.MethodPost && r.URL.Path == "/repos/acme/shop/pulls":
			var body map[string]any
			_ = json.NewDecoder(r.Body).Decode(&body)
			f.mu.Lock()
			n := f.next
			f.next++
			f.prs = append(f.prs, body)
			f.mu.Unlock()
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"number":%d,"html_url":"https://github.example/acme/shop/pull/%d"}`, n, n)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"message":"Not Found"}`)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// alertSink is an alert destination: it keeps the messages' bodies.
type alertSink struct {
	srv  *httptest.Server
	mu   sync.Mutex
	msgs []map[string]any
}

func newAlertSink(t *testing.T) *alertSink {
	s := &alertSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		s.mu.Lock()
		s.msgs = append(s.msgs, m)
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *alertSink) of(kind string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, m := range s.msgs {
		if m["type"] == kind {
			out = append(out, m)
		}
	}
	return out
}

// loop is one running anvil with a project wired for repairs.
type loop struct {
	t       *testing.T
	base    string
	token   string
	project string
	conn    string
	secret  string // the GitHub webhook's
	db      *db.DB
	repo    jobstest.Repo
	forge   *fakeForge
	alerts  *alertSink
	fixture string
}

func startLoop(t *testing.T) *loop {
	t.Helper()
	if err := sandbox.BwrapAvailable(); err != nil {
		t.Skipf("bubblewrap cannot run here: %v", err)
	}
	dir := anviltest.WebhookFixtures(t)
	dbURL := testdb.URLFor(testdb.Name(t))
	env := []string{"ANVIL_DATABASE_URL=" + dbURL, "ANVIL_SECRET_KEY=" + testKey, "ANVIL_WORK_DIR=" + t.TempDir(),
		"ANVIL_FEED_ARMED=true", "ANVIL_CHECKOUT_ALLOW_LOCAL=true", "ANVIL_ALERTS_ALLOW_PRIVATE=true"}
	if code, _, stderr := anvil(t, env, "", "migrate"); code != 0 {
		t.Fatal(stderr)
	}
	_, out, _ := anvil(t, env, "a long enough password\n", "admin", "bootstrap", "--org", "acme", "--email", "o@acme.test")
	var boot map[string]string
	if err := json.Unmarshal([]byte(out), &boot); err != nil {
		t.Fatalf("bootstrap printed %q", out)
	}
	d, err := db.Open(context.Background(), dbURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	_, addr, logs := startAnvil(t, env, "serve")
	t.Cleanup(func() {
		if t.Failed() {
			for _, q := range []string{
				`SELECT json_agg(r)::text FROM (SELECT environment, version, commit_sha, event_count, first_seen, last_seen FROM releases) r`,
				`SELECT json_agg(r)::text FROM (SELECT fix_sha, release_sha, answer FROM release_ancestry) r`,
				`SELECT json_agg(r)::text FROM (SELECT fix_sha, release_sha FROM release_ancestry_questions) r`,
				`SELECT json_agg(r)::text FROM (SELECT kind, state, attempt, errors, finalized_at FROM river_job WHERE kind IN ('fix_check', 'check_ancestry') ORDER BY id DESC LIMIT 8) r`,
			} {
				var out *string
				err := d.Bun.NewRaw(q).Scan(context.Background(), &out)
				if out != nil {
					t.Logf("%s\n  → %s %v", q, *out, err)
				}
			}
			var keep []string // everything but the access log
			for _, line := range strings.Split(logs.String(), "\n") {
				if !strings.Contains(line, `"msg":"http request"`) {
					keep = append(keep, line)
				}
			}
			t.Logf("anvil's log:\n%s", strings.Join(keep, "\n"))
		}
	})
	l := &loop{t: t, base: "http://" + addr, token: boot["token"], db: d, repo: jobstest.GitRepo(t), forge: newFakeForge(t),
		alerts: newAlertSink(t), fixture: dir}
	p := l.api("POST", "/api/private/projects", map[string]any{"slug": "shop", "name": "Shop", "repo_url": l.repo.URL,
		"default_branch": "main", "run_command": "true", "repair_command": "echo fixed >> README",
		"provider": "github", "provider_api_url": l.forge.srv.URL, "provider_repo": "acme/shop", "provider_token": "ghp_loop_token"})
	l.project = p["id"].(string)
	l.conn = l.api("POST", "/api/private/projects/"+l.project+"/connections", map[string]any{"name": "shop-api"})["token"].(string)
	l.api("PUT", "/api/private/projects/"+l.project+"/bindings/production", map[string]any{"repair_policy": "approve"})
	l.secret = l.api("PUT", "/api/private/projects/"+l.project+"/webhooks/github", map[string]any{"enabled": true})["secret"].(string)
	// The smallest verification window (docs/releases.md); the test moves
	// its start back rather than waiting it out.
	l.api("PATCH", "/api/private/projects/"+l.project, map[string]any{"fix_verification_window": "1m"})
	l.api("POST", "/api/private/alerts/destinations", map[string]any{"name": "on-call", "kind": "webhook", "url": l.alerts.srv.URL})
	return l
}

func (l *loop) api(method, path string, body any) map[string]any {
	l.t.Helper()
	return anviltest.MustJSON(l.t, l.token, method, l.base+path, body)
}

func (l *loop) incident(id string) map[string]any {
	l.t.Helper()
	return l.api("GET", "/api/private/incidents/"+id, nil)["incident"].(map[string]any)
}

func (l *loop) fix(id string) map[string]any {
	l.t.Helper()
	f, _ := l.incident(id)["fix"].(map[string]any)
	return f
}

// transitions are the incident's moves, oldest first.
func (l *loop) transitions(id string) []map[string]any {
	l.t.Helper()
	var out []map[string]any
	for _, tr := range l.api("GET", "/api/private/incidents/"+id, nil)["transitions"].([]any) {
		out = append(out, tr.(map[string]any))
	}
	return out
}

func (l *loop) transition(id, contains string) map[string]any {
	l.t.Helper()
	for _, tr := range l.transitions(id) {
		if strings.Contains(tr["reason"].(string), contains) {
			return tr
		}
	}
	return nil
}

// event sends one event of the feed (title names its incident) from release.
func (l *loop) event(title, release string) {
	l.t.Helper()
	ev := map[string]any{"schema_version": "1.0", "event_id": uuid.NewString(), "timestamp": time.Now().UTC().Format(time.RFC3339Nano),
		"title": title, "level": "error", "environment": "production", "service": "shop-api", "release": release,
		"sdk":       map[string]any{"name": "anvil-test", "version": "1"},
		"exception": map[string]any{"type": title, "message": "it broke"}}
	status, out := anviltest.CallJSON(l.t, l.conn, "POST", l.base+"/api/feed/events", ev)
	if status != http.StatusAccepted {
		l.t.Fatalf("feed: %d %v", status, out)
	}
}

// incidentOf is the id of the incident whose title is title.
func (l *loop) incidentOf(title string) string {
	l.t.Helper()
	var id string
	pollUntil(l.t, 60*time.Second, "the incident "+title, func() bool {
		for _, it := range l.api("GET", "/api/private/incidents?project_id="+l.project, nil)["incidents"].([]any) {
			if m := it.(map[string]any); m["title"] == title {
				id = m["id"].(string)
				return true
			}
		}
		return false
	})
	return id
}

// repair approves the incident and waits for its pull request.
func (l *loop) repair(id string) map[string]any {
	l.t.Helper()
	l.api("POST", "/api/private/incidents/"+id+"/decisions", map[string]any{"decision": "approve"})
	var inc map[string]any
	pollUntil(l.t, 90*time.Second, "the repair's pull request", func() bool {
		inc = l.incident(id)
		return inc["status"] == "PR_OPEN" || inc["status"] == "NEEDS_HUMAN"
	})
	if inc["status"] != "PR_OPEN" || !strings.HasPrefix(inc["pr_url"].(string), "https://github.example/acme/shop/pull/") {
		l.t.Fatalf("after the repair: %v", inc)
	}
	return inc
}

// deliver signs a GitHub delivery with the webhook's secret and posts it.
func (l *loop) deliver(event string, payload map[string]any) map[string]any {
	l.t.Helper()
	body, _ := json.Marshal(payload)
	req, _ := http.NewRequest("POST", l.base+"/api/public/webhooks/"+l.project+"/github", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", uuid.NewString())
	m := hmac.New(sha256.New, []byte(l.secret))
	m.Write(body)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	status, out := anviltest.Do(l.t, http.DefaultClient, req)
	if status != http.StatusOK {
		l.t.Fatalf("%s delivery: %d %v", event, status, out)
	}
	return out
}

// pullRequest is the GitHub capture name, for pull request number of this
// forge, with the merge commit sha when merged.
func (l *loop) pullRequest(name string, number int, sha string) map[string]any {
	l.t.Helper()
	pl := fixture(l.t, l.fixture, name)
	pr := pl["pull_request"].(map[string]any)
	url := fmt.Sprintf("https://github.example/acme/shop/pull/%d", number)
	pl["number"], pr["number"], pr["html_url"] = number, number, url
	if sha != "" {
		pr["merge_commit_sha"] = sha
	}
	return pl
}

// git runs git in dir as the test's committer.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=dev", "GIT_AUTHOR_EMAIL=dev@acme.test",
		"GIT_COMMITTER_NAME=dev", "GIT_COMMITTER_EMAIL=dev@acme.test", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// clone checks the repository out in a fresh folder.
func (l *loop) clone() string {
	l.t.Helper()
	dir := filepath.Join(l.t.TempDir(), "work")
	git(l.t, filepath.Dir(dir), "clone", "-q", strings.TrimPrefix(l.repo.URL, "file://"), dir)
	return dir
}

// TestLoopClosesItself: incident → repair run → pull request → merged
// (GitHub's merged capture) → a release named by a commit that contains
// the merge → the one-minute window → CLOSED with the evidence; then an
// event from a release without the fix reopens nothing, and one from a
// release with it reopens the incident and alerts fix_failed.
func TestLoopClosesItself(t *testing.T) {
	t.Parallel()
	l := startLoop(t)
	const title, other = "CartIsNull", "SlowCheckout"
	old := l.repo.Head // the release in production before the fix
	l.event(title, old)
	id := l.incidentOf(title)
	if inc := l.incident(id); inc["status"] != "WAITING_APPROVAL" || inc["short_id"] != "SHOP-1" {
		t.Fatalf("the incident: %v", inc)
	}
	inc := l.repair(id)
	number := 7
	if inc["pr_url"] != fmt.Sprintf("https://github.example/acme/shop/pull/%d", number) {
		t.Fatalf("pull request %v", inc["pr_url"])
	}

	// The pull request is merged on the forge: the merge commit on main,
	// then one more commit — the release's — on top of it.
	work := l.clone()
	git(t, work, "merge", "-q", "--no-ff", "-m", fmt.Sprintf("Merge pull request #%d", number), "origin/anvil/repair/"+id)
	merge := git(t, work, "rev-parse", "HEAD")
	if err := os.WriteFile(filepath.Join(work, "VERSION"), []byte("2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, work, "add", "VERSION")
	git(t, work, "commit", "-q", "-m", "Release 2")
	fixed := git(t, work, "rev-parse", "HEAD")
	git(t, work, "push", "-q", "origin", "main")

	if out := l.deliver("pull_request", l.pullRequest("github_pull_request_closed_merged.json", number, merge)); out["outcome"] != "ignored_event" {
		t.Fatalf("merged delivery: %v", out)
	}
	fix := l.fix(id)
	if fix == nil || fix["commit_sha"] != merge || fix["shipped_at"] != nil || l.incident(id)["status"] != "PR_OPEN" {
		t.Fatalf("after the merge: %v", l.incident(id))
	}
	if l.transition(id, fmt.Sprintf("fix merged in !%d (%s), waiting for a release", number, merge[:7])) == nil {
		t.Fatalf("no merge transition: %v", l.transitions(id))
	}

	// The release that contains the merge serves events (of another
	// incident): the ancestry check in the mirror ships the fix.
	l.event(other, fixed)
	// Two jobs in a row: the periodic fix check (every 20 s) asks, the
	// project's check_ancestry answers in a fresh confined mirror.
	pollUntil(t, 90*time.Second, "the fix to ship in the release "+fixed[:7], func() bool {
		fix = l.fix(id)
		return fix["shipped_at"] != nil
	})
	if fix["release"] != fixed || fix["verified_at"] != nil {
		t.Fatalf("shipped: %v", fix)
	}
	ctx := context.Background()
	var answers []string
	if err := l.db.Bun.NewRaw(`SELECT release_sha || '=' || answer FROM release_ancestry WHERE fix_sha = ? ORDER BY 1`, merge).Scan(ctx, &answers); err != nil {
		t.Fatal(err)
	}
	if !containsStr(answers, fixed+"=yes") || !containsStr(answers, old+"=no") {
		t.Fatalf("the ancestry cache: %v", answers)
	}
	if inc := l.incident(id); inc["status"] != "PR_OPEN" {
		t.Fatalf("shipping is not a state: %v", inc)
	}
	verifying := l.api("GET", "/api/private/incidents?project_id="+l.project+"&status=VERIFYING", nil)["incidents"].([]any)
	if len(verifying) != 1 || verifying[0].(map[string]any)["id"] != id {
		t.Fatalf("the VERIFYING filter: %v", verifying)
	}

	// The release with the fix serves more events during the window (the
	// evidence that the fixed code ran), none of this incident; then the
	// one-minute window is made to have ended: its start moves back a minute.
	l.event(other, fixed)
	l.event(other, fixed)
	// A release's count follows its events by a fold (docs/feed.md, "The
	// write path and its costs"): read until it has, within a bound.
	var served float64
	for deadline := time.Now().Add(10 * time.Second); served != 3 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, r := range l.api("GET", "/api/private/projects/"+l.project+"/releases", nil)["releases"].([]any) {
			if r := r.(map[string]any); r["version"] == fixed {
				served = r["event_count"].(float64)
			}
		}
	}
	if served != 3 { // one when it shipped, two since
		t.Fatalf("the release with the fix served %v events", served)
	}
	if _, err := l.db.Bun.NewRaw(`UPDATE incidents SET fix_shipped_at = fix_shipped_at - interval '1 minute',
		fix_verify_until = fix_verify_until - interval '1 minute' WHERE id = ?`, id).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 60*time.Second, "the incident to close on the evidence", func() bool { return l.incident(id)["status"] == "CLOSED" })
	closed := l.transition(id, "fix verified")
	if closed == nil || closed["to"] != "CLOSED" || closed["actor_kind"] != "system" || closed["actor_id"] != "anvil" {
		t.Fatalf("the closing transition: %v", l.transitions(id))
	}
	for _, want := range []string{fmt.Sprintf("!%d", number), merge[:7], "shipped in " + fixed, "1m window", "served 2 events"} {
		if !strings.Contains(closed["reason"].(string), want) {
			t.Fatalf("the evidence %q does not say %q", closed["reason"], want)
		}
	}
	if fix = l.fix(id); fix["verified_at"] == nil {
		t.Fatalf("verified: %v", fix)
	}

	// An old pod still runs the release before the fix: counted, shown,
	// and nothing reopens.
	l.event(title, old)
	pollUntil(t, 60*time.Second, "the event from "+old[:7]+" to be judged", func() bool {
		fix = l.fix(id)
		return fix["seen_before_fix"] == old
	})
	if inc := l.incident(id); inc["status"] != "CLOSED" || fix["seen_before_fix_events"] != float64(1) {
		t.Fatalf("an event from a release without the fix: %v", inc)
	}
	if l.transition(id, "seen in "+old+", before the fix; not reopened") == nil {
		t.Fatalf("no note of the old release: %v", l.transitions(id))
	}
	if n := len(l.alerts.of("incident.fix_failed")); n != 0 {
		t.Fatalf("%d fix_failed alerts for an old release", n)
	}

	// The release with the fix sends this error again: the fix failed.
	l.event(title, fixed)
	pollUntil(t, 60*time.Second, "the incident to reopen", func() bool { return l.incident(id)["status"] == "TRIAGED" })
	reopened := l.transition(id, "recurred in "+fixed)
	if reopened == nil || reopened["from"] != "CLOSED" || reopened["to"] != "TRIAGED" ||
		!strings.Contains(reopened["reason"].(string), fmt.Sprintf("which contains the fix from !%d", number)) {
		t.Fatalf("the reopening: %v", l.transitions(id))
	}
	pollUntil(t, 60*time.Second, "the fix_failed alert", func() bool { return len(l.alerts.of("incident.fix_failed")) == 1 })
	msg := l.alerts.of("incident.fix_failed")[0]
	data := msg["data"].(map[string]any)
	if data["incident"].(map[string]any)["id"] != id {
		t.Fatalf("the alert: %v", msg)
	}
}

// TestLoopRepairClosedAndFixesPush: a repair pull request closed without
// merging sends the incident to a person, with the reason; a commit pushed
// to the default branch that says "Fixes SHOP-n" is that incident's fix.
func TestLoopRepairClosedAndFixesPush(t *testing.T) {
	t.Parallel()
	l := startLoop(t)
	l.event("DivideByZero", l.repo.Head)
	id := l.incidentOf("DivideByZero")
	if pr := l.repair(id)["pr_url"]; pr != "https://github.example/acme/shop/pull/7" {
		t.Fatalf("pull request %v", pr)
	}
	if out := l.deliver("pull_request", l.pullRequest("github_pull_request_closed_unmerged.json", 7, "")); out["outcome"] != "ignored_event" {
		t.Fatalf("closed delivery: %v", out)
	}
	inc := l.incident(id)
	if inc["status"] != "NEEDS_HUMAN" || inc["needs_human_reason"] != "repair pull request closed without merging" || inc["fix"] != nil {
		t.Fatalf("after the pull request closed: %v", inc)
	}
	tr := l.transition(id, "repair pull request closed without merging")
	if tr == nil || tr["from"] != "PR_OPEN" || tr["actor_id"] != "forge:github" {
		t.Fatalf("the transition: %v", l.transitions(id))
	}

	// A person fixes it by hand and says so in the commit message.
	short := inc["short_id"].(string)
	work := l.clone()
	if err := os.WriteFile(filepath.Join(work, "README"), []byte("guarded\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, work, "commit", "-q", "-am", "Guard the divisor\n\nFixes "+short)
	sha := git(t, work, "rev-parse", "HEAD")
	git(t, work, "push", "-q", "origin", "main")
	push := fixture(t, l.fixture, "github_push.json")
	push["ref"], push["before"], push["after"] = "refs/heads/main", l.repo.Head, sha
	commit := push["commits"].([]any)[0].(map[string]any)
	commit["id"], commit["message"] = sha, "Guard the divisor\n\nFixes "+short
	push["commits"] = []any{commit}
	push["head_commit"] = commit
	l.deliver("push", push)
	pollUntil(t, 30*time.Second, "the pushed fix", func() bool {
		f, _ := l.incident(short)["fix"].(map[string]any)
		return f != nil && f["commit_sha"] == sha
	})
	if f := l.fix(id); f["source"] != "push" || f["pr_url"] != "" {
		t.Fatalf("the pushed fix: %v", f)
	}
	if l.transition(id, fmt.Sprintf("fix committed in %s (\"Fixes\" %s), waiting for a release", sha[:7], short)) == nil {
		t.Fatalf("no transition for the pushed fix: %v", l.transitions(id))
	}
}

func containsStr(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
