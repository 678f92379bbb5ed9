package main

// Source maps' figures (docs/sourcemap.md): events with 20 minified frames
// through the Sentry door with a 5 MB map in the cache, against the same
// events without columns (nothing to map), in the same run; and the upload
// of a 20 MB build of 100 files with the real sentry-cli.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

func init() {
	register("sourcemaps/symbolicate", sourceMapBench)
	register("sourcemaps/upload", sourceMapUploadBench)
}

const (
	smBenchSenders  = 4
	smBenchRequests = 200
	smBenchFns      = 20000 // functions of the generated bundle, one mapping each
)

// vlq appends a source-map base64 VLQ.
func vlq(b []byte, v int) []byte {
	const chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	u := v << 1
	if v < 0 {
		u = (-v << 1) | 1
	}
	for {
		d := u & 31
		u >>= 5
		if u > 0 {
			d |= 32
		}
		b = append(b, chars[d])
		if u == 0 {
			return b
		}
	}
}

// bigMap is a one-line minified bundle's map of about 5 MB: smBenchFns
// functions at columns 40·k, each from its own line of one of 100 sources
// whose text rides in sourcesContent.
func bigMap() []byte {
	const files = 100
	sources := make([]string, files)
	contents := make([]string, files)
	perFile := smBenchFns / files
	for f := range files {
		sources[f] = fmt.Sprintf("../src/mod%d.js", f)
		var sb strings.Builder
		for l := range perFile {
			fmt.Fprintf(&sb, "export function handler%d_%d(order) { return order.items.map((i) => i.price * i.qty).reduce((a, b) => a + b, 0); } // the order's total, in cents, before any discount, coupon or tax is applied to it at checkout\n", f, l)
		}
		contents[f] = sb.String()
	}
	var mappings []byte
	prevCol, prevSrc, prevLine := 0, 0, 0
	for k := range smBenchFns {
		if k > 0 {
			mappings = append(mappings, ',')
		}
		src, line := k%files, k/files
		mappings = vlq(mappings, 40*k-prevCol)
		mappings = vlq(mappings, src-prevSrc)
		mappings = vlq(mappings, line-prevLine)
		mappings = vlq(mappings, 0)
		prevCol, prevSrc, prevLine = 40*k, src, line
	}
	m, _ := json.Marshal(map[string]any{"version": 3, "sources": sources, "sourcesContent": contents, "names": []string{}, "mappings": string(mappings)})
	return m
}

// smBenchEvent is a browser SDK's event with 20 frames in the big bundle;
// without columns nothing is minified and nothing is mapped.
func smBenchEvent(i int, columns bool) []byte {
	frames := make([]any, 20)
	for f := range frames {
		fr := map[string]any{"filename": "https://shop.example/assets/big.js", "abs_path": "https://shop.example/assets/big.js",
			"function": fmt.Sprintf("t%d", f), "lineno": 1, "in_app": true}
		if columns {
			fr["colno"] = 40*((i*20+f*997)%smBenchFns) + 1
		}
		frames[f] = fr
	}
	ev, _ := json.Marshal(map[string]any{"event_id": strings.ReplaceAll(uuid.NewString(), "-", ""), "platform": "javascript", "level": "error",
		"release": "bench@1", "environment": "production", "sdk": map[string]any{"name": "sentry.javascript.browser", "version": "11.12.0"},
		"exception": map[string]any{"values": []any{map[string]any{"type": fmt.Sprintf("TypeError%d", i%10), "value": "Cannot read properties of undefined",
			"stacktrace": map[string]any{"frames": frames}}}}})
	return []byte(fmt.Sprintf("{}\n{\"type\":\"event\",\"length\":%d}\n%s\n", len(ev), ev))
}

func sourceMapBench(ctx context.Context, env *benchEnv) error {
	f, err := env.newFeedFixture(ctx, "bench@sourcemaps.test", 2*smBenchSenders)
	if err != nil {
		return err
	}
	defer f.Stop()
	mapData := bigMap()
	env.note("sourcemaps", "map_bytes", float64(len(mapData)))
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	if err := writeBenchUpload(mw, mapData); err != nil {
		return err
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", f.Server.URL+"/api/private/projects/"+f.ProjectID+"/sourcemaps", &body)
	req.Header.Set("Authorization", "Bearer "+f.PAT)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		return fmt.Errorf("upload: %d", res.StatusCode)
	}
	url := f.Server.URL + "/api/" + strconv.FormatInt(f.ProjectNumber, 10) + "/envelope/"
	post := func(columns bool, key string, i int) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(smBenchEvent(i, columns)))
		req.Header.Set("X-Sentry-Auth", "Sentry sentry_version=7, sentry_client=sentry.javascript.browser/11.12.0, sentry_key="+key)
		return sentryBenchDo(f.Client, req, `{"id":"`)
	}
	plain, err := f.Load(ctx, smBenchSenders, smBenchRequests, func(s, r int) (int, error) { return post(false, f.Tokens[s], s*10000+r) })
	if err != nil {
		return fmt.Errorf("without maps: %w", err)
	}
	mapped, err := f.Load(ctx, smBenchSenders, smBenchRequests, func(s, r int) (int, error) {
		return post(true, f.Tokens[smBenchSenders+s], s*10000+r)
	})
	if err != nil {
		return fmt.Errorf("with maps: %w", err)
	}
	env.note("sourcemaps", "without_maps_events_per_s", float64(int(plain.PerSecond())))
	env.note("sourcemaps", "without_maps_p99_ms", ms(percentile(plain.Latencies, 99)))
	env.note("sourcemaps", "mapped_events_per_s", float64(int(mapped.PerSecond())))
	env.reportAtLeast("sourcemaps", "mapped_to_unmapped_ratio", float64(int(mapped.PerSecond()/plain.PerSecond()*100))/100, 0.5)
	env.report("sourcemaps", "mapped_p99_ms", ms(percentile(mapped.Latencies, 99)), 20)
	return nil
}

// sourceMapUploadBench uploads a 20 MB build of 100 files (50 bundles and
// their maps) with the real sentry-cli from node_modules.
func sourceMapUploadBench(ctx context.Context, env *benchEnv) error {
	f, err := env.newFeedFixture(ctx, "bench@upload.test", 1)
	if err != nil {
		return err
	}
	defer f.Stop()
	dir, err := os.MkdirTemp("", "anvil-bench-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for i := range 50 {
		var js, src strings.Builder
		for js.Len() < 200<<10 {
			fmt.Fprintf(&js, "function f%d_%d(a){return a.b%d}", i, js.Len(), js.Len())
			fmt.Fprintf(&src, "export function handler%d(order) { return order.total%d; }\n", js.Len(), js.Len())
		}
		fmt.Fprintf(&js, "\n//# sourceMappingURL=chunk%d.js.map\n", i)
		m, _ := json.Marshal(map[string]any{"version": 3, "sources": []string{fmt.Sprintf("../src/chunk%d.js", i)}, "sourcesContent": []string{src.String()},
			"names": []string{}, "mappings": strings.Repeat("AAAA,", 10000) + "AAAA"})
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("chunk%d.js", i)), []byte(js.String()), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("chunk%d.js.map", i)), m, 0o644); err != nil {
			return err
		}
	}
	cli, _ := filepath.Abs("node_modules/.bin/sentry-cli")
	cmd := exec.CommandContext(ctx, cli, "sourcemaps", "upload", "--release", "bench@1", dir)
	cmd.Env = append(os.Environ(), "SENTRY_URL="+f.Server.URL, "SENTRY_AUTH_TOKEN="+f.PAT, "SENTRY_ORG=bench", "SENTRY_PROJECT=shop",
		"SENTRY_LOAD_DOTENV=0", "SENTRY_DISABLE_UPDATE_CHECK=true", "SENTRY_NO_PROGRESS_BAR=1")
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("sentry-cli: %w\n%s", err, out)
	}
	env.report("sourcemaps", "upload_20mb_100_files_s", time.Since(start).Seconds(), 10)
	return nil
}

// writeBenchUpload writes the bench's one release of a minified file and
// its map as the multipart upload's fields.
func writeBenchUpload(mw *multipart.Writer, mapData []byte) error {
	if err := mw.WriteField("release", "bench@1"); err != nil {
		return err
	}
	w, err := mw.CreateFormFile("files", "assets/big.js")
	if err != nil {
		return err
	}
	if _, err := w.Write([]byte(strings.Repeat("function a(){}", 100) + "\n//# sourceMappingURL=big.js.map\n")); err != nil {
		return err
	}
	if w, err = mw.CreateFormFile("files", "assets/big.js.map"); err != nil {
		return err
	}
	if _, err := w.Write(mapData); err != nil {
		return err
	}
	return mw.Close()
}
