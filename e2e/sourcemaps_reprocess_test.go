//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
)

// A browser event that arrived before its source maps: the incident page
// says why its frames are minified and how to upload, at 420 and 1280 px;
// after an upload it offers to map the latest events again, and the
// River job does it — the page then shows the original frames, in the
// same incident.
func TestSourceMapsReprocessJourney(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	proj := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{"slug": "shop", "name": "Shop", "repo_url": "file:///nowhere",
		"default_branch": "main", "run_command": "true"})
	pid := proj["id"].(string)
	apiJSON(t, s, "PUT", "/api/private/projects/"+pid+"/bindings/production", map[string]any{"repair_policy": "observe"})
	conn := apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/connections", map[string]any{"name": "shop-api"})
	frames := []any{}
	for _, c := range []int{207, 135, 83} {
		frames = append(frames, map[string]any{"file": "http://shop.test/app.js", "abs_path": "http://shop.test/app.js",
			"line": 1, "colno": c, "function": "x", "in_app": true})
	}
	raw, _ := json.Marshal(map[string]any{"schema_version": "1.0", "event_id": uuid.NewString(), "timestamp": time.Now().UTC().Format(time.RFC3339),
		"title": "TypeError: boom", "level": "error", "environment": "production", "service": "web", "sdk": map[string]any{"name": "t"},
		"release": "shop@1", "exception": map[string]any{"type": "TypeError", "message": "boom", "stacktrace": frames}})
	sendFeedEvent(t, s.URL, conn["token"].(string), raw)
	var incID string
	deadline := time.Now().Add(15 * time.Second)
	for incID == "" {
		list := apiJSON(t, s, "GET", "/api/private/incidents?project_id="+pid, nil)
		if items, _ := list["incidents"].([]any); len(items) == 1 {
			incID = items[0].(map[string]any)["id"].(string)
		} else if time.Now().After(deadline) {
			t.Fatalf("no incident: %v", list)
		} else {
			time.Sleep(100 * time.Millisecond)
		}
	}

	page := loggedIn(t, s)
	for _, w := range []int{420, 1280} {
		must(t, page.SetViewportSize(w, 900), "viewport")
		gotoPage(t, page, s.URL+"/incidents/"+incID)
		must(t, expect.Locator(testID(page, "frames-note")).ToContainText("sentry-cli sourcemaps upload --release shop@1 dist/"), "why the frames are minified")
		if n, _ := testID(page, "reprocess").Count(); n != 0 {
			t.Fatal("a re-process is offered before any upload")
		}
		fits(t, page, fmt.Sprintf("the incident page before maps at %d px", w))
	}

	// The build's maps, through the plain upload.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("release", "shop@1")
	for _, name := range []string{"app.js", "app.js.map"} {
		data, err := os.ReadFile("../domain/sourcemap/testdata/build1/" + name)
		must(t, err, "fixture")
		fw, _ := mw.CreateFormFile("files", "assets/"+name)
		fw.Write(data)
	}
	mw.Close()
	req, _ := http.NewRequest("POST", s.URL+"/api/private/projects/"+pid+"/sourcemaps", &body)
	req.Header.Set("Authorization", "Bearer "+s.Token)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	res, err := http.DefaultClient.Do(req)
	must(t, err, "upload")
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %d", res.StatusCode)
	}

	for _, w := range []int{420, 1280} {
		must(t, page.SetViewportSize(w, 900), "viewport")
		gotoPage(t, page, s.URL+"/incidents/"+incID)
		must(t, testID(page, "reprocess").WaitFor(), "the re-process button once maps exist")
		fits(t, page, fmt.Sprintf("the incident page with maps at %d px", w))
		screenshot(t, page, fmt.Sprintf("incident-reprocess-%d", w))
	}
	must(t, testID(page, "reprocess").Click(), "map the latest events again")
	must(t, testID(page, "reprocess-queued").WaitFor(), "the re-process is queued")
	deadline = time.Now().Add(20 * time.Second)
	for {
		gotoPage(t, page, s.URL+"/incidents/"+incID)
		if n, _ := page.Locator(`[data-testid=frame-file]:text-is("src/cart.js")`).Count(); n > 0 {
			break
		}
		if time.Now().After(deadline) {
			d := apiJSON(t, s, "GET", "/api/private/incidents/"+incID, nil)
			t.Fatalf("the latest event was not mapped again: %v", d["latest_event"])
		}
		time.Sleep(250 * time.Millisecond)
	}
	must(t, expect.Locator(testID(page, "frame-function").First()).ToHaveText("totalOf"), "the original function")
	list := apiJSON(t, s, "GET", "/api/private/incidents?project_id="+pid, nil)
	if items, _ := list["incidents"].([]any); len(items) != 1 {
		t.Fatalf("incidents after re-processing: %v", items)
	}
}
