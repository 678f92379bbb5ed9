package sourcemap_test

import (
	"bytes"
	"context"
	"crypto/sha1" //nolint:gosec // sentry-cli's chunk names
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/domain/event"
	"anvil/domain/sourcemap"
)

// vlq is a source map's base64 VLQ of one value.
func vlq(v int) string {
	const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	n := v << 1
	if v < 0 {
		n = (-v << 1) | 1
	}
	var sb strings.Builder
	for {
		d := n & 31
		n >>= 5
		if n > 0 {
			d |= 32
		}
		sb.WriteByte(b64[d])
		if n == 0 {
			return sb.String()
		}
	}
}

// mapJSON is a map of one source with the given content and mappings.
func mapJSON(t testing.TB, content, mappings string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"version": 3, "sources": []string{"src/app.js"}, "sourcesContent": []string{content},
		"names": []string{}, "mappings": mappings})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// upload stores app.js and its map as release r of the bundle's project.
func (b *testBundle) upload(t testing.TB, svc *sourcemap.Service, release string, mapData []byte) {
	t.Helper()
	_, err := svc.Upload(context.Background(), b.Owner, b.Proj.ID, release, "", []sourcemap.PlainFile{
		{Name: "assets/app.js", Data: []byte("x()\n//# sourceMappingURL=app.js.map\n")}, {Name: "assets/app.js.map", Data: mapData}})
	if err != nil {
		t.Fatal(err)
	}
}

// minifiedEvent is a browser event of release r whose frames are at
// line 1 of app.js, at each column.
func minifiedEvent(release string, cols ...int) *event.Event {
	ev := &event.Event{Title: "TypeError: boom", Release: release, Exception: &event.Exception{Type: "TypeError"}}
	for _, c := range cols {
		ev.Exception.Stacktrace = append(ev.Exception.Stacktrace, event.Frame{File: "http://shop.test/assets/app.js",
			AbsPath: "http://shop.test/assets/app.js", Line: 1, Colno: c, Function: "x", InApp: true})
	}
	return ev
}

// A source line of 40,000 `{` with a frame mapped to its end: naming the
// function walks a bounded window, not the prefix once per brace.
func TestSymbolicateLongBraceLineIsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	svc := sourcemap.New(b.Store, sourcemap.Limits{}, 0)
	b.upload(t, svc, "r1", mapJSON(t, strings.Repeat("{", 40000), "AAA"+vlq(39999)))
	ev := minifiedEvent("r1", 1)
	svc.Symbolicate(context.Background(), b.Proj.ID, ev)
	f := ev.Exception.Stacktrace[0]
	if f.Symbolication == nil || f.Symbolication.Raw == nil || f.File != "src/app.js" || f.Colno != 40000 {
		t.Fatalf("not mapped: %+v %+v", f, f.Symbolication)
	}
	if w := svc.Stats().Walked; w == 0 || w > 64<<10+400 {
		t.Fatalf("walked %d bytes to name one frame; at most 64 KiB and a header", w)
	}
}

// bigMap is a map of about size bytes: a source of many short functions,
// one generated line mapped to each of its lines.
func bigMap(t testing.TB, size int) (data []byte, lines int) {
	t.Helper()
	var src, mp strings.Builder
	for i := 0; src.Len()+mp.Len() < size-64; i++ {
		if i > 0 {
			src.WriteByte('\n')
			mp.WriteString(";AACA")
		} else {
			mp.WriteString("AAAA")
		}
		fmt.Fprintf(&src, "function f%07d() { return g(); }", i)
		lines++
	}
	return mapJSON(t, src.String(), mp.String()), lines
}

// Ten events at once on one uncached 16 MB map: it is parsed once, and the
// cache charges what the parsed map holds (its mappings and split lines
// beyond its bytes).
func TestConcurrentMissesParseOnce(t *testing.T) {
	t.Parallel()
	if raceEnabled {
		// Parsing 16 MB under the detector takes longer than an event
		// waits for a map (5 s); the one-parse rule is the same code.
		t.Skip("too slow under the race detector: a 16 MB parse outlasts the map wait")
	}
	b := setup(t)
	svc := sourcemap.New(b.Store, sourcemap.Limits{File: 32 << 20, Bundle: 64 << 20, Project: 128 << 20}, 0)
	data, lines := bigMap(t, 16<<20)
	b.upload(t, svc, "r1", data)
	var wg sync.WaitGroup
	evs := make([]*event.Event, 10)
	for i := range evs {
		evs[i] = minifiedEvent("r1", 1)
		evs[i].Exception.Stacktrace[0].Line = 1 + i*1000
		wg.Add(1)
		go func(ev *event.Event) {
			defer wg.Done()
			svc.Symbolicate(context.Background(), b.Proj.ID, ev)
		}(evs[i])
	}
	wg.Wait()
	for i, ev := range evs {
		f := ev.Exception.Stacktrace[0]
		if f.Symbolication == nil || f.Symbolication.Raw == nil || f.Line != 1+i*1000 || !strings.HasPrefix(f.ContextCode, fmt.Sprintf("function f%07d", i*1000)) {
			t.Fatalf("event %d not mapped: %+v %+v", i, f, f.Symbolication)
		}
	}
	st := svc.Stats()
	if st.Parses != 1 {
		t.Fatalf("the map was parsed %d times; once", st.Parses)
	}
	// 24 bytes a mapping and 16 a split line, beyond the JSON itself.
	if least := int64(len(data)) + 24*int64(lines) + 16*int64(lines); st.CacheBytes < least || st.CacheBytes > 2*least {
		t.Fatalf("the cache charges %d bytes for a map that holds at least %d", st.CacheBytes, least)
	}
}

// A map that would hold more than the whole cache once parsed is refused
// before it is parsed, with the reason on the frame.
func TestMapLargerThanCacheIsRefusedUnparsed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	svc := sourcemap.New(b.Store, sourcemap.Limits{}, 4<<20)
	data, _ := bigMap(t, 4<<20)
	b.upload(t, svc, "r1", data)
	ev := minifiedEvent("r1", 1)
	svc.Symbolicate(context.Background(), b.Proj.ID, ev)
	sy := ev.Exception.Stacktrace[0].Symbolication
	if sy == nil || sy.UnmappedCode != sourcemap.UnmappedRefused || !strings.Contains(sy.Unmapped, "ANVIL_SOURCEMAP_CACHE") {
		t.Fatalf("frame: %+v", sy)
	}
	if st := svc.Stats(); st.Parses != 0 || st.CacheBytes != 0 {
		t.Fatalf("stats %+v: the map was parsed or kept", st)
	}
}

// A map of empty lines (separators far above its positions) is refused at
// upload: nothing is stored.
func TestSparseMapRefusedAtUpload(t *testing.T) {
	t.Parallel()
	b := setup(t)
	svc := sourcemap.New(b.Store, sourcemap.Limits{}, 0)
	_, err := svc.Upload(context.Background(), b.Owner, b.Proj.ID, "r1", "", []sourcemap.PlainFile{
		{Name: "app.js.map", Data: mapJSON(t, "x", "AAAA"+strings.Repeat(";", 200000))}})
	if errCode(err) != "sourcemap_sparse" {
		t.Fatalf("err %v", err)
	}
	if n := b.CountRows(t, "sourcemap_bundles", "project_id = ?", b.Proj.ID); n != 0 {
		t.Fatalf("%d bundles stored", n)
	}
}

// Past the event's budget every frame stays as it came, counted, and the
// frames say why.
func TestBudgetLeavesTheEventAsItCame(t *testing.T) {
	t.Parallel()
	b := setup(t)
	svc := sourcemap.New(b.Store, sourcemap.Limits{}, 0)
	mapData, _ := os.ReadFile("testdata/build1/app.js.map")
	b.upload(t, svc, "r1", mapData)
	svc.Budget = time.Nanosecond
	ev := minifiedEvent("r1", 207, 135, 83)
	svc.Symbolicate(context.Background(), b.Proj.ID, ev)
	for _, f := range ev.Exception.Stacktrace {
		if f.File != "http://shop.test/assets/app.js" || f.Symbolication == nil || f.Symbolication.UnmappedCode != sourcemap.UnmappedTransient ||
			!strings.Contains(f.Symbolication.Unmapped, "symbolication stopped after 1ns") {
			t.Fatalf("frame %+v %+v", f, f.Symbolication)
		}
	}
	if ev.Title != "TypeError: boom" || svc.Stats().OverBudget != 1 {
		t.Fatalf("title %q stats %+v", ev.Title, svc.Stats())
	}
}

// ingest sends one browser event of release r through the feed.
func (b *testBundle) ingest(ctx context.Context, t testing.TB, release string) (uuid.UUID, error) {
	t.Helper()
	id := uuid.NewString()
	frames := []any{}
	for _, c := range []int{207, 135, 83} {
		frames = append(frames, map[string]any{"file": "http://shop.test/assets/app.js", "abs_path": "http://shop.test/assets/app.js",
			"line": 1, "colno": c, "function": "x", "in_app": true})
	}
	raw, _ := json.Marshal(map[string]any{"schema_version": "1.0", "event_id": id, "timestamp": time.Now().UTC().Format(time.RFC3339),
		"title": "TypeError: boom", "level": "error", "environment": "production", "service": "web", "sdk": map[string]any{"name": "t"},
		"release": release, "exception": map[string]any{"type": "TypeError", "message": "boom", "stacktrace": frames}})
	res, err := b.Feed.Ingest(ctx, b.Sender, "127.0.0.1", []json.RawMessage{raw})
	if err != nil || len(res.Accepted) != 1 {
		return uuid.Nil, fmt.Errorf("ingest: %w (%+v)", err, res)
	}
	var inc uuid.UUID
	if err := b.DB.Bun.NewRaw(`SELECT incident_id FROM feed_events WHERE event_id_key = ?`, id).Scan(context.Background(), &inc); err != nil {
		t.Fatal(err)
	}
	return inc, nil
}

// A request cancelled while its frames are mapped, then real ones: the
// cancellation is not remembered as "unmapped", every event is mapped,
// and they are one incident.
func TestCancelledRequestThenRealOneIsOneIncident(t *testing.T) {
	t.Parallel()
	b := setup(t)
	svc := sourcemap.New(b.Store, sourcemap.Limits{}, 0)
	b.Feed.Symbolicate = svc.Symbolicate
	mapData, _ := os.ReadFile("testdata/build1/app.js.map")
	b.upload(t, svc, "shop@1", mapData)
	// The project's "has uploads" answer is cached by an event of
	// another release; the cancelled request then reaches the lookup of
	// shop@1's map with its context done.
	if _, err := b.ingest(context.Background(), t, "shop@0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ev := minifiedEvent("shop@1", 207, 135, 83)
	svc.Symbolicate(ctx, b.Proj.ID, ev)
	_, _ = b.ingest(ctx, t, "shop@1")
	first, err := b.ingest(context.Background(), t, "shop@1")
	if err != nil {
		t.Fatal(err)
	}
	b.Clock.Advance(time.Minute) // past every cached answer
	second, err := b.ingest(context.Background(), t, "shop@1")
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Fatalf("two incidents %s and %s for one fault", first, second)
	}
	var unmapped int
	if err := b.DB.Bun.NewRaw(`SELECT count(*) FROM feed_events WHERE incident_id = ? AND payload::text NOT LIKE '%src/cart.js%'`, first).Scan(context.Background(), &unmapped); err != nil {
		t.Fatal(err)
	}
	if unmapped != 0 {
		t.Fatalf("%d events of the incident were not mapped", unmapped)
	}
}

// Concurrent chunk requests are charged to the organisation's quota one
// after another: together they never hold more than it.
func TestChunkQuotaHoldsUnderConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	svc := sourcemap.New(b.Store, sourcemap.Limits{Bundle: 1 << 20}, 0) // quota: 2 MiB of chunks
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		data := []byte(strings.Repeat(fmt.Sprint(i), 700<<10))
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = svc.PutChunks(context.Background(), b.Owner, "acme", []sourcemap.Chunk{{Checksum: sha1Hex(data), Data: data}})
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch errCode(err) {
		case "":
			ok++
		case "chunks_over_limit":
		default:
			t.Fatalf("err %v", err)
		}
	}
	var held int64
	if err := b.DB.Bun.NewRaw(`SELECT coalesce(sum(length(data)), 0) FROM sourcemap_chunks`).Scan(context.Background(), &held); err != nil {
		t.Fatal(err)
	}
	if ok != 2 || held > 2<<20 {
		t.Fatalf("%d requests stored, %d bytes of chunks held; the quota is 2 MiB", ok, held)
	}
}

// A project's uploads name at most Limits.Files files: past it an upload
// is refused whole.
func TestFileRowsPerProjectAreCapped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	svc := sourcemap.New(b.Store, sourcemap.Limits{Files: 3}, 0)
	mapData, _ := os.ReadFile("testdata/build1/app.js.map")
	b.upload(t, svc, "r1", mapData)
	_, err := svc.Upload(context.Background(), b.Owner, b.Proj.ID, "r2", "", []sourcemap.PlainFile{
		{Name: "assets/app.js", Data: []byte("y()")}, {Name: "assets/app.js.map", Data: mapData}})
	if errCode(err) != "project_over_files" {
		t.Fatalf("err %v", err)
	}
	if n := b.CountRows(t, "sourcemap_files", "project_id = ?", b.Proj.ID); n != 2 {
		t.Fatalf("%d file rows", n)
	}
}

func sha1Hex(b []byte) string {
	sum := sha1.Sum(b) //nolint:gosec // sentry-cli's chunk names
	return hex.EncodeToString(sum[:])
}

// Events that arrived before their maps are mapped again on request, and
// stay in their incident with their fingerprint.
func TestReprocessMapsEarlyEventsKeepingGrouping(t *testing.T) {
	t.Parallel()
	b := setup(t)
	svc := sourcemap.New(b.Store, sourcemap.Limits{}, 0)
	b.Feed.Symbolicate = svc.Symbolicate
	inc, err := b.ingest(context.Background(), t, "shop@1")
	if err != nil {
		t.Fatal(err)
	}
	var fpBefore string
	if err := b.DB.Bun.NewRaw(`SELECT fingerprint FROM feed_events WHERE incident_id = ?`, inc).Scan(context.Background(), &fpBefore); err != nil {
		t.Fatal(err)
	}
	mapData, _ := os.ReadFile("testdata/build1/app.js.map")
	b.upload(t, svc, "shop@1", mapData)
	if err := b.Feed.RequestReprocess(context.Background(), b.Owner, inc); err != nil {
		t.Fatal(err)
	}
	if n := b.Jobs(t, "reprocess_events"); n != 1 {
		t.Fatalf("%d reprocess jobs", n)
	}
	n, err := b.Feed.Reprocess(context.Background(), inc)
	if err != nil || n != 1 {
		t.Fatalf("reprocessed %d: %v", n, err)
	}
	var got struct {
		Incident    uuid.UUID `bun:"incident_id"`
		Fingerprint string    `bun:"fingerprint"`
		Payload     string    `bun:"payload"`
	}
	if err := b.DB.Bun.NewRaw(`SELECT incident_id, fingerprint, payload::text AS payload FROM feed_events`).Scan(context.Background(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Incident != inc || got.Fingerprint != fpBefore || !strings.Contains(got.Payload, "src/cart.js") || strings.Contains(got.Payload, `"unmapped"`) {
		t.Fatalf("after re-processing: %+v", got)
	}
	// A second pass finds nothing left to map.
	if n, err := b.Feed.Reprocess(context.Background(), inc); err != nil || n != 0 {
		t.Fatalf("second pass %d %v", n, err)
	}
}

// The mappings are measured as the library reads them: a key spelled with
// an escape ("mappin\u0067s") is the same key to encoding/json, so a map of
// empty lines under it is refused at upload like one under the plain key.
func TestSparseMapWithEscapedKeyRefusedAtUpload(t *testing.T) {
	t.Parallel()
	b := setup(t)
	svc := sourcemap.New(b.Store, sourcemap.Limits{}, 0)
	data := bytes.Replace(mapJSON(t, "x", "AAAA"+strings.Repeat(";", 200000)), []byte(`"mappings"`), []byte(`"mappin\u0067s"`), 1)
	if !bytes.Contains(data, []byte(`mappin\u0067s`)) {
		t.Fatal("the key is not escaped")
	}
	_, err := svc.Upload(context.Background(), b.Owner, b.Proj.ID, "r1", "", []sourcemap.PlainFile{{Name: "app.js.map", Data: data}})
	if errCode(err) != "sourcemap_sparse" {
		t.Fatalf("err %v", err)
	}
}
