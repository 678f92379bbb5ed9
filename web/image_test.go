package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"anvil/domain"
	"anvil/domain/image"
	"anvil/domain/image/imagetest"
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

// A web-only process (no store of its own, as serve --role web) lists a
// worker's store from the worker's reports and takes a clear that the
// worker's loop carries out, passing over the image a run is using; the
// settings page shows the store in figures only, and the clear is audited.
func TestImageStoresSeenAndClearedFromAWebOnlyProcess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	status, out := b.api(t, b.owner.Token, "GET", "/api/private/images", nil)
	if status != http.StatusOK || out["here"] != false || len(out["stores"].([]any)) != 0 || out["clear_requested_at"] != nil {
		t.Fatalf("images before any report: %d %v", status, out)
	}

	// A worker's store with two images, one of them in use by a run.
	store, err := image.OpenStore(filepath.Join(t.TempDir(), "images"), 64<<20, image.Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	var inUse *image.Lease
	for _, body := range []string{"one", "two"} {
		img := imagetest.Image(t, nil, imagetest.Layer(t, imagetest.Entry{Name: "file", Body: body}))
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		l, err := store.Open(ctx, d.String(), func(context.Context) (v1.Image, error) { return img, nil })
		if err != nil {
			t.Fatal(err)
		}
		if inUse == nil {
			inUse = l
			defer l.Close()
		} else {
			l.Close()
		}
	}
	rep := b.services.ImageStores.NewReporter(store, "worker-1.test", store.Dir(), nil)
	rep.Every = 20 * time.Millisecond
	rep.Start(ctx)
	t.Cleanup(rep.Stop)

	firstStore := func(want func(map[string]any) bool) (map[string]any, map[string]any) {
		t.Helper()
		var out map[string]any
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			var status int
			status, out = b.api(t, b.owner.Token, "GET", "/api/private/images", nil)
			if status != http.StatusOK {
				t.Fatalf("images: %d %v", status, out)
			}
			if st, _ := out["stores"].([]any); len(st) == 1 && want(st[0].(map[string]any)) {
				return out, st[0].(map[string]any)
			}
		}
		t.Fatalf("the store was not reported as wanted: %v", out)
		return nil, nil
	}
	out, st := firstStore(func(st map[string]any) bool { return st["images"] == float64(2) })
	if st["host"] != "worker-1.test" || st["cap_bytes"] != float64(64<<20) || st["stale"] != false || st["bytes"].(float64) <= 0 ||
		out["count"] != float64(2) || out["bytes"] != st["bytes"] || out["here"] != false {
		t.Fatalf("the store as listed: %v", out)
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	_, page := br.get("/settings")
	if !strings.Contains(page, `data-testid="image-store-row"`) || !strings.Contains(page, "worker-1.test") || strings.Contains(page, "sha256") {
		t.Fatalf("settings:\n%s", page)
	}

	status, out = b.api(t, b.owner.Token, "POST", "/api/private/images/clear", nil)
	if status != http.StatusAccepted || out["stores"] != float64(1) || out["requested_at"] == "" {
		t.Fatalf("clear: %d %v", status, out)
	}
	out, _ = firstStore(func(st map[string]any) bool { return st["images"] == float64(1) && st["clear_pending"] == false })
	if out["clear_requested_at"] == nil {
		t.Fatalf("after the clear: %v", out)
	}
	if _, err := os.Stat(inUse.Root); err != nil {
		t.Fatalf("the image in use was removed: %v", err)
	}
	if n := b.countAudit(t, domain.AuditImagesCleared); n != 1 {
		t.Fatalf("%d audit entries of the clear", n)
	}
	// The page's form does the same, and says when the workers clear.
	res, _ := br.post("/settings/images/clear", url.Values{"_csrf": {br.csrf("/settings")}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("the form: %d", res.StatusCode)
	}
	if _, page := br.get("/settings"); !strings.Contains(page, `data-testid="images-clear-requested"`) || !strings.Contains(page, "workers clear within 5 s") {
		t.Fatalf("settings after the clear:\n%s", page)
	}
}

// Admins read the stores, only an owner clears them; a member reads
// nothing and sees a sentence on the settings page.
func TestImageStoresRoles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	store, err := image.OpenStore(filepath.Join(t.TempDir(), "images"), 0, image.Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.services.ImageStores.NewReporter(store, "worker-2.test", store.Dir(), nil).Once(ctx); err != nil {
		t.Fatal(err)
	}
	admin, adminBr := b.person(t, domain.RoleAdmin)
	member, memberBr := b.person(t, domain.RoleMember)
	if status, out := b.api(t, admin, "GET", "/api/private/images", nil); status != http.StatusOK || len(out["stores"].([]any)) != 1 {
		t.Fatalf("an admin reads: %d %v", status, out)
	}
	if status, out := b.api(t, admin, "POST", "/api/private/images/clear", nil); status != http.StatusForbidden {
		t.Fatalf("an admin clears: %d %v", status, out)
	}
	if status, out := b.api(t, member, "GET", "/api/private/images", nil); status != http.StatusForbidden {
		t.Fatalf("a member reads: %d %v", status, out)
	}
	if status, out := b.api(t, member, "POST", "/api/private/images/clear", nil); status != http.StatusForbidden {
		t.Fatalf("a member clears: %d %v", status, out)
	}
	if n := b.count(t, "image_store_clear", "true"); n != 0 {
		t.Fatalf("a refused clear left %d requests", n)
	}
	if _, page := adminBr.get("/settings"); !strings.Contains(page, "worker-2.test") || strings.Contains(page, `data-testid="clear-images"`) {
		t.Fatalf("an admin's settings:\n%s", page)
	}
	if _, page := memberBr.get("/settings"); strings.Contains(page, "worker-2.test") || !strings.Contains(page, "Images are kept by the workers") {
		t.Fatalf("a member's settings:\n%s", page)
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
