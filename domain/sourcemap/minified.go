package sourcemap

import (
	"path"
	"regexp"
	"strings"

	"anvil/domain/event"
)

// farColumn and longLine: hand-written source rarely reaches either; a
// bundler's output (one long line per chunk) always does.
const (
	farColumn = 200
	longLine  = 500
)

// hashedChunk is a bundler's output name: app.3f9a1c2b.js, chunk-5XQ2ZJ7K.js,
// index-Bq2Ae1x9.mjs (a hash of 8 or more characters before the extension).
var hashedChunk = regexp.MustCompile(`[.-][0-9A-Za-z_]{8,}\.(?:m|c)?js$`)

// LooksMinified tells whether a frame looks like a bundler's or a
// minifier's output, the frames a source map exists for (docs/sourcemap.md,
// "Which frames"): it has a line and a column, and it was loaded by a
// browser (an http(s) URL or the `~/` form, or an event that names a
// browser), or its name says so (`.min.js`, a hashed chunk, a bundle), or
// its column sits far right or its line is long, or the event's debug ids
// name its file. A server's own file (`/srv/app/cart.js:3:21` from Node
// or the OpenTelemetry door) is none of these: no note about source maps
// is shown for it, and no map is looked up.
func LooksMinified(ev *event.Event, f *event.Frame) bool {
	if f == nil || f.Line <= 0 || f.Colno <= 0 {
		return false
	}
	file := frameURL(f)
	lower := strings.ToLower(file)
	switch {
	case strings.HasPrefix(lower, "http://"), strings.HasPrefix(lower, "https://"), strings.HasPrefix(lower, "~/"):
		return true
	case ev != nil && ev.Browser != nil && ev.Browser.Name != "":
		return true
	case f.Colno > farColumn, len(f.ContextCode) > longLine:
		return true
	}
	base := path.Base(lower)
	if strings.Contains(base, ".min.") || strings.Contains(base, "bundle") || strings.HasPrefix(base, "chunk") ||
		hashedChunk.MatchString(path.Base(file)) {
		return true
	}
	if ev != nil && ev.DebugMeta != nil {
		for _, im := range ev.DebugMeta.Images {
			if im.Type == "sourcemap" && im.DebugID != "" && sameFile(im.CodeFile, file) {
				return true
			}
		}
	}
	return false
}
