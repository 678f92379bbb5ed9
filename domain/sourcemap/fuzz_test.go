package sourcemap

import (
	"archive/zip"
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"anvil/domain"
	"anvil/domain/event"
)

// zipOf is a bundle with a manifest naming each entry (test seeds).
func zipOf(t testing.TB, manifest string, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, data := range files {
		w, _ := zw.Create(name)
		w.Write(data)
	}
	if manifest != "" {
		w, _ := zw.Create("manifest.json")
		w.Write([]byte(manifest))
	}
	zw.Close()
	return buf.Bytes()
}

// FuzzReadBundle: whatever the bytes, ReadBundle returns a bundle within
// the limits or one of its refusals (a *domain.Error, never a panic): the
// web tier answers every refusal with its 4xx, so no input is a 5xx.
func FuzzReadBundle(f *testing.F) {
	mapData, _ := os.ReadFile("testdata/build1/app.js.map")
	jsData, _ := os.ReadFile("testdata/build1/app.js")
	f.Add(zipOf(f, `{"files":{"files/_/_/app.js":{"url":"~/app.js","type":"minified_source","headers":{"Sourcemap":"app.js.map"}},"files/_/_/app.js.map":{"url":"~/app.js.map","type":"source_map"}}}`,
		map[string][]byte{"files/_/_/app.js": jsData, "files/_/_/app.js.map": mapData}))
	f.Add(zipOf(f, `{"files":{"x":{"url":"~/x","type":"source_map"}}}`, map[string][]byte{"x": []byte("not json")}))
	f.Add(zipOf(f, `not a manifest`, nil))
	f.Add(zipOf(f, "", map[string][]byte{"a": []byte("a")}))
	f.Add([]byte("PK\x03\x04 broken"))
	f.Add([]byte{})
	lim := Limits{File: 1 << 20, Bundle: 4 << 20, Project: 8 << 20}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := ReadBundle(data, lim)
		if err != nil {
			var de *domain.Error
			if !errors.As(err, &de) || de.Code == "" {
				t.Fatalf("a refusal without a code: %v", err)
			}
			return
		}
		if b.Bytes > lim.Bundle || len(b.Files) == 0 {
			t.Fatalf("over the limits: %d bytes, %d files", b.Bytes, len(b.Files))
		}
		for _, fl := range b.Files {
			if int64(len(fl.Data)) > lim.File || fl.Checksum == "" {
				t.Fatalf("file %q: %d bytes, checksum %q", fl.URL, len(fl.Data), fl.Checksum)
			}
		}
	})
}

// FuzzMapFrame: a map of any bytes and a frame at any position parse,
// look up, read context and name the enclosing function without a panic,
// and what comes out is bounded.
func FuzzMapFrame(f *testing.F) {
	mapData, _ := os.ReadFile("testdata/build1/app.js.map")
	f.Add(mapData, 1, 83)
	f.Add(mapData, 1, 20544)
	f.Add(mapData, 7, 1)
	f.Add([]byte(`{"version":3,"sources":["a.js"],"sourcesContent":["function f() {\n  x.y\n}"],"names":["f"],"mappings":"AAAAA;AACA"}`), 2, 3)
	f.Add([]byte(`{"version":3,"sources":[],"names":[],"mappings":"AAAA,CAAC,QAAQ"}`), 1, 5)
	f.Add([]byte(`{"version":3,"sections":[{"offset":{"line":0,"column":0},"map":{"version":3,"sources":["a"],"mappings":"AAAA"}}]}`), 1, 1)
	f.Add([]byte(`{`), 1, 1)
	f.Add([]byte(`{"version":3,"sources":["a.js"],"sourcesContent":["`+strings.Repeat("{", 40000)+`"],"names":[],"mappings":"AAA+juC"}`), 1, 0)
	f.Fuzz(func(t *testing.T, data []byte, line, col int) {
		c, err := parse(data)
		if err != nil {
			return
		}
		pm := &parsedMap{c: c}
		src, _, oline, ocol, ok := lookup(c, line, col)
		if !ok {
			return
		}
		lines := pm.sourceLines(src)
		if _, walked := enclosingFunction(lines, oline, ocol); walked > walkLimit+2*headerWindow {
			t.Fatalf("walked %d bytes to name one function; at most %d", walked, walkLimit+2*headerWindow)
		}
		_ = cleanSource(src)
		if got := clipLine(src, event.MaxNameChars); len(got) > event.MaxNameChars+len("…") {
			t.Fatalf("clip %d", len(got))
		}
	})
}

// FuzzMapShape: whatever the bytes, the shape scan is linear (it looks at
// each byte a bounded number of times) and its counts bound what the
// library allocates for the mappings.
func FuzzMapShape(f *testing.F) {
	mapData, _ := os.ReadFile("testdata/build1/app.js.map")
	f.Add(mapData)
	f.Add([]byte(`{"mappings":";;;;;;;;,,,,A"}`))
	f.Add([]byte(`{"sections":[{"map":{"mappings":"AAAA;AACA"}},{"map":{"mappings" : "A,B"}}]}`))
	f.Add([]byte(`{"x":"\"mappings\":\"AAAA\"","mappings":"`))
	f.Fuzz(func(t *testing.T, data []byte) {
		sh := shapeOf(data)
		if sh.separators+sh.segments > int64(len(data)) || sh.lines > int64(len(data))/2+1 {
			t.Fatalf("shape %+v of %d bytes", sh, len(data))
		}
		// A map has at least one line, even an empty one: lineBytes
		// beyond the per-byte bound.
		if cost := mapCost(data, sh); cost < int64(len(data)) || cost > int64(len(data))*(mappingBytes+lineBytes+1)+lineBytes+mapOverhead {
			t.Fatalf("cost %d of %d bytes", cost, len(data))
		}
	})
}
