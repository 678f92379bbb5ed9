package web_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/domain/wiring"
)

const (
	shaMain = "199eddf46df50de8d02e99bf1c5fdb4101338224"
	shaPrev = "a10867b14bb761a232cd80139fbd4c0d33264240"
	zeros   = "0000000000000000000000000000000000000000"
)

// hook is one configured webhook of a test project.
type hook struct {
	project  string
	provider string
	secret   string
	signing  string // GitLab signing token, when configured
}

// newProject creates a project with the given default branch via the API.
func (b *testBundle) newProject(t *testing.T, slug, branch string) string {
	t.Helper()
	in := validProject(slug)
	in["default_branch"] = branch
	status, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", in)
	if status != http.StatusCreated {
		t.Fatalf("create project: %d %v", status, p)
	}
	return p["id"].(string)
}

// createHook creates a webhook via the API and returns its secrets.
func (b *testBundle) createHook(t *testing.T, project, provider string, body map[string]any) hook {
	t.Helper()
	if body == nil {
		body = map[string]any{"enabled": true}
	}
	status, out := b.api(t, b.owner.Token, "PUT", "/api/private/projects/"+project+"/webhooks/"+provider, body)
	if status != http.StatusCreated {
		t.Fatalf("create %s webhook: %d %v", provider, status, out)
	}
	h := hook{project: project, provider: provider, secret: out["secret"].(string)}
	if s, ok := out["signing_token"].(string); ok {
		h.signing = s
	}
	return h
}

// delivery is one request to the public route.
type delivery struct {
	event  string
	id     string
	body   []byte
	header http.Header // extra or overriding headers
	sign   bool        // add the provider's valid signature
}

type answer struct {
	status int
	body   map[string]any
	header http.Header
}

func (a answer) runID() string {
	s, _ := a.body["run_id"].(string)
	return s
}

// send signs d with h's secrets as the provider does and posts it.
func (b *testBundle) send(t *testing.T, h hook, d delivery) answer {
	t.Helper()
	req, _ := http.NewRequest("POST", b.srv.URL+"/api/public/webhooks/"+h.project+"/"+h.provider, strings.NewReader(string(d.body)))
	req.Header.Set("Content-Type", "application/json")
	signHeaders(req.Header, h, d)
	for k, vs := range d.header {
		req.Header.Del(k)
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := map[string]any{}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("answer is not JSON: %d %q", res.StatusCode, raw)
	}
	return answer{status: res.StatusCode, body: out, header: res.Header}
}

func hexHMAC(key string, body []byte) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

func signHeaders(hd http.Header, h hook, d delivery) {
	switch h.provider {
	case "github":
		hd.Set("X-GitHub-Event", d.event)
		if d.id != "" {
			hd.Set("X-GitHub-Delivery", d.id)
		}
		if d.sign {
			hd.Set("X-Hub-Signature-256", "sha256="+hexHMAC(h.secret, d.body))
		}
	case "gitea":
		hd.Set("X-Gitea-Event", d.event)
		if d.id != "" {
			hd.Set("X-Gitea-Delivery", d.id)
		}
		if d.sign {
			hd.Set("X-Gitea-Signature", hexHMAC(h.secret, d.body))
		}
	case "gitlab":
		hd.Set("X-Gitlab-Event", d.event)
		if d.id != "" {
			hd.Set("Idempotency-Key", d.id)
		}
		if d.sign {
			hd.Set("X-Gitlab-Token", h.secret)
			if h.signing != "" {
				key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(h.signing, "whsec_"))
				wid, ts := "msg_"+d.id, strconv.FormatInt(time.Now().Unix(), 10)
				m := hmac.New(sha256.New, key)
				m.Write([]byte(wid + "." + ts + "."))
				m.Write(d.body)
				hd.Set("Webhook-Id", wid)
				hd.Set("Webhook-Timestamp", ts)
				hd.Set("Webhook-Signature", "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
			}
		}
	}
}

func pushBody(ref, before, after string) []byte {
	b, _ := json.Marshal(map[string]any{"ref": ref, "before": before, "after": after,
		"repository": map[string]any{"clone_url": "https://git.example/shop.git"}})
	return b
}

func (b *testBundle) count(t *testing.T, table, where string, args ...any) int {
	t.Helper()
	n, err := b.db.Bun.NewSelect().Table(table).Where(where, args...).Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

func (b *testBundle) ledgerOutcome(t *testing.T, project, provider, id string) string {
	t.Helper()
	var o string
	err := b.db.Bun.NewRaw(`SELECT outcome FROM project_webhook_deliveries WHERE project_id = ? AND provider = ? AND delivery_id = ?`,
		project, provider, id).Scan(context.Background(), &o)
	if err != nil {
		t.Fatalf("ledger row %s/%s: %v", provider, id, err)
	}
	return o
}

func TestWebhookGitHubDocumentedVector(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.newProject(t, "vector", "main")
	h := b.createHook(t, p, "github", map[string]any{"enabled": true, "secret": "It's a Secret to Everybody"})
	vector := http.Header{"X-Hub-Signature-256": {"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}}
	// The documented body with its documented signature is verified; as a
	// ping it is recorded as ignored_ping.
	a := b.send(t, h, delivery{event: "ping", id: "vector-1", body: []byte("Hello, World!"), header: vector})
	if a.status != http.StatusOK || a.body["outcome"] != "ignored_ping" || a.body["run_id"] != nil {
		t.Fatalf("documented vector: %d %v", a.status, a.body)
	}
	// One byte changed and the same signature fails, recording nothing.
	a = b.send(t, h, delivery{event: "ping", id: "vector-2", body: []byte("Hello, World?"), header: vector})
	if a.status != http.StatusUnauthorized || a.body["error"] != "invalid_signature" {
		t.Fatalf("tampered vector: %d %v", a.status, a.body)
	}
	// A verified body that is not a readable push is still recorded (it came
	// from the forge), as ignored_event of kind malformed.
	a = b.send(t, h, delivery{event: "push", id: "vector-3", body: []byte("Hello, World!"), header: vector})
	if a.status != http.StatusOK || a.body["outcome"] != "ignored_event" {
		t.Fatalf("verified unreadable push: %d %v", a.status, a.body)
	}
	if n := b.count(t, "project_webhook_deliveries", "true"); n != 2 {
		t.Fatalf("ledger holds %d rows, want 2", n)
	}
	if n := b.count(t, "project_webhook_deliveries", "kind = 'malformed'"); n != 1 {
		t.Fatal("unreadable push not recorded as malformed")
	}
}

func TestWebhookOutcomesThroughTheRoute(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.newProject(t, "outcomes", "main")
	gh := b.createHook(t, p, "github", nil)
	gl := b.createHook(t, p, "gitlab", map[string]any{"enabled": true, "config": map[string]any{"signing_token": true}})
	gt := b.createHook(t, p, "gitea", nil)
	if !strings.HasPrefix(gl.signing, "whsec_") {
		t.Fatalf("gitlab signing token %q", gl.signing)
	}
	cases := []struct {
		name  string
		h     hook
		event string
		body  []byte
		want  string
	}{
		{"github push to main", gh, "push", pushBody("refs/heads/main", shaPrev, shaMain), "accepted"},
		{"github push to feature", gh, "push", pushBody("refs/heads/feature", shaPrev, shaMain), "ignored_branch"},
		{"github ping", gh, "ping", []byte(`{"zen":"Design for failure.","hook_id":1}`), "ignored_ping"},
		{"github tag", gh, "push", pushBody("refs/tags/v1.0.0", zeros, shaMain), "ignored_event"},
		{"github branch delete", gh, "push", []byte(`{"ref":"refs/heads/main","before":"` + shaPrev + `","after":"` + zeros + `","deleted":true}`), "ignored_event"},
		{"github issues", gh, "issues", []byte(`{"action":"opened"}`), "ignored_event"},
		{"gitlab push to main", gl, "Push Hook", []byte(`{"object_kind":"push","ref":"refs/heads/main","before":"` + shaPrev + `","after":"` + strings.ToUpper(shaMain) + `"}`), "accepted"},
		{"gitlab tag push", gl, "Tag Push Hook", []byte(`{"object_kind":"tag_push","ref":"refs/tags/v1","before":"` + zeros + `","after":"` + shaMain + `"}`), "ignored_event"},
		{"gitlab merge request", gl, "Merge Request Hook", []byte(`{"object_kind":"merge_request"}`), "ignored_event"},
		{"gitea test push", gt, "push", pushBody("refs/heads/main", zeros, zeros), "ignored_ping"},
		{"gitea push to main", gt, "push", pushBody("refs/heads/main", shaPrev, shaMain), "accepted"},
		{"gitea create", gt, "create", []byte(`{"ref":"v1.0.0","ref_type":"tag","sha":"` + shaMain + `"}`), "ignored_event"},
		{"gitea delete", gt, "delete", []byte(`{"ref":"feature","ref_type":"branch"}`), "ignored_event"},
		{"gitea other branch", gt, "push", pushBody("refs/heads/dev", shaPrev, shaMain), "ignored_branch"},
	}
	for i, tc := range cases {
		id := fmt.Sprintf("delivery-%d", i)
		a := b.send(t, tc.h, delivery{event: tc.event, id: id, body: tc.body, sign: true})
		if a.status != http.StatusOK || a.body["outcome"] != tc.want {
			t.Fatalf("%s: %d %v, want %s", tc.name, a.status, a.body, tc.want)
		}
		if got := b.ledgerOutcome(t, p, tc.h.provider, id); got != tc.want {
			t.Fatalf("%s: ledger says %s", tc.name, got)
		}
		if tc.want != "accepted" {
			if a.body["run_id"] != nil {
				t.Fatalf("%s: run id %v", tc.name, a.body["run_id"])
			}
			continue
		}
		// The run is pinned to the pushed commit.
		status, run := b.api(t, b.owner.Token, "GET", "/api/private/runs/"+a.runID(), nil)
		if status != http.StatusOK || run["commit_sha"] != shaMain || run["trigger"] != "webhook" || run["branch"] != "main" {
			t.Fatalf("%s: run %d %v", tc.name, status, run)
		}
	}
	// The ledger through the API.
	status, out := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+p+"/webhooks/gitea/deliveries", nil)
	ds, _ := out["deliveries"].([]any)
	if status != http.StatusOK || len(ds) != 5 {
		t.Fatalf("gitea deliveries: %d %v", status, out)
	}
	first := ds[0].(map[string]any)
	for _, k := range []string{"delivery_id", "outcome", "run_id", "event", "received_at"} {
		if _, ok := first[k]; !ok {
			t.Fatalf("delivery lacks %s: %v", k, first)
		}
	}
	if status, _ := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+p+"/webhooks/gitea/deliveries?limit=0", nil); status != http.StatusUnprocessableEntity {
		t.Fatalf("limit=0: %d", status)
	}
}

func TestWebhookRefusalsRecordNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.newProject(t, "refusals", "main")
	gh := b.createHook(t, p, "github", nil)
	gl := b.createHook(t, p, "gitlab", map[string]any{"enabled": true, "config": map[string]any{"signing_token": true}})
	gt := b.createHook(t, p, "gitea", nil)
	body := pushBody("refs/heads/main", shaPrev, shaMain)
	good := hexHMAC(gh.secret, body)
	wrong := strings.Repeat("0", len(good))
	huge := append([]byte(`{"ref":"refs/heads/main","pad":"`), make([]byte, 5<<20)...)
	for i := range huge[32:] {
		huge[32+i] = 'a'
	}
	huge = append(huge, []byte(`"}`)...)

	cases := []struct {
		name   string
		h      hook
		d      delivery
		status int
		code   string
	}{
		{"tampered body", gh, delivery{event: "push", id: "t1", body: pushBody("refs/heads/main", shaPrev, shaPrev),
			header: http.Header{"X-Hub-Signature-256": {"sha256=" + good}}}, 401, "invalid_signature"},
		{"wrong signature of the right length", gh, delivery{event: "push", id: "t2", body: body,
			header: http.Header{"X-Hub-Signature-256": {"sha256=" + wrong}}}, 401, "invalid_signature"},
		{"sha1 scheme", gh, delivery{event: "push", id: "t3", body: body,
			header: http.Header{"X-Hub-Signature-256": {"sha1=" + good[:40]}}}, 401, "invalid_signature"},
		{"missing signature", gh, delivery{event: "push", id: "t4", body: body}, 401, "invalid_signature"},
		{"signed by another secret", gt, delivery{event: "push", id: "t5", body: body,
			header: http.Header{"X-Gitea-Signature": {good}}}, 401, "invalid_signature"},
		{"gitlab token without signature", gl, delivery{event: "Push Hook", id: "t6", body: body,
			header: http.Header{"X-Gitlab-Token": {gl.secret}}}, 401, "invalid_signature"},
		{"gitlab wrong token", gl, delivery{event: "Push Hook", id: "t7", body: body, sign: true,
			header: http.Header{"X-Gitlab-Token": {gh.secret}}}, 401, "invalid_signature"},
		{"missing delivery id", gh, delivery{event: "push", body: body, sign: true}, 400, "missing_delivery_id"},
		{"oversized body", gh, delivery{event: "push", id: "t8", body: huge, sign: true}, 413, "payload_too_large"},
		{"unknown provider", hook{project: p, provider: "bitbucket"}, delivery{event: "push", id: "t9", body: body}, 404, "unknown_provider"},
		{"malformed project id", hook{project: "nope", provider: "github", secret: gh.secret}, delivery{event: "push", id: "t10", body: body, sign: true}, 404, "not_found"},
		{"unknown project", hook{project: uuid.NewString(), provider: "github", secret: gh.secret}, delivery{event: "push", id: "t11", body: body, sign: true}, 404, "not_found"},
	}
	for _, tc := range cases {
		a := b.send(t, tc.h, tc.d)
		if a.status != tc.status || a.body["error"] != tc.code {
			t.Fatalf("%s: %d %v, want %d %s", tc.name, a.status, a.body, tc.status, tc.code)
		}
		if msg, _ := a.body["message"].(string); msg == "" || strings.Contains(msg, gh.secret) || strings.Contains(msg, good) {
			t.Fatalf("%s: message %q", tc.name, msg)
		}
	}
	// Not configured, disabled, deleted.
	other := b.newProject(t, "other", "main")
	if a := b.send(t, hook{project: other, provider: "github", secret: gh.secret}, delivery{event: "push", id: "n1", body: body, sign: true}); a.status != 401 || a.body["error"] != "webhook_not_configured" {
		t.Fatalf("not configured: %d %v", a.status, a.body)
	}
	if status, out := b.api(t, b.owner.Token, "PUT", "/api/private/projects/"+p+"/webhooks/github", map[string]any{"enabled": false}); status != 200 || out["enabled"] != false {
		t.Fatalf("disable: %d %v", status, out)
	}
	// A disabled webhook accepts nothing: 403 to a caller who proves the
	// secret, 401 to anybody else.
	if a := b.send(t, gh, delivery{event: "push", id: "d1", body: body, sign: true}); a.status != 403 || a.body["error"] != "webhook_disabled" {
		t.Fatalf("disabled: %d %v", a.status, a.body)
	}
	if a := b.send(t, gh, delivery{event: "push", id: "d2", body: body, header: http.Header{"X-Hub-Signature-256": {"sha256=" + wrong}}}); a.status != 401 {
		t.Fatalf("disabled, unverified: %d %v", a.status, a.body)
	}
	if status, _ := b.api(t, b.owner.Token, "DELETE", "/api/private/projects/"+p+"/webhooks/gitea", nil); status != http.StatusNoContent {
		t.Fatalf("delete: %d", status)
	}
	if a := b.send(t, gt, delivery{event: "push", id: "x1", body: body, sign: true}); a.status != 401 || a.body["error"] != "webhook_not_configured" {
		t.Fatalf("deleted: %d %v", a.status, a.body)
	}
	if n := b.count(t, "project_webhook_deliveries", "true"); n != 0 {
		t.Fatalf("refusals recorded %d deliveries", n)
	}
	if n := b.count(t, "project_runs", "true"); n != 0 {
		t.Fatalf("refusals made %d runs", n)
	}
	// …but each refusal of a project that exists is counted by reason, and
	// the webhook page shows the counts on the provider's card.
	counts := map[string]int{}
	rows, err := b.db.SQL.Query(`SELECT project_id::text, provider, reason, refusals FROM webhook_refusals`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var proj, provider, reason string
		var n int
		if err := rows.Scan(&proj, &provider, &reason, &n); err != nil {
			t.Fatal(err)
		}
		if proj == other {
			provider = "other:" + provider
		} else if proj != p {
			t.Fatalf("a refusal counted for project %s", proj)
		}
		counts[provider+"/"+reason] += n
	}
	rows.Close()
	want := map[string]int{"github/invalid_signature": 4, "github/missing_signature": 1, "github/missing_delivery_id": 1, "github/webhook_disabled": 1,
		"gitea/invalid_signature": 1, "gitea/not_configured": 1, "gitlab/missing_signature": 1, "gitlab/invalid_signature": 1, "other:github/not_configured": 1}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Fatalf("refusal counts %v, want %v", counts, want)
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	_, page := br.get("/projects/" + p + "/webhooks")
	card := page[strings.Index(page, `data-testid="webhook-card-github"`):]
	card = card[:strings.Index(card, "</section>")]
	if !strings.Contains(card, `data-testid="webhook-refusals"`) || !strings.Contains(card, `data-reason="invalid_signature" data-count="4"`) ||
		!strings.Contains(card, `data-reason="webhook_disabled" data-count="1"`) || !strings.Contains(card, "signature does not verify") {
		t.Fatalf("the github card does not show its refusals: %s", card)
	}
}

func TestWebhookCRUDThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.newProject(t, "crud", "main")
	path := "/api/private/projects/" + p + "/webhooks/github"

	if status, out := b.api(t, b.owner.Token, "PUT", path, map[string]any{}); status != 422 || out["error"] != "missing_enabled" {
		t.Fatalf("create without enabled: %d %v", status, out)
	}
	if status, out := b.api(t, b.owner.Token, "PUT", path, `{"enabled": "yes"}`); status != 400 || out["error"] != "invalid_json" {
		t.Fatalf("enabled not a bool: %d %v", status, out)
	}
	if status, out := b.api(t, b.owner.Token, "PUT", "/api/private/projects/"+p+"/webhooks/svn", map[string]any{"enabled": true}); status != 404 || out["error"] != "unknown_provider" {
		t.Fatalf("unknown provider: %d %v", status, out)
	}
	if status, out := b.api(t, b.owner.Token, "PUT", path, map[string]any{"enabled": true, "config": map[string]any{"signing_token": true}}); status != 422 || out["error"] != "invalid_config" {
		t.Fatalf("signing token on github: %d %v", status, out)
	}
	h := b.createHook(t, p, "github", nil)
	if len(h.secret) != 64 {
		t.Fatalf("generated secret %q", h.secret)
	}
	// Never shown again: not by GET, not by an update.
	status, list := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+p+"/webhooks", nil)
	raw, _ := json.Marshal(list)
	if status != 200 || strings.Contains(string(raw), h.secret) || strings.Contains(string(raw), `"secret"`) {
		t.Fatalf("list: %d %s", status, raw)
	}
	hooks := list["webhooks"].([]any)
	gh := hooks[0].(map[string]any)
	if len(hooks) != 3 || gh["provider"] != "github" || gh["configured"] != true || gh["enabled"] != true ||
		gh["url"] != "http://anvil.test/api/public/webhooks/"+p+"/github" || hooks[1].(map[string]any)["configured"] != false {
		t.Fatalf("list: %s", raw)
	}
	status, out := b.api(t, b.owner.Token, "PUT", path, map[string]any{"enabled": true})
	if status != 200 || out["secret"] != nil {
		t.Fatalf("update: %d %v", status, out)
	}
	status, out = b.api(t, b.owner.Token, "PUT", path, map[string]any{"enabled": true, "secret": "a brand new secret value"})
	if status != 422 || out["error"] != "secret_not_updatable" || !strings.Contains(out["message"].(string), "rotate-secret") {
		t.Fatalf("secret in update: %d %v", status, out)
	}
	body := pushBody("refs/heads/main", shaPrev, shaMain)
	if a := b.send(t, h, delivery{event: "push", id: "still-old", body: body, sign: true}); a.status != 200 {
		t.Fatalf("refused update changed the secret: %d %v", a.status, a.body)
	}

	// Viewers read but cannot write; other organisations see nothing.
	owner, _ := b.accounts.Authenticate(ctx, b.owner.Token)
	if _, err := b.accounts.AddMember(ctx, owner, "viewer@acme.test", testPassword, "viewer"); err != nil {
		t.Fatal(err)
	}
	br := b.browser(t)
	br.login("viewer@acme.test", testPassword)
	csrf := br.csrf("/")
	for _, tc := range []struct{ method, path string }{
		{"PUT", path}, {"DELETE", path}, {"POST", path + "/rotate-secret"},
	} {
		req, _ := http.NewRequest(tc.method, b.srv.URL+tc.path, strings.NewReader(`{"enabled": false}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-CSRF-Token", csrf)
		if status, out := do(t, br.c, req); status != 403 || out["error"] != "forbidden" {
			t.Fatalf("viewer %s %s: %d %v", tc.method, tc.path, status, out)
		}
	}
	res, _ := br.get("/api/private/projects/" + p + "/webhooks/github/deliveries")
	if res.StatusCode != 200 {
		t.Fatalf("viewer reads deliveries: %d", res.StatusCode)
	}
	other, err := b.accounts.Bootstrap(ctx, "globex", "boss@globex.test", testPassword)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/api/private/projects/" + p + "/webhooks", nil},
		{"PUT", path, map[string]any{"enabled": false}},
		{"DELETE", path, nil},
		{"POST", path + "/rotate-secret", nil},
		{"GET", path + "/deliveries", nil},
	} {
		if status, out := b.api(t, other.Token, tc.method, tc.path, tc.body); status != 404 || out["error"] != "not_found" {
			t.Fatalf("other org %s %s: %d %v", tc.method, tc.path, status, out)
		}
	}

	// Rotation: the old secret fails at once, the new one works.
	status, out = b.api(t, b.owner.Token, "POST", path+"/rotate-secret", nil)
	newSecret, _ := out["secret"].(string)
	if status != 200 || len(newSecret) != 64 || newSecret == h.secret {
		t.Fatalf("rotate: %d %v", status, out)
	}
	if a := b.send(t, h, delivery{event: "push", id: "after-rotate-old", body: body, sign: true}); a.status != 401 {
		t.Fatalf("old secret after rotation: %d %v", a.status, a.body)
	}
	rotated := hook{project: p, provider: "github", secret: newSecret}
	if a := b.send(t, rotated, delivery{event: "push", id: "after-rotate-new", body: body, sign: true}); a.status != 200 {
		t.Fatalf("new secret: %d %v", a.status, a.body)
	}

	// Delete: row and secret gone, deliveries refused, a second delete 404s.
	if status, _ := b.api(t, b.owner.Token, "DELETE", path, nil); status != http.StatusNoContent {
		t.Fatalf("delete: %d", status)
	}
	if n := b.count(t, "project_webhooks", "project_id = ?", p); n != 0 {
		t.Fatal("delete left the row")
	}
	if a := b.send(t, rotated, delivery{event: "push", id: "after-delete", body: body, sign: true}); a.status != 401 {
		t.Fatalf("after delete: %d %v", a.status, a.body)
	}
	if status, out := b.api(t, b.owner.Token, "DELETE", path, nil); status != 404 || out["error"] != "webhook_not_found" {
		t.Fatalf("second delete: %d %v", status, out)
	}
	if status, out := b.api(t, b.owner.Token, "POST", path+"/rotate-secret", nil); status != 404 || out["error"] != "webhook_not_found" {
		t.Fatalf("rotate deleted: %d %v", status, out)
	}
	// Re-created, it has a new secret.
	again := b.createHook(t, p, "github", nil)
	if again.secret == h.secret || again.secret == newSecret {
		t.Fatal("re-created webhook reused a secret")
	}
}

// TestWebhookRotatedByAnotherProcess: the route verifies with sealed
// secrets cached for a minute, and another process (a second `anvil serve`)
// rotates the secret behind its back. The old secret stops verifying at
// once and the new one works at once, whichever arrives first.
func TestWebhookRotatedByAnotherProcess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.newProject(t, "elsewhere", "main")
	h := b.createHook(t, p, "github", nil)
	body := pushBody("refs/heads/main", shaPrev, shaMain)
	if a := b.send(t, h, delivery{event: "push", id: "before", body: body, sign: true}); a.status != 200 {
		t.Fatalf("first delivery: %d %v", a.status, a.body)
	}
	other := wiring.NewServices(b.db, b.keys, nil, testDomainOptions())
	if _, err := other.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Stop(context.Background()) })
	owner, err := b.accounts.Authenticate(ctx, b.owner.Token)
	if err != nil {
		t.Fatal(err)
	}
	rotate := func() hook {
		t.Helper()
		res, err := other.Webhooks.RotateSecret(ctx, owner, uuid.MustParse(p), "github")
		if err != nil {
			t.Fatal(err)
		}
		return hook{project: p, provider: "github", secret: res.Secrets.Secret}
	}
	// The old secret first: it verifies with the cached copy, and is refused.
	second := rotate()
	if a := b.send(t, h, delivery{event: "push", id: "old-after-rotation", body: body, sign: true}); a.status != 401 || a.body["error"] != "invalid_signature" {
		t.Fatalf("old secret after another process rotated: %d %v", a.status, a.body)
	}
	if a := b.send(t, second, delivery{event: "push", id: "new-after-rotation", body: body, sign: true}); a.status != 200 || a.body["outcome"] != "accepted" {
		t.Fatalf("new secret: %d %v", a.status, a.body)
	}
	// The new secret first: it fails the cached copy, then verifies.
	third := rotate()
	if a := b.send(t, third, delivery{event: "push", id: "newest-first", body: body, sign: true}); a.status != 200 || a.body["outcome"] != "accepted" {
		t.Fatalf("newest secret with a stale cache: %d %v", a.status, a.body)
	}
	if a := b.send(t, second, delivery{event: "push", id: "second-after-third", body: body, sign: true}); a.status != 401 {
		t.Fatalf("rotated-away secret: %d %v", a.status, a.body)
	}
	if n := b.count(t, "project_webhook_deliveries", "delivery_id IN ('old-after-rotation', 'second-after-third')"); n != 0 {
		t.Fatalf("refused deliveries recorded %d rows", n)
	}
}

func TestWebhookQueueFullContract(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.newProject(t, "busy", "main")
	h := b.createHook(t, p, "github", nil)
	var runs []string
	for range 20 {
		status, out := b.api(t, b.owner.Token, "POST", "/api/private/projects/"+p+"/runs", map[string]any{})
		if status != http.StatusAccepted {
			t.Fatalf("manual run: %d %v", status, out)
		}
		runs = append(runs, out["run_id"].(string))
	}
	d := delivery{event: "push", id: "busy-1", body: pushBody("refs/heads/main", shaPrev, shaMain), sign: true}
	a := b.send(t, h, d)
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") != "60" ||
		a.body["outcome"] != "queue_full" || a.body["run_id"] != nil || a.body["error"] != "project_queue_full" {
		t.Fatalf("full queue: %d %v %v", a.status, a.header, a.body)
	}
	if got := b.ledgerOutcome(t, p, "github", "busy-1"); got != "queue_full" {
		t.Fatalf("ledger: %s", got)
	}
	// Free a slot; the resend of the same id is re-evaluated and accepted.
	if status, out := b.api(t, b.owner.Token, "POST", "/api/private/runs/"+runs[19]+"/cancel", nil); status >= 300 {
		t.Fatalf("cancel: %d %v", status, out)
	}
	a = b.send(t, h, d)
	if a.status != http.StatusOK || a.body["outcome"] != "accepted" || a.runID() == "" || a.header.Get("Anvil-Delivery-Replayed") != "" {
		t.Fatalf("resend after freeing: %d %v", a.status, a.body)
	}
	if got := b.ledgerOutcome(t, p, "github", "busy-1"); got != "accepted" {
		t.Fatalf("ledger after acceptance: %s", got)
	}
	var runID string
	if err := b.db.Bun.NewRaw(`SELECT run_id::text FROM project_webhook_deliveries WHERE delivery_id = 'busy-1'`).Scan(context.Background(), &runID); err != nil || runID != a.runID() {
		t.Fatalf("ledger run id %q, %v", runID, err)
	}
	// A resend of the accepted id replays: the same run, no new one.
	if status, out := b.api(t, b.owner.Token, "POST", "/api/private/runs/"+runs[18]+"/cancel", nil); status >= 300 {
		t.Fatalf("cancel: %d %v", status, out)
	}
	again := b.send(t, h, d)
	if again.status != http.StatusOK || again.body["outcome"] != "accepted" || again.runID() != a.runID() || again.header.Get("Anvil-Delivery-Replayed") != "true" {
		t.Fatalf("replay: %d %v", again.status, again.body)
	}
	if n := b.count(t, "project_runs", "delivery_id = 'busy-1'"); n != 1 {
		t.Fatalf("%d runs for one delivery", n)
	}
}

func TestWebhookTenConcurrentCopies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.newProject(t, "race", "main")
	h := b.createHook(t, p, "gitea", nil)
	d := delivery{event: "push", id: "same-delivery", body: pushBody("refs/heads/main", shaPrev, shaMain), sign: true}
	var wg sync.WaitGroup
	answers := make([]answer, 10)
	start := make(chan struct{})
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			answers[i] = b.send(t, h, d)
		}()
	}
	close(start)
	wg.Wait()
	for i, a := range answers {
		if a.status != 200 || a.body["outcome"] != "accepted" || a.runID() == "" || a.runID() != answers[0].runID() {
			t.Fatalf("copy %d: %d %v", i, a.status, a.body)
		}
	}
	if n := b.count(t, "project_runs", "project_id = ?", p); n != 1 {
		t.Fatalf("%d runs, want exactly 1", n)
	}
	var attempts int
	_ = b.db.Bun.NewRaw(`SELECT attempts FROM project_webhook_deliveries`).Scan(context.Background(), &attempts)
	if attempts != 10 {
		t.Fatalf("attempts %d, want 10", attempts)
	}
}

// TestWebhookRealFixtures replays the forges' own payloads from the shared
// fixtures folder (never copied into the project).
func TestWebhookRealFixtures(t *testing.T) {
	t.Parallel()
	dir := "../../shared/fixtures/webhooks"
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("real webhook fixtures not present at %s: %v", dir, err)
	}
	b := setup(t)
	master := b.newProject(t, "on-master", "master")
	main := b.newProject(t, "on-main", "main")
	hooks := map[string]hook{}
	for _, p := range []struct{ id, name string }{{master, "master"}, {main, "main"}} {
		for _, prov := range []string{"github", "gitlab", "gitea"} {
			hooks[p.name+"/"+prov] = b.createHook(t, p.id, prov, nil)
		}
	}
	cases := []struct {
		file, project, event, want, sha string
	}{
		{"github_ping.json", "master/github", "ping", "ignored_ping", ""},
		{"github_push.json", "master/github", "push", "accepted", "199eddf46df50de8d02e99bf1c5fdb4101338224"},
		{"github_push_branch_create.json", "master/github", "push", "accepted", ""},
		{"github_push_branch_delete.json", "master/github", "push", "ignored_event", ""},
		{"github_push_tag.json", "master/github", "push", "ignored_event", ""},
		{"gitlab_push.json", "master/gitlab", "Push Hook", "accepted", ""},
		{"gitlab_push_branch_delete.json", "master/gitlab", "Push Hook", "ignored_event", ""},
		{"gitlab_tag_push.json", "master/gitlab", "Tag Push Hook", "ignored_event", ""},
		{"gitea_push.json", "main/gitea", "push", "accepted", ""},
		{"gitea_push_branch_create.json", "main/gitea", "push", "ignored_branch", ""},
		{"gitea_delete_branch.json", "master/gitea", "delete", "ignored_event", ""},
		{"gitea_create_tag.json", "master/gitea", "create", "ignored_event", ""},
	}
	for i, tc := range cases {
		body, err := os.ReadFile(filepath.Join(dir, tc.file))
		if err != nil {
			t.Skipf("fixture %s missing: %v", tc.file, err)
		}
		a := b.send(t, hooks[tc.project], delivery{event: tc.event, id: fmt.Sprintf("fixture-%d", i), body: body, sign: true})
		if a.status != 200 || a.body["outcome"] != tc.want {
			t.Fatalf("%s: %d %v, want %s", tc.file, a.status, a.body, tc.want)
		}
		if tc.sha != "" {
			_, run := b.api(t, b.owner.Token, "GET", "/api/private/runs/"+a.runID(), nil)
			if run["commit_sha"] != tc.sha {
				t.Fatalf("%s: run pinned to %v", tc.file, run["commit_sha"])
			}
		}
	}
}

// TestNoPlaintextSecretInTheDatabase creates every kind of secret, rotates
// one, and scans every text-like column of every table for them.
func TestNoPlaintextSecretInTheDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.newProject(t, "custody", "main")
	own := "a secret the user chose 42"
	secrets := []string{own}
	h := b.createHook(t, p, "github", map[string]any{"enabled": true, "secret": own})
	gl := b.createHook(t, p, "gitlab", map[string]any{"enabled": true, "config": map[string]any{"signing_token": true}})
	gt := b.createHook(t, p, "gitea", nil)
	secrets = append(secrets, gl.secret, gl.signing, strings.TrimPrefix(gl.signing, "whsec_"), gt.secret)
	_, out := b.api(t, b.owner.Token, "POST", "/api/private/projects/"+p+"/webhooks/gitea/rotate-secret", nil)
	secrets = append(secrets, out["secret"].(string))
	// Deliveries too: a verified one whose body carries the secret (old
	// Gitea payloads do) must leave no trace of it.
	body := []byte(`{"ref":"refs/heads/main","before":"` + shaPrev + `","after":"` + shaMain + `","secret":"` + own + `"}`)
	if a := b.send(t, h, delivery{event: "push", id: "custody", body: body, sign: true}); a.status != 200 {
		t.Fatalf("delivery: %d %v", a.status, a.body)
	}
	var cols []struct {
		Table  string `bun:"table_name"`
		Column string `bun:"column_name"`
	}
	if err := b.db.Bun.NewRaw(`SELECT table_name, column_name FROM information_schema.columns
		WHERE table_schema = 'public' AND data_type IN ('text', 'character varying', 'jsonb', 'json', 'bytea')`).Scan(ctx, &cols); err != nil {
		t.Fatal(err)
	}
	if len(cols) < 10 {
		t.Fatalf("only %d columns to scan", len(cols))
	}
	for _, c := range cols {
		for _, s := range secrets {
			var n int
			q := fmt.Sprintf(`SELECT count(*) FROM %q WHERE position(? IN %q::text) > 0`, c.Table, c.Column)
			if err := b.db.Bun.NewRaw(q, s).Scan(ctx, &n); err != nil {
				t.Fatalf("scan %s.%s: %v", c.Table, c.Column, err)
			}
			if n > 0 {
				t.Fatalf("plaintext secret found in %s.%s", c.Table, c.Column)
			}
		}
	}
	var enc string
	if err := b.db.Bun.NewRaw(`SELECT secret_enc FROM project_webhooks WHERE provider = 'github'`).Scan(ctx, &enc); err != nil || !strings.HasPrefix(enc, "v1.") {
		t.Fatalf("sealed secret %q, %v", enc, err)
	}
}

func TestWebhookSettingsPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.newProject(t, "page", "main")
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)

	_, body := br.get("/projects/" + p)
	if !strings.Contains(body, `data-testid="project-webhooks"`) || !strings.Contains(body, "/projects/"+p+"/webhooks") {
		t.Fatal("project page lacks the webhooks link")
	}
	res, body := br.get("/projects/" + p + "/webhooks")
	if res.StatusCode != 200 {
		t.Fatalf("page: %d", res.StatusCode)
	}
	for _, want := range []string{`data-testid="webhook-card-github" data-state="not_configured"`, `data-testid="webhook-card-gitlab" data-state="not_configured"`,
		`data-testid="webhook-card-gitea" data-state="not_configured"`, `data-testid="webhook-create-github"`, `data-testid="no-deliveries"`,
		`sse-connect="/events?project=` + p + `"`, `hx-trigger="sse:delivery"`} {
		if !strings.Contains(body, want) {
			t.Fatalf("page lacks %s", want)
		}
	}
	csrf := csrfRE.FindStringSubmatch(body)[1]
	htmx := func(path string, form url.Values) (int, string) { return br.htmx(path, csrf, form) }
	base := "/projects/" + p + "/webhooks/"
	// Without the CSRF token nothing happens.
	if res, _ := br.post(base+"gitlab", url.Values{}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("create without CSRF: %d", res.StatusCode)
	}
	// Create GitLab with a signing token: the answer is a redirect (htmx's
	// HX-Redirect), and the page it leads to shows URL, secret and token once.
	page := "/projects/" + p + "/webhooks"
	status, card := htmx(base+"gitlab", url.Values{"signing_token": {"true"}})
	if status != http.StatusNoContent || strings.Contains(card, "webhook-secret") {
		t.Fatalf("create: %d %s", status, card)
	}
	res, card = br.get(page)
	secret := regexpBetween(card, `data-testid="webhook-secret">`, "<")
	token := regexpBetween(card, `data-testid="webhook-signing-token">`, "<")
	if res.Header.Get("Cache-Control") != "no-store" || !strings.Contains(card, `data-testid="webhook-card-gitlab" data-state="enabled"`) || len(secret) != 64 || !strings.HasPrefix(token, "whsec_") ||
		!strings.Contains(card, "http://anvil.test/api/public/webhooks/"+p+"/gitlab") || !strings.Contains(card, `data-copy="#webhook-secret-gitlab"`) {
		t.Fatalf("the page after create: %s", card)
	}
	// Shown once: the page no longer has it.
	_, body = br.get("/projects/" + p + "/webhooks")
	if strings.Contains(body, secret) || strings.Contains(body, token) || strings.Contains(body, `data-testid="webhook-reveal"`) {
		t.Fatal("the secret is shown again")
	}
	if !strings.Contains(body, `hx-confirm="Rotate the GitLab secret?`) || !strings.Contains(body, `hx-confirm="Delete the GitLab webhook`) {
		t.Fatal("rotate and delete lack a confirmation")
	}
	// A delivery shows up in the deliveries fragment with its outcome.
	h := hook{project: p, provider: "gitlab", secret: secret, signing: token}
	a := b.send(t, h, delivery{event: "Push Hook", id: "page-1", body: pushBody("refs/heads/main", shaPrev, shaMain), sign: true})
	if a.status != 200 || a.body["outcome"] != "accepted" {
		t.Fatalf("delivery: %d %v", a.status, a.body)
	}
	_, frag := br.get(base + "deliveries-fragment")
	if !strings.Contains(frag, `data-delivery-id="page-1" data-outcome="accepted"`) || !strings.Contains(frag, `href="/runs/`+a.runID()+`"`) ||
		!strings.Contains(frag, `id="deliveries"`) {
		t.Fatalf("deliveries fragment: %s", frag)
	}
	// Disable, enable.
	if status, card := htmx(base+"gitlab/enabled", url.Values{"enabled": {"false"}}); status != 200 || !strings.Contains(card, `data-state="disabled"`) {
		t.Fatalf("disable: %d %s", status, card)
	}
	if a := b.send(t, h, delivery{event: "Push Hook", id: "page-2", body: pushBody("refs/heads/main", shaPrev, shaMain), sign: true}); a.status != 403 {
		t.Fatalf("disabled delivery: %d", a.status)
	}
	if status, card := htmx(base+"gitlab/enabled", url.Values{"enabled": {"true"}}); status != 200 || !strings.Contains(card, `data-state="enabled"`) {
		t.Fatalf("enable: %d %s", status, card)
	}
	// Rotate: a new secret once; the old one fails.
	status, _ = htmx(base+"gitlab/rotate", nil)
	_, card = br.get(page)
	newSecret := regexpBetween(card, `data-testid="webhook-secret">`, "<")
	if status != http.StatusNoContent || len(newSecret) != 64 || newSecret == secret || !strings.Contains(card, "The old one stopped working") {
		t.Fatalf("rotate: %d %s", status, card)
	}
	if a := b.send(t, h, delivery{event: "Push Hook", id: "page-3", body: pushBody("refs/heads/main", shaPrev, shaMain), sign: true}); a.status != 401 {
		t.Fatalf("old secret after rotate: %d", a.status)
	}
	// Delete.
	if status, card := htmx(base+"gitlab/delete", nil); status != 200 || !strings.Contains(card, `data-state="not_configured"`) {
		t.Fatalf("delete: %d %s", status, card)
	}
	if n := b.count(t, "project_webhooks", "true"); n != 0 {
		t.Fatal("delete left the row")
	}
	// Without htmx, a create answers 303; the page shows the secret once
	// and a reload shows nothing and creates nothing.
	res, body = br.post(base+"github", url.Values{"_csrf": {csrf}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != page || strings.Contains(body, "webhook-reveal") {
		t.Fatalf("plain form create: %d", res.StatusCode)
	}
	if _, body = br.get(page); !strings.Contains(body, `data-testid="webhook-reveal"`) || !strings.Contains(body, `data-testid="deliveries"`) {
		t.Fatal("the page after a plain create does not reveal the secret")
	}
	if _, body = br.get(page); strings.Contains(body, `data-testid="webhook-reveal"`) {
		t.Fatal("a reload reveals the secret again")
	}

	// Viewers see the state but no buttons.
	owner, _ := b.accounts.Authenticate(ctx, b.owner.Token)
	if _, err := b.accounts.AddMember(ctx, owner, "viewer@acme.test", testPassword, "viewer"); err != nil {
		t.Fatal(err)
	}
	vb := b.browser(t)
	vb.login("viewer@acme.test", testPassword)
	res, body = vb.get("/projects/" + p + "/webhooks")
	if res.StatusCode != 200 || !strings.Contains(body, `data-testid="webhook-card-github" data-state="enabled"`) ||
		strings.Contains(body, `data-testid="webhook-create-`) || strings.Contains(body, `data-testid="webhook-rotate"`) {
		t.Fatalf("viewer page: %d", res.StatusCode)
	}
	vcsrf := csrfRE.FindStringSubmatch(body)[1]
	if res, _ := vb.post(base+"github/rotate", url.Values{"_csrf": {vcsrf}}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("viewer rotate: %d", res.StatusCode)
	}
	// Another organisation's project is not found.
	if _, err := b.accounts.Bootstrap(ctx, "globex", "boss@globex.test", testPassword); err != nil {
		t.Fatal(err)
	}
	ob := b.browser(t)
	ob.login("boss@globex.test", testPassword)
	if res, _ := ob.get("/projects/" + p + "/webhooks"); res.StatusCode != http.StatusNotFound {
		t.Fatalf("other org page: %d", res.StatusCode)
	}
}

// regexpBetween returns the text between the first start marker and end.
func regexpBetween(s, start, end string) string {
	i := strings.Index(s, start)
	if i < 0 {
		return ""
	}
	rest := s[i+len(start):]
	j := strings.Index(rest, end)
	if j < 0 {
		return ""
	}
	return strings.TrimSpace(rest[:j])
}
