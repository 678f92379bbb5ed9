package sourcemap

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	gosourcemap "github.com/go-sourcemap/sourcemap"
	"github.com/google/uuid"

	"anvil/domain/event"
)

// contextLines is how many source lines are kept before and after a
// mapped frame's line.
const contextLines = 5

// maxLineChars bounds one context line (the feed's context_code bound).
const maxLineChars = event.MaxContextCodeChars

// The bounds of symbolication (docs/sourcemap.md, "Bounded and fast").
const (
	// DefaultBudget is how long one event's frames may take to map; the
	// frames not mapped by then leave the whole event as it came.
	DefaultBudget = 200 * time.Millisecond
	// loadWait bounds how long an event waits for a map being read and
	// parsed (once, for every event that needs it); the parse itself goes
	// on and fills the cache for the events after it.
	loadWait = 5 * time.Second
	// headerWindow is how much text before a `{` is read for a function's
	// header; walkLimit is how much source is walked back per frame.
	headerWindow = 200
	walkLimit    = 64 << 10
)

// Why a frame stayed as it came (event.Symbolication.UnmappedCode): the
// incident page says what to do about each.
const (
	UnmappedNoUploads  = "no_uploads"
	UnmappedNoRelease  = "no_release"
	UnmappedNoMap      = "no_map"
	UnmappedRefused    = "map_refused"
	UnmappedOutside    = "outside_map"
	UnmappedTransient  = "transient"
	transientNote      = "; the event is kept as it came, so it groups as every event whose maps could not be reached"
	storeUnreadableWhy = "the source map store could not be read"
)

// Stats are counters of the symbolication work of this process.
type Stats struct {
	// Parses is how many maps were parsed (cache misses that parsed).
	Parses int64
	// Walked is how many source bytes were walked back to name functions.
	Walked int64
	// CacheBytes is what the parsed maps' cache holds, charged.
	CacheBytes int64
	// OverBudget counts the events whose frames ran out of time.
	OverBudget int64
}

// Stats reads the counters.
func (m *Service) Stats() Stats {
	return Stats{Parses: m.cache.parses.Load(), Walked: m.walked.Load(), CacheBytes: m.cache.Bytes(), OverBudget: m.overBudget.Load()}
}

// Symbolicate maps the event's minified frames back to their original
// source, in place, before the feed fingerprints it (docs/sourcemap.md,
// "Symbolication"). A frame is minified when it looks so (LooksMinified); it is
// matched to a map by debug id first (debug_meta's images), else by the
// event's release and dist and the frame's URL by the `~/path` rule. A
// frame that cannot be mapped stays as it came, with the reason. It never
// fails: a fault in a map, the store or the library leaves the event as
// it came.
//
// Grouping never depends on a transient outcome (docs/sourcemap.md,
// "Transient failures"): the work runs detached from the request's
// cancellation, a store error or the budget running out is never cached,
// and when any frame could not be mapped for such a reason the whole
// event stays as it came — the raw fingerprint, the one every event gets
// whose maps could not be reached, never a mix of mapped and raw frames.
func (m *Service) Symbolicate(ctx context.Context, projectID uuid.UUID, ev *event.Event) {
	if ev == nil || ev.Exception == nil || len(ev.Exception.Stacktrace) == 0 {
		return
	}
	frames := ev.Exception.Stacktrace
	minified := 0
	for i := range frames {
		if isMinified(ev, &frames[i]) {
			minified++
		}
	}
	if minified == 0 {
		return
	}
	orig := make([]event.Frame, len(frames))
	copy(orig, frames)
	origTitle := ev.Title
	defer func() {
		if r := recover(); r != nil {
			copy(frames, orig)
			ev.Title = origTitle
			m.s.Log.Error("sourcemap: symbolication panicked; the event is kept as it came", "project_id", projectID, "panic", fmt.Sprint(r))
		}
	}()
	// A client hanging up must not change how its event is mapped; the
	// store's answers are bounded by loadWait instead.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadWait)
	defer cancel()
	budget := m.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	now := m.s.Now()
	// transient leaves every minified frame as it came, with why.
	transient := func(why string) {
		copy(frames, orig)
		ev.Title = origTitle
		for i := range frames {
			if isMinified(ev, &frames[i]) {
				frames[i].Symbolication = &event.Symbolication{Unmapped: why + transientNote, UnmappedCode: UnmappedTransient}
			}
		}
	}
	has, known := m.look.hasAny(projectID, now)
	if !known {
		var n int
		if err := m.s.DB.NewRaw(`SELECT count(*) FROM (SELECT 1 FROM sourcemap_bundles WHERE project_id = ? LIMIT 1) x`, projectID).Scan(ctx, &n); err != nil {
			m.s.Log.Warn("sourcemap: lookup failed; frames left as they came", "project_id", projectID, "error", err.Error())
			transient(storeUnreadableWhy)
			return
		}
		has = n > 0
		m.look.setHas(projectID, has, now)
	}
	if !has && ev.DebugMeta == nil {
		return // a project without uploads: nothing to say about its frames
	}
	// The budget bounds the work on the frames; the store's answers are
	// bounded by their own timeout and not charged to it, so a busy
	// database does not turn mapped events into raw ones.
	deadline := time.Now().Add(budget)
	overBudget := func(done int) {
		m.overBudget.Add(1)
		transient(fmt.Sprintf("symbolication stopped after %s with %d of the event's %d minified frames looked at", budget, done, minified))
	}

	type mapped struct {
		pm    *parsedMap
		src   string
		name  string
		line  int
		col   int
		label string
	}
	res := make([]*mapped, len(frames))
	done := 0
	for i := range frames {
		f := &frames[i]
		if !isMinified(ev, f) {
			continue
		}
		if time.Now().After(deadline) {
			overBudget(done)
			return
		}
		done++
		t0 := time.Now()
		r := m.resolve(ctx, projectID, ev, f, has, now)
		deadline = deadline.Add(time.Since(t0))
		if r.transient {
			transient(r.why)
			return
		}
		if r.blob == "" {
			f.Symbolication = &event.Symbolication{Unmapped: r.why, UnmappedCode: r.code}
			continue
		}
		// Waiting for a map's one parse is bounded by loadWait, not the
		// event's budget: the first events of a release pay for it.
		t0 = time.Now()
		pm, why, code := m.load(ctx, projectID, r.blob)
		deadline = deadline.Add(time.Since(t0))
		if code == UnmappedTransient {
			transient(why)
			return
		}
		if pm == nil {
			f.Symbolication = &event.Symbolication{Unmapped: why, UnmappedCode: code}
			continue
		}
		src, name, line, col, ok := lookup(pm.c, f.Line, f.Colno-1)
		if !ok || src == "" || line <= 0 {
			f.Symbolication = &event.Symbolication{Unmapped: fmt.Sprintf("line %d column %d is outside the map %s", f.Line, f.Colno, r.label), UnmappedCode: UnmappedOutside}
			continue
		}
		res[i] = &mapped{pm: pm, src: src, name: name, line: line, col: col, label: r.label}
		if m.look.bump(r.bundleID, now) {
			if _, err := m.s.DB.NewRaw(`UPDATE sourcemap_bundles SET last_used_at = now() WHERE id = ?`, r.bundleID).Exec(ctx); err != nil {
				m.s.Log.Warn("sourcemap: bump last use", "bundle_id", r.bundleID, "error", err.Error())
			}
		}
	}
	for i, r := range res {
		if r == nil {
			continue
		}
		if time.Now().After(deadline) {
			overBudget(done)
			return
		}
		f := &frames[i]
		lines := r.pm.sourceLines(r.src)
		fn := ""
		// The function's original name is the name the caller's call site
		// maps to (frames list the crash site first, its caller next).
		if i+1 < len(res) && res[i+1] != nil && isIdent(res[i+1].name) {
			fn = res[i+1].name
		}
		if fn == "" {
			var walked int
			fn, walked = enclosingFunction(lines, r.line, r.col)
			m.walked.Add(int64(walked))
		}
		if fn == "" {
			fn = f.Function
		}
		sy := &event.Symbolication{
			Raw:     &event.RawFrame{File: f.File, AbsPath: f.AbsPath, Line: f.Line, Colno: f.Colno, Function: f.Function},
			Mapping: r.label,
		}
		file := cleanSource(r.src)
		f.File = clipLine(file, event.MaxNameChars)
		f.Line = r.line
		f.Colno = r.col + 1
		f.AbsPath = ""
		f.Function = clipLine(fn, event.MaxNameChars)
		f.InApp = !strings.Contains(file, "node_modules/") && !strings.HasPrefix(file, "webpack/")
		f.ContextCode = ""
		if r.line-1 < len(lines) {
			f.ContextCode = clipLine(lines[r.line-1], maxLineChars)
			for j := max(0, r.line-1-contextLines); j < r.line-1; j++ {
				sy.PreContext = append(sy.PreContext, clipLine(lines[j], maxLineChars))
			}
			for j := r.line; j < len(lines) && j < r.line+contextLines; j++ {
				sy.PostContext = append(sy.PostContext, clipLine(lines[j], maxLineChars))
			}
		}
		f.Symbolication = sy
	}
	// The title names where the fault is in the original source (the
	// crash site's first in-app frame), as a person reads it; grouping
	// does not use it (event.Fingerprint hashes the frames).
	for i := range frames {
		f := &frames[i]
		if !f.InApp {
			continue
		}
		if res[i] != nil {
			ev.Title = clipLine(fmt.Sprintf("%s at %s (%s:%d)", ev.Title, f.Function, f.File, f.Line), event.MaxTitleChars)
		}
		break
	}
}

// isMinified: a frame that looks minified and was not mapped yet.
func isMinified(ev *event.Event, f *event.Frame) bool {
	return f.Symbolication == nil && LooksMinified(ev, f)
}

// lookup asks the library for the original position, holding its panics
// (a map whose mappings point past its sources) to "not mapped".
func lookup(c *gosourcemap.Consumer, line, col int) (src, name string, oline, ocol int, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return c.Source(line, col)
}

// resolve finds the stored map of a frame: by the debug id of the image
// whose code_file is the frame's file, else by release, dist and URL.
func (m *Service) resolve(ctx context.Context, projectID uuid.UUID, ev *event.Event, f *event.Frame, has bool, now time.Time) resolution {
	debugID := ""
	if ev.DebugMeta != nil {
		for _, im := range ev.DebugMeta.Images {
			if im.Type == "sourcemap" && im.DebugID != "" && sameFile(im.CodeFile, frameURL(f)) {
				debugID = strings.ToLower(im.DebugID)
				break
			}
		}
	}
	if debugID != "" {
		key := projectID.String() + "|d|" + debugID
		if r, ok := m.look.get(key, now); ok {
			return r
		}
		r := m.byDebugID(ctx, projectID, debugID)
		if !r.transient {
			m.look.set(key, r, now)
		}
		return r
	}
	if !has {
		return resolution{why: "no source map has been uploaded to this project; events after an upload are mapped", code: UnmappedNoUploads}
	}
	if ev.Release == "" {
		return resolution{why: "the event names no release and its SDK sent no debug id for " + clipLine(frameURL(f), 200), code: UnmappedNoRelease}
	}
	key := projectID.String() + "|r|" + ev.Release + "|" + distOf(ev) + "|" + frameURL(f)
	if r, ok := m.look.get(key, now); ok {
		return r
	}
	r := m.byRelease(ctx, projectID, ev.Release, distOf(ev), frameURL(f))
	if !r.transient {
		m.look.set(key, r, now)
	}
	return r
}

// frameURL is the URL the frame's code was loaded from: abs_path as the
// SDK sent it, else the file.
func frameURL(f *event.Frame) string {
	if f.AbsPath != "" {
		return f.AbsPath
	}
	return f.File
}

// distOf is the event's dist: Sentry sends it as a tag (the feed keeps
// tags).
func distOf(ev *event.Event) string { return ev.Tags["dist"] }

type fileRow struct {
	URL       string    `bun:"url"`
	Kind      string    `bun:"kind"`
	DebugID   string    `bun:"debug_id"`
	SourceMap string    `bun:"sourcemap"`
	Blob      string    `bun:"blob"`
	BundleID  uuid.UUID `bun:"bundle_id"`
	Release   string    `bun:"release"`
	Via       string    `bun:"via"`
	CreatedAt time.Time `bun:"created_at"`
}

func (r fileRow) label() string {
	s := r.URL
	if r.Release != "" {
		s += " · release " + r.Release
	}
	return s + " · " + r.Via + " upload of " + r.CreatedAt.UTC().Format("2006-01-02 15:04") + " UTC"
}

func (m *Service) byDebugID(ctx context.Context, projectID uuid.UUID, debugID string) resolution {
	var rows []fileRow
	if err := m.s.DB.NewRaw(`SELECT f.url, f.kind, f.debug_id, f.sourcemap, f.blob, f.bundle_id, b.release, b.via, b.created_at
		FROM sourcemap_files f JOIN sourcemap_bundles b ON b.id = f.bundle_id
		WHERE f.project_id = ? AND f.debug_id = ? ORDER BY b.created_at DESC LIMIT 8`, projectID, debugID).Scan(ctx, &rows); err != nil {
		return resolution{why: storeUnreadableWhy, transient: true}
	}
	for _, r := range rows {
		if r.Kind == KindMap {
			return resolution{blob: r.Blob, bundleID: r.BundleID, label: r.label()}
		}
	}
	return resolution{why: "no source map for debug id " + debugID, code: UnmappedNoMap}
}

// candidates are the names a frame's URL may have been uploaded under:
// the URL itself, then `~/path?query` and `~/path` (sentry-cli's rule:
// `~` stands for any scheme and host).
func candidates(file string) []string {
	out := []string{file}
	u, err := url.Parse(file)
	if err != nil || u.Path == "" {
		return out
	}
	if u.Fragment != "" {
		u.Fragment = ""
		out = append(out, u.String())
	}
	p := u.EscapedPath()
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	if u.RawQuery != "" {
		out = append(out, "~"+p+"?"+u.RawQuery)
	}
	return append(out, "~"+p)
}

func (m *Service) byRelease(ctx context.Context, projectID uuid.UUID, release, dist, file string) resolution {
	cands := candidates(file)
	var rows []fileRow
	q := `SELECT f.url, f.kind, f.debug_id, f.sourcemap, f.blob, f.bundle_id, b.release, b.via, b.created_at
		FROM sourcemap_files f JOIN sourcemap_bundles b ON b.id = f.bundle_id
		WHERE f.project_id = ? AND b.release = ? AND b.dist = ? AND f.url IN (?) ORDER BY b.created_at DESC LIMIT 16`
	mapNames := make([]string, 0, 2*len(cands))
	if err := m.s.DB.NewRaw(q, projectID, release, dist, inList(cands)).Scan(ctx, &rows); err != nil {
		return resolution{why: storeUnreadableWhy, transient: true}
	}
	// The minified file names its map (its sourceMappingURL, relative to
	// it); without it, the map is the file's name with .map.
	for _, r := range rows {
		if r.Kind == KindMap {
			continue
		}
		if r.SourceMap != "" && !strings.HasPrefix(r.SourceMap, "data:") {
			mapNames = append(mapNames, resolveRef(r.URL, r.SourceMap))
		}
		if r.DebugID != "" {
			if res := m.byDebugID(ctx, projectID, r.DebugID); res.blob != "" || res.transient {
				return res
			}
		}
	}
	for _, c := range cands {
		mapNames = append(mapNames, c+".map")
	}
	var maps []fileRow
	if err := m.s.DB.NewRaw(q, projectID, release, dist, inList(mapNames)).Scan(ctx, &maps); err != nil {
		return resolution{why: storeUnreadableWhy, transient: true}
	}
	for _, want := range mapNames {
		for _, r := range maps {
			if r.URL == want && r.Kind == KindMap {
				return resolution{blob: r.Blob, bundleID: r.BundleID, label: r.label()}
			}
		}
	}
	d := ""
	if dist != "" {
		d = " dist " + dist
	}
	return resolution{why: fmt.Sprintf("no source map for %s in release %s%s", clipLine(cands[len(cands)-1], 200), clipLine(release, 100), d), code: UnmappedNoMap}
}

// resolveRef resolves a sourceMappingURL against the URL of its file.
func resolveRef(fileURL, ref string) string {
	if strings.Contains(ref, "://") || strings.HasPrefix(ref, "~/") {
		return ref
	}
	if strings.HasPrefix(ref, "/") {
		if i := strings.Index(fileURL, "://"); i >= 0 {
			if j := strings.Index(fileURL[i+3:], "/"); j >= 0 {
				return fileURL[:i+3+j] + ref
			}
		}
		return "~" + ref
	}
	dir := fileURL
	if i := strings.LastIndex(dir, "/"); i >= 0 {
		dir = dir[:i+1]
	}
	joined := dir + ref
	if strings.HasPrefix(joined, "~/") {
		return "~" + path.Clean(joined[1:])
	}
	return joined
}

func inList(ss []string) any {
	if len(ss) == 0 {
		ss = []string{""}
	}
	return bunIn(ss)
}

// load returns the parsed map of a stored blob, from the cache or read and
// parsed now — once, however many events miss it together (their waits
// end after loadWait; the parse goes on for the events after them). A map that would hold more than the whole cache
// once parsed is refused before it is parsed.
func (m *Service) load(ctx context.Context, projectID uuid.UUID, blob string) (*parsedMap, string, string) {
	key := projectID.String() + "|" + blob
	if pm := m.cache.get(key); pm != nil {
		return pm, "", ""
	}
	ch := m.cache.flight.DoChan(key, func() (any, error) {
		if pm := m.cache.get(key); pm != nil {
			return pm, nil
		}
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 4*loadWait)
		defer cancel()
		var data []byte
		if err := m.s.DB.NewRaw(`SELECT data FROM sourcemap_blobs WHERE project_id = ? AND checksum = ?`, projectID, blob).Scan(lctx, &data); err != nil {
			return nil, errTransient
		}
		sh := shapeOf(data)
		if sh.sparse() {
			return nil, refusal(fmt.Sprintf("the source map is refused: its mappings hold %d separators for %d positions", sh.separators, sh.segments))
		}
		cost := mapCost(data, sh)
		if cost > m.cache.max {
			return nil, refusal(fmt.Sprintf("the source map is refused: it would hold %d bytes once parsed, more than the whole cache of parsed maps (%d bytes, ANVIL_SOURCEMAP_CACHE)", cost, m.cache.max))
		}
		m.cache.parses.Add(1)
		c, err := parse(data)
		if err != nil {
			return nil, refusal("the source map cannot be read: " + clipLine(err.Error(), 200))
		}
		pm := &parsedMap{c: c, cost: cost}
		m.cache.put(key, pm)
		return pm, nil
	})
	wait := time.NewTimer(loadWait)
	defer wait.Stop()
	select {
	case r := <-ch:
		if r.Err != nil {
			var rf refusal
			if errors.As(r.Err, &rf) {
				return nil, string(rf), UnmappedRefused
			}
			return nil, "the source map could not be read from the store", UnmappedTransient
		}
		return r.Val.(*parsedMap), "", ""
	case <-wait.C:
		return nil, "the source map was still being read and parsed", UnmappedTransient
	}
}

// refusal is why a stored map is not used (the same for every event).
type refusal string

func (r refusal) Error() string { return string(r) }

// errTransient is a store failure while a map was read.
var errTransient = errors.New("sourcemap: the map could not be read")

// parse parses a map, holding the library's panics to an error.
func parse(data []byte) (c *gosourcemap.Consumer, err error) {
	defer func() {
		if r := recover(); r != nil {
			c, err = nil, fmt.Errorf("malformed source map")
		}
	}()
	return gosourcemap.Parse("", data)
}

// sameFile reports whether a debug image's code_file names the frame's
// file: the same URL, or the same path once scheme, host and query are
// set aside.
func sameFile(codeFile, file string) bool {
	if codeFile == file {
		return true
	}
	a, b := candidates(codeFile), candidates(file)
	return a[len(a)-1] == b[len(b)-1]
}

// cleanSource turns a map's source name into a repository path:
// bundlers write "../src/cart.js", "webpack://app/./src/cart.js".
func cleanSource(src string) string {
	if i := strings.Index(src, "://"); i >= 0 {
		src = src[i+3:]
		if strings.HasPrefix(src, "/") {
			src = src[1:]
		} else if j := strings.Index(src, "/"); j >= 0 && !strings.Contains(src[:j], ".") {
			// webpack://<namespace>/path: the namespace is no directory.
			src = src[j+1:]
		}
	}
	src = path.Clean("/" + src)
	return strings.TrimPrefix(src, "/")
}

var identRe = regexp.MustCompile(`^[A-Za-z_$][\w$]*$`)

func isIdent(s string) bool { return s != "" && len(s) < 200 && identRe.MatchString(s) }

// A function's header, at the end of the text before its body's brace:
// `function name(…)`, `name(…)` (a method), `name = (…) =>`,
// `name: function (…)`, `name = async function`.
var (
	headerFunction = regexp.MustCompile(`function\s*\*?\s*([A-Za-z_$][\w$]*)\s*\([^()]*\)\s*$`)
	headerAssigned = regexp.MustCompile(`([A-Za-z_$][\w$]*)\s*[:=]\s*(?:async\s+)?(?:function\s*\*?\s*(?:[A-Za-z_$][\w$]*)?\s*\([^()]*\)|\([^()]*\)\s*=>|[A-Za-z_$][\w$]*\s*=>)\s*$`)
	headerMethod   = regexp.MustCompile(`(?:^|[\s;,{}])(?:async\s+|static\s+|get\s+|set\s+)*([A-Za-z_$][\w$]*)\s*\([^()]*\)\s*$`)
	notNames       = map[string]bool{"if": true, "for": true, "while": true, "switch": true, "catch": true, "with": true, "function": true, "return": true}
)

// enclosingFunction names the function whose body holds the original
// position, read from the source (where the map has no name for it): walk
// back to each unclosed `{` and read the header before it. Strings and
// comments are not parsed. The work is bounded whatever the source: the
// walk stops after walkLimit bytes (or 400 lines), and a header is read
// from the headerWindow bytes before its brace — never the whole prefix of
// a long line for each brace. walked is the bytes looked at.
func enclosingFunction(lines []string, line, col int) (name string, walked int) {
	if line < 1 || line > len(lines) {
		return "", 0
	}
	depth := 0
	for l := line - 1; l >= 0 && l >= line-400; l-- {
		text := lines[l]
		end := len(text)
		if l == line-1 && col < end {
			end = max(col, 0)
		}
		for i := end - 1; i >= 0; i-- {
			if walked >= walkLimit {
				return "", walked
			}
			walked++
			switch text[i] {
			case '}':
				depth++
			case '{':
				if depth > 0 {
					depth--
					continue
				}
				head := text[max(0, i-headerWindow):i]
				if l > 0 && strings.TrimSpace(head) == "" && i < headerWindow {
					prev := lines[l-1]
					head = prev[max(0, len(prev)-headerWindow):]
				}
				walked += len(head)
				if name := headerName(head); name != "" {
					return name, walked
				}
			}
		}
	}
	return "", walked
}

func headerName(head string) string {
	head = strings.TrimRight(head, " \t")
	for _, re := range []*regexp.Regexp{headerFunction, headerAssigned, headerMethod} {
		if m := re.FindStringSubmatch(head); m != nil && !notNames[m[1]] {
			return m[1]
		}
	}
	return ""
}

// clipLine cuts s to at most n bytes on a rune boundary, marking the cut.
func clipLine(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
