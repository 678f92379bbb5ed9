package web_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha1" //nolint:gosec // sentry-cli's checksums
	"encoding/hex"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/run"
	"anvil/domain/wiring"
)

// The source-map pipeline over HTTP (docs/sourcemap.md): uploads
// through the endpoints sentry-cli calls and through the private API,
// their refusals, and symbolication of SDK-shaped events at both doors.

const smFixtures = "../domain/sourcemap/testdata/"

func smRead(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(smFixtures + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type smEntry struct {
	url, kind string
	headers   map[string]string
	data      []byte
}

// smZip is an artifact bundle as sentry-cli builds it: files under
// files/_/_/… and a manifest.json naming each one's url, type and headers.
func smZip(t testing.TB, attrs map[string]string, entries ...smEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	files := map[string]any{}
	for _, e := range entries {
		name := "files/_/_/" + strings.TrimPrefix(e.url, "~/")
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(e.data)
		files[name] = map[string]any{"url": e.url, "type": e.kind, "headers": e.headers}
	}
	m, _ := json.Marshal(map[string]any{"files": files, "attributes": attrs})
	w, _ := zw.Create("manifest.json")
	w.Write(m)
	zw.Close()
	return buf.Bytes()
}

func sha1hex(b []byte) string {
	s := sha1.Sum(b) //nolint:gosec // sentry-cli's checksums
	return hex.EncodeToString(s[:])
}

// smAPI calls an /api/0 endpoint and decodes its JSON answer.
func smAPI(t testing.TB, b *testBundle, token, method, path string, body io.Reader, ctype string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, b.srv.URL+path, body)
	req.Header.Set("Authorization", "Bearer "+token)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return res.StatusCode, out
}

func smAssemble(t testing.TB, b *testBundle, token, org string, body map[string]any) (int, map[string]any) {
	t.Helper()
	raw, _ := json.Marshal(body)
	return smAPI(t, b, token, "POST", "/api/0/organizations/"+org+"/artifactbundle/assemble/", bytes.NewReader(raw), "application/json")
}

// smChunks posts chunks as sentry-cli does: multipart parts file_gzip (or
// file), each named by the chunk's SHA-1.
func smChunks(t testing.TB, b *testBundle, token, org string, gzipped bool, chunks map[string][]byte) (int, map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for name, data := range chunks {
		field := "file"
		if gzipped {
			field, data = "file_gzip", gz(data)
		}
		w, _ := mw.CreateFormFile(field, name)
		w.Write(data)
	}
	mw.Close()
	return smAPI(t, b, token, "POST", "/api/0/organizations/"+org+"/chunk-upload/", &buf, mw.FormDataContentType())
}

// smUpload runs sentry-cli's sequence: options, assemble (which names the
// missing chunks), the chunks, assemble again until ok.
func smUpload(t testing.TB, b *testBundle, token, org, project, release string, bundle []byte) {
	t.Helper()
	st, opts := smAPI(t, b, token, "GET", "/api/0/organizations/"+org+"/chunk-upload/", nil, "")
	if st != http.StatusOK || opts["hashAlgorithm"] != "sha1" || !strings.HasSuffix(opts["url"].(string), "/api/0/organizations/"+org+"/chunk-upload/") {
		t.Fatalf("options: %d %v", st, opts)
	}
	size := int(opts["chunkSize"].(float64))
	chunks := map[string][]byte{}
	var names []string
	for off := 0; off < len(bundle); off += size {
		c := bundle[off:min(off+size, len(bundle))]
		chunks[sha1hex(c)] = c
		names = append(names, sha1hex(c))
	}
	req := map[string]any{"checksum": sha1hex(bundle), "chunks": names, "projects": []string{project}, "version": release}
	st, a := smAssemble(t, b, token, org, req)
	if st != http.StatusOK || a["state"] != "not_found" || len(a["missingChunks"].([]any)) != len(chunks) {
		t.Fatalf("first assemble: %d %v", st, a)
	}
	if st, out := smChunks(t, b, token, org, true, chunks); st != http.StatusOK {
		t.Fatalf("chunks: %d %v", st, out)
	}
	if st, a = smAssemble(t, b, token, org, req); st != http.StatusOK || a["state"] != "ok" {
		t.Fatalf("assemble: %d %v", st, a)
	}
}

// smMultipart posts the private API's plain upload.
func smMultipart(t testing.TB, b *testBundle, token, projectID string, fields map[string]string, files map[string][]byte) (int, map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		mw.WriteField(k, v)
	}
	for name, data := range files {
		w, _ := mw.CreateFormFile("files", name)
		w.Write(data)
	}
	mw.Close()
	return smAPI(t, b, token, "POST", "/api/private/projects/"+projectID+"/sourcemaps", &buf, mw.FormDataContentType())
}

func (b *testBundle) smCounts(t testing.TB) (bundles, files, blobs, chunks int) {
	t.Helper()
	ctx := context.Background()
	for q, dst := range map[string]*int{"sourcemap_bundles": &bundles, "sourcemap_files": &files, "sourcemap_blobs": &blobs, "sourcemap_chunks": &chunks} {
		if err := b.db.Bun.NewRaw("SELECT count(*) FROM "+q).Scan(ctx, dst); err != nil {
			t.Fatal(err)
		}
	}
	return
}

// build1Bundle is build 1 as sentry-cli uploads it (no debug ids).
func build1Bundle(t testing.TB) []byte {
	return smZip(t, map[string]string{"org": "acme", "release": "shop@1"},
		smEntry{url: "~/assets/app.js", kind: "minified_source", headers: map[string]string{"Sourcemap": "app.js.map"}, data: smRead(t, "build1/app.js")},
		smEntry{url: "~/assets/app.js.map", kind: "source_map", data: smRead(t, "build1/app.js.map")})
}

// smFrames are Sentry frames, outermost first, as the browser SDK sends
// them for the fixture's fault (testdata/README.md).
func smFrames(line int, fns ...string) []any {
	cols := []int{207, 135, 83}
	out := []any{}
	for i, fn := range fns {
		out = append(out, map[string]any{"filename": "http://shop.test/assets/app.js", "abs_path": "http://shop.test/assets/app.js",
			"function": fn, "lineno": line, "colno": cols[i], "in_app": true})
	}
	return out
}

func smEvent(id, release string, frames []any, debugID string) []byte {
	return sentryEvent(id, func(m map[string]any) {
		m["platform"] = "javascript"
		m["release"] = release
		m["sdk"] = map[string]any{"name": "sentry.javascript.browser", "version": "11.12.0"}
		m["exception"] = map[string]any{"values": []any{map[string]any{"type": "TypeError",
			"value": "Cannot read properties of undefined (reading 'items')", "stacktrace": map[string]any{"frames": frames}}}}
		if debugID != "" {
			m["debug_meta"] = map[string]any{"images": []any{map[string]any{"type": "sourcemap", "debug_id": debugID, "code_file": "http://shop.test/assets/app.js"}}}
		}
	})
}

type smFrame struct {
	File          string `json:"file"`
	Line          int    `json:"line"`
	Colno         int    `json:"colno"`
	Function      string `json:"function"`
	ContextCode   string `json:"context_code"`
	InApp         bool   `json:"in_app"`
	Symbolication *struct {
		Raw *struct {
			File     string `json:"file"`
			Line     int    `json:"line"`
			Colno    int    `json:"colno"`
			Function string `json:"function"`
		} `json:"raw"`
		PreContext []string `json:"pre_context"`
		Mapping    string   `json:"mapping"`
		Unmapped   string   `json:"unmapped"`
	} `json:"symbolication"`
}

// smIncidents are the project's incidents: id, title, event count.
func (s *sentryFix) smIncidents(t testing.TB) []struct {
	ID         string `bun:"id"`
	Title      string `bun:"title"`
	EventCount int    `bun:"event_count"`
} {
	t.Helper()
	var rows []struct {
		ID         string `bun:"id"`
		Title      string `bun:"title"`
		EventCount int    `bun:"event_count"`
	}
	if err := s.db.Bun.NewRaw(`SELECT id::text, title, event_count FROM incidents WHERE project_id = ? ORDER BY created_at`, s.projectID).
		Scan(context.Background(), &rows); err != nil {
		t.Fatal(err)
	}
	return rows
}

func (s *sentryFix) smLatestFrames(t testing.TB, incidentID string) []smFrame {
	t.Helper()
	req, _ := http.NewRequest("GET", s.srv.URL+"/api/private/incidents/"+incidentID, nil)
	req.Header.Set("Authorization", "Bearer "+s.owner.Token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var d struct {
		Latest struct {
			Exception struct {
				Stacktrace []smFrame `json:"stacktrace"`
			} `json:"exception"`
		} `json:"latest_event"`
	}
	if err := json.NewDecoder(res.Body).Decode(&d); err != nil {
		t.Fatal(err)
	}
	return d.Latest.Exception.Stacktrace
}

// Build 1 uploaded through sentry-cli's endpoints (matched by release and
// ~/path), build 2 through the private API (matched by debug id): events
// of both, through the Sentry door and the native door, are mapped to
// src/cart.js:6 totalOf and land in ONE incident; the raw frame and the
// upload that mapped it are kept; an event before the maps stays raw with
// its reason.
func TestSourceMapsSymbolicateBothDoors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newSentryFix(t, b)

	// Before any upload: the frames stay as they came.
	early := hexID()
	if r := sentrySend(t, b.srv.URL, s.envPath(), envelope(`{}`, eventItem(smEvent(early, "shop@0", smFrames(1, "Object.i", "n", "c"), ""))), s.auth()...); r.Status != http.StatusOK {
		t.Fatalf("early event: %d %s", r.Status, r.Raw)
	}
	incs := s.smIncidents(t)
	if len(incs) != 1 {
		t.Fatalf("incidents after the early event: %+v", incs)
	}
	rawIncident := incs[0].ID
	if fr := s.smLatestFrames(t, rawIncident); len(fr) != 3 || fr[0].Function != "c" || fr[0].Symbolication != nil {
		t.Fatalf("the early event was changed: %+v", fr)
	}

	smUpload(t, b, b.owner.Token, "acme", "shop", "shop@1", build1Bundle(t))
	st, up := smMultipart(t, b, b.owner.Token, s.projectID, map[string]string{"release": "shop@2"},
		map[string][]byte{"assets/app.js": smRead(t, "build2/app.js"), "assets/app.js.map": smRead(t, "build2/app.js.map")})
	if st != http.StatusCreated || up["release"] != "shop@2" || up["files"].(float64) != 2 {
		t.Fatalf("multipart upload: %d %v", st, up)
	}

	// Build 1 through the Sentry door (release + ~/path).
	if r := sentrySend(t, b.srv.URL, s.envPath(), envelope(`{}`, eventItem(smEvent(hexID(), "shop@1", smFrames(1, "Object.i", "n", "c"), ""))), s.auth()...); r.Status != http.StatusOK {
		t.Fatalf("build 1 event: %d %s", r.Status, r.Raw)
	}
	// Build 2 (other names, another release) through the Sentry door, by
	// debug id.
	if r := sentrySend(t, b.srv.URL, s.envPath(), envelope(`{}`, eventItem(smEvent(hexID(), "shop@2", smFrames(3, "Object.c", "e", "i"),
		"43785377-708c-597d-8161-593481e684c9"))), s.auth()...); r.Status != http.StatusOK {
		t.Fatalf("build 2 event: %d %s", r.Status, r.Raw)
	}
	// Build 1 through the native door: the feed's frames, crash site first.
	native := ev(newID(), func(m map[string]any) {
		m["release"] = "shop@1"
		m["title"] = "TypeError: Cannot read properties of undefined (reading 'items')"
		m["exception"] = map[string]any{"type": "TypeError", "message": "Cannot read properties of undefined (reading 'items')",
			"stacktrace": []any{
				map[string]any{"file": "http://shop.test/assets/app.js", "line": 1, "colno": 83, "function": "c", "in_app": true},
				map[string]any{"file": "http://shop.test/assets/app.js", "line": 1, "colno": 135, "function": "n", "in_app": true},
				map[string]any{"file": "http://shop.test/assets/app.js", "line": 1, "colno": 207, "function": "i", "in_app": true}}}
	})
	if st, out := b.api(t, s.token, "POST", "/api/feed/events", native); st != http.StatusAccepted {
		t.Fatalf("native event: %d %v", st, out)
	}

	incs = s.smIncidents(t)
	if len(incs) != 2 || incs[0].ID != rawIncident || incs[1].EventCount != 3 {
		t.Fatalf("want the raw incident and ONE mapped incident of 3 events, got %+v", incs)
	}
	fr := s.smLatestFrames(t, incs[1].ID)
	want := []struct {
		file, fn string
		line     int
	}{{"src/cart.js", "totalOf", 6}, {"src/cart.js", "renderCart", 13}, {"src/app.js", "checkout", 5}}
	if len(fr) != 3 {
		t.Fatalf("frames: %+v", fr)
	}
	for i, w := range want {
		f := fr[i]
		if f.File != w.file || f.Function != w.fn || f.Line != w.line || !f.InApp || f.Symbolication == nil || f.Symbolication.Raw == nil ||
			f.Symbolication.Raw.File != "http://shop.test/assets/app.js" || f.Symbolication.Mapping == "" {
			t.Errorf("frame %d: %+v %+v, want %s:%d %s", i, f, f.Symbolication, w.file, w.line, w.fn)
		}
	}
	if !strings.Contains(fr[0].ContextCode, "cart.items") || len(fr[0].Symbolication.PreContext) == 0 {
		t.Errorf("context of the crash site: %q %v", fr[0].ContextCode, fr[0].Symbolication.PreContext)
	}

	// A repair run is handed the original frames: its input is the stored
	// event, symbolicated before it was stored (docs/sourcemap.md).
	mapped := uuid.MustParse(incs[1].ID)
	_, input, err := b.services.Incidents.RepairInputFor(context.Background(), &run.Run{OrgID: b.owner.OrgID, IncidentID: &mapped})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"file": "src/cart.js"`, `"function": "totalOf"`, "cart.items"} {
		if !strings.Contains(string(input), want) {
			t.Errorf("the repair input lacks %q:\n%s", want, input)
		}
	}

	// A release with no maps: raw frames, each with its reason; never a
	// refusal.
	if r := sentrySend(t, b.srv.URL, s.envPath(), envelope(`{}`, eventItem(smEvent(hexID(), "shop@9", smFrames(1, "Object.i", "n", "c"), ""))), s.auth()...); r.Status != http.StatusOK {
		t.Fatalf("unmapped event: %d %s", r.Status, r.Raw)
	}
	// The page: original frames with their context as code, the minified
	// frame one click away with the upload that mapped it; the unmapped
	// event says why and that later events are mapped.
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	_, page := br.get("/incidents/" + incs[1].ID)
	for _, want := range []string{`data-testid="frame-function">totalOf<`, `data-testid="frame-file">src/cart.js<`, `data-testid="frame-context"`,
		"for (const item of cart.items) {", `data-testid="raw-frame"`, "c at http://shop.test/assets/app.js:1:83", `data-testid="frame-mapping">mapped by ~/assets/app.js.map`} {
		if !strings.Contains(page, want) {
			t.Errorf("the mapped incident's page lacks %q", want)
		}
	}
	// A mapped frame reads src/cart.js:6 (or :6:5) — no space between file, line
	// and column.
	if !regexp.MustCompile(`data-testid="frame-location"><span data-testid="frame-file">src/cart\.js</span>:[0-9]+(:[0-9]+)?</span>`).MatchString(page) {
		t.Error("a mapped frame does not read src/cart.js:line:column")
	}
	_, page = br.get("/incidents/" + rawIncident)
	for _, want := range []string{`data-testid="frames-note"`, `data-testid="frame-unmapped">not mapped: no source map for ~/assets/app.js in release shop@9`} {
		if !strings.Contains(page, want) {
			t.Errorf("the raw incident's page lacks %q", want)
		}
	}

	fr = s.smLatestFrames(t, rawIncident)
	if fr[0].Function != "c" || fr[0].Symbolication == nil || !strings.Contains(fr[0].Symbolication.Unmapped, "no source map for ~/assets/app.js in release shop@9") {
		t.Fatalf("unmapped frame: %+v %+v", fr[0], fr[0].Symbolication)
	}
}

// Every refusal of an upload has its status and code and stores nothing.
func TestSourceMapUploadRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if st, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("shop")); st != http.StatusCreated {
		t.Fatalf("project: %d %v", st, p)
	}
	viewer, _ := b.person(t, domain.RoleViewer)
	member, _ := b.person(t, domain.RoleMember)
	other, err := b.accounts.Bootstrap(context.Background(), "globex", "owner@globex.test", testPassword)
	if err != nil {
		t.Fatal(err)
	}
	good := build1Bundle(t)
	goodReq := map[string]any{"checksum": sha1hex(good), "chunks": []string{sha1hex(good)}, "projects": []string{"shop"}, "version": "shop@1"}

	// A bomb: 64 MiB of one byte, deflated to a few kilobytes.
	var bomb bytes.Buffer
	zw := zip.NewWriter(&bomb)
	w, _ := zw.Create("files/_/_/assets/app.js.map")
	zeros := make([]byte, 1<<20)
	for range 64 {
		w.Write(zeros)
	}
	m, _ := zw.Create("manifest.json")
	m.Write([]byte(`{"files":{"files/_/_/assets/app.js.map":{"url":"~/assets/app.js.map","type":"source_map"}}}`))
	zw.Close()
	bombZip := bomb.Bytes()

	// A file over ANVIL_SOURCEMAP_MAX_FILE (16 MiB by default): 17 MiB of
	// varied text, which no ratio check mistakes for a bomb.
	big := make([]byte, 17<<20)
	for i := range big {
		big[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[(i*7+i/13)%36]
	}

	cases := []struct {
		name   string
		do     func() (int, map[string]any)
		status int
		code   string
	}{
		{"chunk checksum mismatch", func() (int, map[string]any) {
			return smChunks(t, b, b.owner.Token, "acme", true, map[string][]byte{sha1hex([]byte("other bytes")): []byte("these bytes")})
		}, http.StatusUnprocessableEntity, "chunk_checksum_mismatch"},
		{"assemble naming chunks never sent", func() (int, map[string]any) {
			st, out := smAssemble(t, b, b.owner.Token, "acme", goodReq)
			if st == http.StatusOK && out["state"] == "not_found" && strings.HasPrefix(out["detail"].(string), "missing_chunks:") {
				return http.StatusOK, map[string]any{"code": "missing_chunks"}
			}
			return st, out
		}, http.StatusOK, "missing_chunks"},
		{"zip bomb", func() (int, map[string]any) {
			smChunks(t, b, b.owner.Token, "acme", false, map[string][]byte{sha1hex(bombZip): bombZip})
			return smAssemble(t, b, b.owner.Token, "acme", map[string]any{"checksum": sha1hex(bombZip), "chunks": []string{sha1hex(bombZip)}, "projects": []string{"shop"}})
		}, http.StatusUnprocessableEntity, "zip_bomb"},
		{"a file over the limit", func() (int, map[string]any) {
			_, p := b.api(t, b.owner.Token, "GET", "/api/private/projects", nil)
			id := p["projects"].([]any)[0].(map[string]any)["id"].(string)
			return smMultipart(t, b, b.owner.Token, id, map[string]string{"release": "shop@1"}, map[string][]byte{"assets/app.js.map": big})
		}, http.StatusRequestEntityTooLarge, "file_too_large"},
		{"another organisation's slug", func() (int, map[string]any) {
			return smAPI(t, b, other.Token, "GET", "/api/0/organizations/acme/chunk-upload/", nil, "")
		}, http.StatusNotFound, "not_found"},
		{"another organisation's assemble", func() (int, map[string]any) { return smAssemble(t, b, other.Token, "acme", goodReq) }, http.StatusNotFound, "not_found"},
		{"a project the token cannot see", func() (int, map[string]any) {
			return smAssemble(t, b, other.Token, "globex", map[string]any{"checksum": sha1hex(good), "chunks": []string{sha1hex(good)}, "projects": []string{"shop"}})
		}, http.StatusNotFound, "not_found"},
		{"a viewer's token", func() (int, map[string]any) { return smAssemble(t, b, viewer, "acme", goodReq) }, http.StatusForbidden, "forbidden"},
		{"a viewer's chunks", func() (int, map[string]any) {
			return smChunks(t, b, viewer, "acme", true, map[string][]byte{sha1hex(good): good})
		}, http.StatusForbidden, "forbidden"},
		{"no token", func() (int, map[string]any) {
			return smAPI(t, b, "", "GET", "/api/0/organizations/acme/chunk-upload/", nil, "")
		}, http.StatusUnauthorized, "unauthorized"},
		{"a release missing", func() (int, map[string]any) {
			_, p := b.api(t, member, "GET", "/api/private/projects", nil)
			id := p["projects"].([]any)[0].(map[string]any)["id"].(string)
			return smMultipart(t, b, member, id, nil, map[string][]byte{"assets/app.js": []byte("x")})
		}, http.StatusUnprocessableEntity, "release_required"},
	}
	for _, c := range cases {
		st, out := c.do()
		if st != c.status || out["code"] != c.code && out["error"] != c.code {
			t.Errorf("%s: %d %v, want %d %s", c.name, st, out, c.status, c.code)
		}
		if bundles, files, blobs, _ := b.smCounts(t); bundles+files+blobs != 0 {
			t.Fatalf("%s stored something: %d bundles, %d files, %d blobs", c.name, bundles, files, blobs)
		}
	}
	if _, _, _, chunks := b.smCounts(t); chunks != 0 {
		t.Errorf("%d chunks left behind by refused bundles", chunks)
	}

	// The project limit: a second upload that would pass it is refused
	// whole; the first stays.
	b2 := setupFull(t, testOptions(), func() (o wiring.Options) {
		o = testDomainOptions()
		o.SourceMapLimits.Project = 2000
		return o
	}())
	if st, p := b2.api(t, b2.owner.Token, "POST", "/api/private/projects", validProject("shop")); st != http.StatusCreated {
		t.Fatalf("project: %d %v", st, p)
	}
	smUpload(t, b2, b2.owner.Token, "acme", "shop", "shop@1", build1Bundle(t))
	_, p := b2.api(t, b2.owner.Token, "GET", "/api/private/projects", nil)
	id := p["projects"].([]any)[0].(map[string]any)["id"].(string)
	st, out := smMultipart(t, b2, b2.owner.Token, id, map[string]string{"release": "shop@2"},
		map[string][]byte{"assets/app.js": smRead(t, "build2/app.js"), "assets/app.js.map": smRead(t, "build2/app.js.map")})
	if st != http.StatusRequestEntityTooLarge || out["error"] != "project_over_limit" {
		t.Fatalf("over the project limit: %d %v", st, out)
	}
	if bundles, files, blobs, _ := b2.smCounts(t); bundles != 1 || files != 2 || blobs != 2 {
		t.Fatalf("after the refusal: %d bundles, %d files, %d blobs", bundles, files, blobs)
	}
	// The same bundle again is ok at once (sentry-cli then sends no
	// chunk) and stored once: deduplicated by checksum.
	again := build1Bundle(t)
	if st, a := smAssemble(t, b2, b2.owner.Token, "acme", map[string]any{"checksum": sha1hex(again), "chunks": []string{sha1hex(again)},
		"projects": []string{"shop"}}); st != http.StatusOK || a["state"] != "ok" {
		t.Fatalf("the same bundle again: %d %v", st, a)
	}
	if bundles, _, _, _ := b2.smCounts(t); bundles != 1 {
		t.Fatalf("the same bundle twice: %d bundles", bundles)
	}
}

// Retention keeps an upload while its release may still send events (it
// mapped a frame, or was uploaded, within the events retention) and then
// removes it with the contents no other upload names.
func TestSourceMapRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if st, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("shop")); st != http.StatusCreated {
		t.Fatalf("project: %d %v", st, p)
	}
	smUpload(t, b, b.owner.Token, "acme", "shop", "shop@1", build1Bundle(t))
	ctx := context.Background()
	if _, err := b.services.Retention.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if bundles, files, blobs, _ := b.smCounts(t); bundles != 1 || files != 2 || blobs != 2 {
		t.Fatalf("a fresh upload was removed: %d %d %d", bundles, files, blobs)
	}
	// The retention page shows what the project's uploads hold.
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	if _, page := br.get("/settings/retention"); !strings.Contains(page, `data-testid="project-sourcemap-bytes">1.5 KB<`) &&
		!strings.Contains(page, `data-testid="project-sourcemap-bytes">1.5 KiB<`) {
		i := strings.Index(page, "project-sourcemap-bytes")
		t.Errorf("the retention page's source-map size: %q", page[max(i, 0):min(i+80, len(page))])
	}
	if _, err := b.db.Bun.NewRaw(`UPDATE sourcemap_bundles SET created_at = now() - interval '91 days', last_used_at = now() - interval '91 days'`).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.services.Retention.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if bundles, files, blobs, _ := b.smCounts(t); bundles+files+blobs != 0 {
		t.Fatalf("an upload unused for longer than the events retention stayed: %d %d %d", bundles, files, blobs)
	}
}

// FuzzSourceMapUploadHTTP: whatever bytes arrive as a file of the plain
// upload, as a chunk that is then assembled, or as a whole chunk-upload
// body, the answer is never a 5xx (docs/sourcemap.md: never a panic, never a 5xx;
// the bundle reader and the frame mapper have their own fuzzers in
// domain/sourcemap).
func FuzzSourceMapUploadHTTP(f *testing.F) {
	b := setupWith(f, testOptions())
	s := newSentryFix(f, b)
	f.Add(build1Bundle(f))
	f.Add(smRead(f, "build2/app.js.map"))
	f.Add([]byte(`{"version":3,"sources":["a.js"],"mappings":";;;;AAAA,CAAC,CAAC"}`))
	f.Add([]byte("PK\x03\x04garbage"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(what string, st int, out map[string]any) {
			if st >= 500 {
				t.Fatalf("%s: %d %v", what, st, out)
			}
		}
		st, out := smMultipart(t, b, b.owner.Token, s.projectID, map[string]string{"release": "fuzz@1"},
			map[string][]byte{"assets/app.js.map": data, "assets/app.js": data})
		check("multipart", st, out)
		sum := sha1hex(data)
		st, out = smChunks(t, b, b.owner.Token, "acme", false, map[string][]byte{sum: data})
		check("chunk", st, out)
		st, out = smAssemble(t, b, b.owner.Token, "acme", map[string]any{"checksum": sum, "chunks": []string{sum}, "projects": []string{"shop"}, "version": "fuzz@2"})
		check("assemble", st, out)
		st, out = smAPI(t, b, b.owner.Token, "POST", "/api/0/organizations/acme/chunk-upload/", bytes.NewReader(data), "multipart/form-data; boundary=x")
		check("raw chunk-upload body", st, out)
	})
}

// The chunk-upload options name ANVIL_PUBLIC_URL, never the request's Host:
// sentry-cli sends its chunks, with its token, wherever they point.
func TestChunkOptionsNameThePublicURL(t *testing.T) {
	t.Parallel()
	for _, public := range []string{"https://anvil.example/sub", ""} {
		opts := testOptions()
		opts.PublicURL = public
		b := setupWith(t, opts)
		req, _ := http.NewRequest("GET", b.srv.URL+"/api/0/organizations/acme/chunk-upload/", nil)
		req.Host = "evil.test"
		req.Header.Set("X-Forwarded-Host", "evil.test")
		req.Header.Set("Authorization", "Bearer "+b.owner.Token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		_ = json.NewDecoder(res.Body).Decode(&out)
		res.Body.Close()
		u, _ := out["url"].(string)
		if res.StatusCode != http.StatusOK || strings.Contains(u, "evil") || u != public+"/api/0/organizations/acme/chunk-upload/" {
			t.Fatalf("public URL %q: %d, url %q", public, res.StatusCode, u)
		}
	}
}

// A frame that was never mapped (no map uploaded yet) keeps its column on
// the incident page: bundle.js:line:column.
func TestUnmappedFramesKeepTheirColumn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newSentryFix(t, b)
	if r := sentrySend(t, b.srv.URL, s.envPath(), envelope(`{}`, eventItem(smEvent(hexID(), "shop@0", smFrames(15, "Object.i", "n", "c"), ""))), s.auth()...); r.Status != http.StatusOK {
		t.Fatalf("event: %d %s", r.Status, r.Raw)
	}
	incs := s.smIncidents(t)
	if len(incs) != 1 {
		t.Fatalf("incidents: %+v", incs)
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	_, page := br.get("/incidents/" + incs[0].ID)
	// Each frame, in the stack and in the diagnosis, reads file:line:column.
	for _, col := range []string{"83", "135", "207"} {
		re := regexp.MustCompile(`data-testid="frame-location">(<span data-testid="frame-file">)?http://shop\.test/assets/app\.js(</span>)?:15:` + col + `</span>`)
		if n := len(re.FindAllString(page, -1)); n < 1 {
			t.Errorf("no frame reads app.js:15:%s", col)
		}
	}
	if strings.Contains(page, `app.js</span>:15</span>`) {
		t.Error("a frame lost its column")
	}
}

// Frames before any source map say why and how to upload; once maps
// exist, the incident page offers to map the latest events again, which
// a River job does, keeping the incident.
func TestReprocessFromTheIncidentPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := newSentryFix(t, b)
	if r := sentrySend(t, b.srv.URL, s.envPath(), envelope(`{}`, eventItem(smEvent(hexID(), "shop@1", smFrames(1, "Object.i", "n", "c"), ""))), s.auth()...); r.Status != http.StatusOK {
		t.Fatalf("event: %d %s", r.Status, r.Raw)
	}
	incs := s.smIncidents(t)
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	_, page := br.get("/incidents/" + incs[0].ID)
	if !strings.Contains(page, "no source map has been uploaded to this project yet") || !strings.Contains(page, "sentry-cli sourcemaps upload --release shop@1 dist/") ||
		strings.Contains(page, `data-testid="reprocess"`) {
		t.Fatal("before any upload the page does not say how to upload, or offers a re-process")
	}
	smUpload(t, b, b.owner.Token, "acme", "shop", "shop@1", build1Bundle(t))
	tok := br.csrf("/incidents/" + incs[0].ID)
	_, page = br.get("/incidents/" + incs[0].ID)
	if !strings.Contains(page, `data-testid="reprocess"`) {
		t.Fatal("no re-process offered once maps exist")
	}
	res, _ := br.post("/incidents/"+incs[0].ID+"/reprocess", url.Values{"_csrf": {tok}})
	if res.StatusCode != http.StatusSeeOther || !strings.HasSuffix(res.Header.Get("Location"), "?reprocess=queued") {
		t.Fatalf("reprocess: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	var jobs int
	if err := b.db.Bun.NewRaw(`SELECT count(*) FROM river_job WHERE kind = 'reprocess_events'`).Scan(context.Background(), &jobs); err != nil || jobs != 1 {
		t.Fatalf("%d jobs: %v", jobs, err)
	}
	// The job's work.
	id, _ := uuid.Parse(incs[0].ID)
	if n, err := b.feed.Reprocess(context.Background(), id); err != nil || n != 1 {
		t.Fatalf("reprocess: %d %v", n, err)
	}
	if fr := s.smLatestFrames(t, incs[0].ID); len(fr) != 3 || fr[0].File != "src/cart.js" {
		t.Fatalf("latest frames after re-processing: %+v", fr)
	}
	if after := s.smIncidents(t); len(after) != 1 || after[0].ID != incs[0].ID {
		t.Fatalf("incidents after re-processing: %+v", after)
	}
}
