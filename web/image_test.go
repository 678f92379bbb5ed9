package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
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
