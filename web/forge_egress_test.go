package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/forgestatus"
	"anvil/domain/run"
)

// A provider_api_url on a private address is refused when the project is
// saved, as a private repo_url is (docs/forgeapi.md): 422
// private_provider_api_url, nothing created or changed; a public one is
// taken.
func TestPrivateProviderAPIURLRefusedWhenSaved(t *testing.T) {
	t.Parallel()
	b := setup(t) // the strict checkout policy; names resolve to a public address
	for _, api := range []string{"http://127.0.0.1:3000/api/v3", "http://169.254.169.254/latest", "http://[::1]:8080", "http://10.0.0.5"} {
		in := validProject("shop")
		in["provider"], in["provider_api_url"], in["provider_repo"], in["provider_token"] = "github", api, "acme/shop", "ghp_test"
		status, out := b.api(t, b.owner.Token, "POST", "/api/private/projects", in)
		if msg, _ := out["message"].(string); status != http.StatusUnprocessableEntity || out["error"] != "private_provider_api_url" ||
			!strings.Contains(msg, "ANVIL_CHECKOUT_ALLOW_LOCAL=true") {
			t.Errorf("create with %s: %d %v", api, status, out)
		}
	}
	if n := b.count(t, "projects", "true"); n != 0 {
		t.Fatalf("%d projects created by refused saves", n)
	}
	in := validProject("shop")
	in["provider"], in["provider_api_url"], in["provider_repo"], in["provider_token"] = "github", "https://ghe.example/api/v3", "acme/shop", "ghp_test"
	status, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", in)
	if status != http.StatusCreated {
		t.Fatalf("create with a public forge: %d %v", status, p)
	}
	path := "/api/private/projects/" + p["id"].(string)
	if status, out := b.api(t, b.owner.Token, "PATCH", path, map[string]any{"provider_api_url": "http://192.168.1.10/api/v3"}); status != http.StatusUnprocessableEntity || out["error"] != "private_provider_api_url" {
		t.Fatalf("patch to a private forge: %d %v", status, out)
	}
	if _, got := b.api(t, b.owner.Token, "GET", path, nil); got["provider_api_url"] != "https://ghe.example/api/v3" {
		t.Fatalf("after the refusal: %v", got["provider_api_url"])
	}

	// The project form says it beside the field.
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	form := url.Values{"_csrf": {br.csrf("/projects/new")}, "slug": {"web"}, "repo_url": {"https://git.example/web.git"},
		"default_branch": {"main"}, "run_command": {"make"}, "provider": {"gitea"}, "provider_repo": {"acme/web"},
		"provider_api_url": {"http://127.0.0.1:3000"}}
	res, body := br.post("/projects", form)
	if field := regexpBetween(body, `data-testid="field-error-provider_api_url"`, "</p>"); res.StatusCode != http.StatusUnprocessableEntity ||
		!strings.Contains(field, "is a private address, refused") {
		t.Fatalf("form: %d, beside the field: %q", res.StatusCode, field)
	}
}

// forgeSecret stands for what an internal service would answer: it must
// reach no answer, page or stored error of anvil's.
const forgeSecret = "internal-metadata-SECRET-7f3a"

// A forge that refuses with a body (Gitea: its SDK copies the body's message
// into its error, which reached the 422 and the run page before): "run the
// latest commit" answers a 422
// naming the forge's status, the run's status report (its API and its page)
// names the status too, and none of them carries the body.
func TestForgeAnswerNeverEchoed(t *testing.T) {
	t.Parallel()
	b := setupLatest(t)
	forge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprintf(w, `{"message":%q,"errors":[{"code":"invalid","message":%q}],"documentation_url":%q}`, forgeSecret, forgeSecret, forgeSecret)
	}))
	t.Cleanup(forge.Close)
	in := validProject("shop")
	in["provider"], in["provider_api_url"], in["provider_repo"], in["provider_token"] = "gitea", forge.URL, "acme/shop", "gitea_test"
	status, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", in)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %v", status, p)
	}
	id := p["id"].(string)
	status, out := b.api(t, b.owner.Token, "POST", "/api/private/projects/"+id+"/runs", map[string]any{"ref": "latest"})
	raw, _ := json.Marshal(out)
	if status != http.StatusUnprocessableEntity || out["error"] != "latest_unresolved" || !strings.Contains(string(raw), "HTTP 422") ||
		strings.Contains(string(raw), forgeSecret) {
		t.Fatalf("latest: %d %s", status, raw)
	}

	// A run with a commit, reported to the same forge.
	ctx := context.Background()
	pid := uuid.MustParse(id)
	owner, _ := b.accounts.Authenticate(ctx, b.owner.Token)
	proj, _ := b.projects.Get(ctx, owner.OrgID, pid)
	var r *run.Run
	sha := forgeHead
	if err := b.store.WithProject(ctx, pid, func(ctx context.Context, tx bun.Tx, _ *domain.Project) error {
		var err error
		r, err = b.queue.AcceptTx(ctx, tx, proj, run.AcceptSpec{Trigger: run.TriggerManual, Branch: "main", CommitSHA: &sha})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := forgestatus.NewReporter(b.store, b.projects, "").Report(ctx, r.ID); err == nil || strings.Contains(err.Error(), forgeSecret) {
		t.Fatalf("report: %v", err)
	}
	status, out = b.api(t, b.owner.Token, "GET", "/api/private/runs/"+r.ID.String(), nil)
	raw, _ = json.Marshal(out)
	if status != http.StatusOK || !strings.Contains(string(raw), "HTTP 422") || strings.Contains(string(raw), forgeSecret) {
		t.Fatalf("run: %d %s", status, raw)
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	res, page := br.get("/runs/" + r.ID.String())
	if res.StatusCode != http.StatusOK || !strings.Contains(page, "HTTP 422") || strings.Contains(page, forgeSecret) {
		t.Fatalf("run page: %d; the report line: %q", res.StatusCode, regexpBetween(page, "could not report", "</"))
	}
}
