package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"anvil/domain"
)

// A project's images: set through the API, shown by GET and the edit
// form, a reference that is not one refused naming it (422, nothing
// changed), the audit saying the change in words.
func TestProjectImages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	status, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("imaged"))
	if status != http.StatusCreated || p["run_image"] != "" || p["repair_image"] != "" {
		t.Fatalf("create: %d %v", status, p)
	}
	id := p["id"].(string)
	status, p = b.api(t, b.owner.Token, "PATCH", "/api/private/projects/"+id, map[string]any{"run_image": " node:22 ", "repair_image": "ghcr.io/acme/agent:3"})
	if status != http.StatusOK || p["run_image"] != "node:22" || p["repair_image"] != "ghcr.io/acme/agent:3" {
		t.Fatalf("patch: %d %v", status, p)
	}
	for _, bad := range []string{"https://ghcr.io/acme/ci:3", "Node:22", "node:22 && rm -rf /", strings.Repeat("a", 513)} {
		status, out := b.api(t, b.owner.Token, "PATCH", "/api/private/projects/"+id, map[string]any{"run_image": bad})
		if status != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(out["error"], out["message"]), "run_image") {
			t.Errorf("%q: %d %v", bad, status, out)
		}
	}
	_, got := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+id, nil)
	if got["run_image"] != "node:22" {
		t.Fatalf("a refused change changed the image: %v", got["run_image"])
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	_, audit := br.get("/settings/audit")
	if !strings.Contains(audit, "none (the host&#39;s tools)") || !strings.Contains(audit, "node:22") {
		t.Fatalf("the audit page does not say the change:\n%s", audit)
	}
	page := "/projects/" + id + "/edit"
	_, form := br.get(page)
	if !strings.Contains(form, `value="node:22"`) || !strings.Contains(form, "@dockerhub") {
		t.Fatalf("the form does not show the image:\n%s", form)
	}
	vals := url.Values{"_csrf": {br.csrf(page)}, "slug": {"imaged"}, "name": {"Imaged"}, "repo_url": {"https://git.example/shop.git"},
		"default_branch": {"main"}, "run_command": {"make test"}, "run_image": {""}, "repair_image": {"ghcr.io/acme/agent:3"}}
	if res, body := br.post(page, vals); res.StatusCode != http.StatusOK && res.StatusCode != http.StatusSeeOther {
		t.Fatalf("the form: %d\n%s", res.StatusCode, body)
	}
	_, got = b.api(t, b.owner.Token, "GET", "/api/private/projects/"+id, nil)
	if got["run_image"] != "" || got["repair_image"] != "ghcr.io/acme/agent:3" {
		t.Fatalf("the form saved %v / %v", got["run_image"], got["repair_image"])
	}
}

// The settings page and the API show the worker's image store as figures
// only, and only an owner clears it; a process without workers says so.
func TestImageStoreFiguresAndClear(t *testing.T) {
	t.Parallel()
	b := setup(t)
	status, out := b.api(t, b.owner.Token, "GET", "/api/private/images", nil)
	if status != http.StatusOK || out["here"] != false {
		t.Fatalf("images: %d %v", status, out)
	}
	if status, out := b.api(t, b.owner.Token, "POST", "/api/private/images/clear", nil); status != http.StatusConflict || out["error"] != "no_image_store" {
		t.Fatalf("clear without a store: %d %v", status, out)
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	if _, page := br.get("/settings"); !strings.Contains(page, "Images are kept by the workers") {
		t.Fatalf("settings:\n%s", page)
	}
}

// A project's pull secret names one of its run secrets: an unknown or
// malformed name is refused naming the field (422, nothing changed), on
// create too (a new project has no secrets); a member may not set it;
// a known one is saved, shown by its name only, and the audit says the
// change. The form refuses an unknown one in the field's words.
func TestProjectImagePullSecret(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := validProject("pulled")
	in["image_pull_secret"] = "REGISTRY_AUTH"
	if status, out := b.api(t, b.owner.Token, "POST", "/api/private/projects", in); status != http.StatusUnprocessableEntity ||
		!strings.Contains(fmt.Sprint(out["message"]), "no run secret named REGISTRY_AUTH in this project") {
		t.Fatalf("create with a pull secret: %d %v", status, out)
	}
	status, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("pulled"))
	if status != http.StatusCreated || p["image_pull_secret"] != "" {
		t.Fatalf("create: %d %v", status, p)
	}
	id := p["id"].(string)
	for bad, want := range map[string]string{
		"REGISTRY_AUTH":         "no run secret named REGISTRY_AUTH in this project",
		"registry-auth":         "must be the name of one of the project's run secrets",
		strings.Repeat("A", 65): "at most 64",
	} {
		status, out := b.api(t, b.owner.Token, "PATCH", "/api/private/projects/"+id, map[string]any{"image_pull_secret": bad, "run_image": "ghcr.io/acme/ci:3"})
		if status != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(out["message"]), "image_pull_secret") || !strings.Contains(fmt.Sprint(out["message"]), want) {
			t.Errorf("%q: %d %v", bad, status, out)
		}
	}
	if _, got := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+id, nil); got["image_pull_secret"] != "" || got["run_image"] != "" {
		t.Fatalf("a refused change changed the project: %v", got)
	}

	const value = "bot:a-token-nobody-sees"
	if status, out := b.api(t, b.owner.Token, "PUT", "/api/private/projects/"+id+"/secrets/REGISTRY_AUTH", map[string]any{"value": value}); status != http.StatusCreated && status != http.StatusOK {
		t.Fatalf("put secret: %d %v", status, out)
	}
	memberToken, _ := b.person(t, domain.RoleMember)
	if status, _ := b.api(t, memberToken, "PATCH", "/api/private/projects/"+id, map[string]any{"image_pull_secret": "REGISTRY_AUTH"}); status != http.StatusForbidden {
		t.Fatalf("a member set the pull secret: %d", status)
	}
	status, p = b.api(t, b.owner.Token, "PATCH", "/api/private/projects/"+id, map[string]any{"image_pull_secret": " REGISTRY_AUTH "})
	if status != http.StatusOK || p["image_pull_secret"] != "REGISTRY_AUTH" || strings.Contains(fmt.Sprint(p), value) {
		t.Fatalf("patch: %d %v", status, p)
	}

	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	if _, audit := br.get("/settings/audit"); !strings.Contains(audit, "pull secret of the images") || !strings.Contains(audit, "REGISTRY_AUTH") || strings.Contains(audit, value) {
		t.Fatalf("the audit page does not say the change:\n%s", audit)
	}
	page := "/projects/" + id + "/edit"
	if _, form := br.get(page); !strings.Contains(form, `value="REGISTRY_AUTH"`) || strings.Contains(form, value) {
		t.Fatalf("the form does not show the pull secret:\n%s", form)
	}
	vals := url.Values{"_csrf": {br.csrf(page)}, "slug": {"pulled"}, "name": {"Pulled"}, "repo_url": {"https://git.example/shop.git"},
		"default_branch": {"main"}, "run_command": {"make test"}, "run_image": {"ghcr.io/acme/ci:3"}, "repair_image": {""}, "image_pull_secret": {"NOPE"}}
	res, body := br.post(page, vals)
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "no run secret named NOPE in this project") {
		t.Fatalf("the form with an unknown pull secret: %d\n%s", res.StatusCode, body)
	}
	if _, got := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+id, nil); got["image_pull_secret"] != "REGISTRY_AUTH" || got["run_image"] != "" {
		t.Fatalf("a refused form changed the project: %v", got)
	}
}
