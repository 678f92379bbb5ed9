package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	fastjson "github.com/segmentio/encoding/json"
)

// Bounds. The contract says long values are bounded rather than refused — a
// delivery with two hundred stack frames is a useful delivery with fifty — and
// that every cut is visible. Strings are cut at a rune boundary and end in
// "…[truncated N chars]"; lists keep a counter of what was dropped. Lengths are
// counted in characters (runes) because that is what the marker reports and
// what a reader sees.
const (
	MaxTitleChars       = 1024 // title
	MaxMessageChars     = 8192 // exception.message (8 KiB of text)
	MaxContextCodeChars = 1024 // a frame's context_code
	MaxFrames           = 50   // stack frames kept (first and last 25)
	MaxBreadcrumbs      = 100  // breadcrumbs kept (the most recent)
	MaxBreadcrumbChars  = 1024 // one breadcrumb
	MaxTags             = 50   // tag entries kept
	MaxTagKeyChars      = 128  // a tag's key
	MaxTagValueChars    = 256  // a tag's value
	MaxURLChars         = 4096 // request.url
	MaxNameChars        = 512  // exception.type, frame file and function, service, release, user.id
	MaxShortChars       = 128  // language, sdk fields, request.method, schema_version

	// Enrichment and agent_context are free-form objects. They are bounded in
	// every direction so that neither storage nor the scrubber's walk can be
	// made arbitrarily expensive by one sender.
	MaxBagDepth       = 10   // nesting levels below the top-level object
	MaxBagKeys        = 100  // keys per object
	MaxBagItems       = 100  // items per array
	MaxBagStringChars = 2048 // one string value
	MaxBagNodes       = 1000 // values in one bag, all levels together
)

// Markers that stand in for what a bound removed. They are plain strings so
// that a reader of the stored JSON sees them where the data would have been.
const (
	// bagOmittedKey is added to an object that lost keys to MaxBagKeys.
	bagOmittedKey = "[truncated]"
	bagTooDeep    = "[truncated: nested too deep]"
	bagTooMany    = "[truncated: too many values]"
)

// Validate judges one element of a body and returns the stored shape of the
// event, or the rejection that goes into the answer's "rejected" list.
//
// Order of the checks, chosen so that each answer is the most useful one:
//  1. an element that is not a JSON object is a schema_violation with a nil
//     event_id — there is nothing to echo;
//  2. a schema_version with a major other than 1 is
//     unsupported_schema_version before anything else is judged, because a
//     major-2 event is entitled to fields that major 1 would call broken
//     (a missing schema_version means "1.0"; one that is not a version string
//     such as "1", "1.0" or "1.7.2" is a schema_violation);
//  3. a field of the wrong JSON type, then the required fields and their
//     rules, each with a message that names the field and the rule.
//
// level is matched case-insensitively and stored lower-case, and so is
// environment (a label, ^[a-z0-9][a-z0-9._-]{0,63}$ in any case): bindings and
// incidents must not split "Production" from "production". The event_id is
// kept as spelled; CanonicalID gives the dedupe form.
//
// Optional values that merely cannot be kept are dropped, not refused: a
// request.url that is not http(s) is removed and the event stays valid, because
// the error report is the valuable part.
//
// Bounds applied (see the Max* constants): strings are cut with a visible
// "…[truncated N chars]"; breadcrumbs keep the most recent MaxBreadcrumbs
// (the ones nearest the error); tags keep the MaxTags smallest keys so that the
// choice is deterministic; stack traces longer than MaxFrames keep their first
// and last MaxFrames/2 frames and drop the middle, counted in
// Exception.FramesOmitted. Both ends are kept because senders disagree about
// frame order (Java lists the innermost frame first, Python last) and the
// middle of a long trace is almost always the repetitive part of a recursion —
// keeping both ends preserves the crash site and the entry point either way.
func Validate(raw json.RawMessage) (Event, *Rejection) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return Event{}, reject(nil, SchemaViolation, "an event must be a JSON object")
	}
	var w wireEvent
	return validateWire(&w, decodeWire(trimmed, &w))
}

// validateWire is Validate's judgement of an element decoded into w, err
// being what the decoding said (a type error still leaves the event_id a
// rejection echoes).
func validateWire(w *wireEvent, err error) (Event, *Rejection) {
	var typeErr *json.UnmarshalTypeError
	if err != nil && !errors.As(err, &typeErr) {
		return Event{}, reject(nil, SchemaViolation, "the event is not valid JSON")
	}
	id := jsonString(w.EventID)

	version := "1.0"
	if len(w.SchemaVersion) > 0 && string(w.SchemaVersion) != "null" {
		v := jsonString(w.SchemaVersion)
		if v == nil {
			return Event{}, reject(id, SchemaViolation, "schema_version must be a string such as \"1.0\", got "+clip(string(w.SchemaVersion), 32))
		}
		version = *v
		major, ok := parseVersion(version)
		if !ok {
			return Event{}, reject(id, SchemaViolation, fmt.Sprintf("schema_version must be a version string such as \"1.0\", got %s", quote(version)))
		}
		if major != "1" {
			return Event{}, reject(id, UnsupportedSchemaVersion, fmt.Sprintf("schema_version %s has major %s; this ingest speaks major 1", quote(version), clip(major, 16)))
		}
	}
	if typeErr != nil {
		return Event{}, reject(id, SchemaViolation, typeMessage(typeErr))
	}

	// Every missing required field is named in one message: a
	// sender fixes them all at once instead of one per attempt. A single
	// missing field keeps its own message below.
	if missing := missingFields(w, id); len(missing) > 1 {
		return Event{}, reject(id, SchemaViolation, "missing required fields: "+strings.Join(missing, ", "))
	}
	if id == nil || *id == "" {
		return Event{}, reject(id, SchemaViolation, "event_id is required")
	}
	if !isCanonicalUUID(*id) {
		return Event{}, reject(id, SchemaViolation, fmt.Sprintf("event_id must be a canonical UUID string, 8-4-4-4-12 hexadecimal digits such as f4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f30; got %s", quote(*id)))
	}
	if w.Timestamp == "" {
		return Event{}, reject(id, SchemaViolation, "timestamp is required")
	}
	ts, err := time.Parse(time.RFC3339Nano, w.Timestamp)
	if err != nil {
		return Event{}, reject(id, SchemaViolation, fmt.Sprintf("timestamp must be an RFC 3339 date-time such as 2026-09-16T10:11:12Z, got %s", quote(w.Timestamp)))
	}
	if strings.TrimSpace(w.Title) == "" {
		return Event{}, reject(id, SchemaViolation, "title is required")
	}
	if w.Level == "" {
		return Event{}, reject(id, SchemaViolation, "level is required")
	}
	level, ok := levels[strings.ToLower(w.Level)]
	if !ok {
		return Event{}, reject(id, SchemaViolation, fmt.Sprintf("level must be one of debug, info, warning, error, fatal; got %s", quote(w.Level)))
	}
	if w.Environment == "" {
		return Event{}, reject(id, SchemaViolation, "environment is required")
	}
	if msg := labelProblem(w.Environment); msg != "" {
		return Event{}, reject(id, SchemaViolation, msg)
	}
	if strings.TrimSpace(w.Service) == "" {
		return Event{}, reject(id, SchemaViolation, "service is required")
	}
	if w.SDK == nil {
		return Event{}, reject(id, SchemaViolation, "sdk is required (an object with at least a name)")
	}
	if strings.TrimSpace(w.SDK.Name) == "" {
		return Event{}, reject(id, SchemaViolation, "sdk.name is required")
	}
	if w.Exception != nil && strings.TrimSpace(w.Exception.Type) == "" {
		return Event{}, reject(id, SchemaViolation, "exception.type is required when exception is present")
	}

	ev := Event{
		SchemaVersion: truncate(version, MaxShortChars),
		EventID:       *id,
		Timestamp:     ts.UTC(),
		Title:         truncate(w.Title, MaxTitleChars),
		Level:         level,
		// Labels compare case-insensitively, so they are stored in one case:
		// binding lookup and incident grouping must not split "Production"
		// from "production".
		Environment: strings.ToLower(w.Environment),
		Service:     truncate(w.Service, MaxNameChars),
		Language:    truncate(w.Language, MaxShortChars),
		SDK: SDK{
			Name:    truncate(w.SDK.Name, MaxShortChars),
			Version: truncate(w.SDK.Version, MaxShortChars),
			Runtime: truncate(w.SDK.Runtime, MaxShortChars),
		},
		Release: truncate(w.Release, MaxNameChars),
	}
	if w.Exception != nil {
		ev.Exception = boundException(w.Exception)
	}
	if w.Request != nil {
		r := &Request{
			Method:     truncate(w.Request.Method, MaxShortChars),
			StatusCode: w.Request.StatusCode,
		}
		if isHTTPURL(w.Request.URL) {
			r.URL = truncate(w.Request.URL, MaxURLChars)
		}
		if *r != (Request{}) {
			ev.Request = r
		}
	}
	if w.User != nil {
		// Only the id is read: user.ip_hash is the server's to set.
		ev.User.ID = truncate(w.User.ID, MaxNameChars)
	}
	ev.Breadcrumbs, ev.BreadcrumbsOmitted = boundBreadcrumbs(w.Breadcrumbs)
	ev.Tags, ev.TagsOmitted = boundTags(w.Tags)

	if ev.Enrichment, err = decodeBag(w.Enrichment); err != nil {
		return Event{}, reject(id, SchemaViolation, "enrichment must be a JSON object")
	}
	if ev.AgentContext, err = decodeBag(w.AgentContext); err != nil {
		return Event{}, reject(id, SchemaViolation, "agent_context must be a JSON object")
	}
	var uaOS *Client
	ev.Browser, uaOS = readClient(w.Browser, true)
	if ev.OS, _ = readClient(w.OS, false); ev.OS == nil {
		ev.OS = uaOS
	}
	ev.DebugMeta = readDebugMeta(w.DebugMeta)
	return ev, nil
}

// decodeWire decodes an element into w. Most of an event's cost is here,
// so it tries the cheapest decoder that can take the element: the
// one-pass decoder of the common shape (decodeWireFast), then
// segmentio/encoding's drop-in of encoding/json, which needs a third of
// encoding/json's time. Both produce what encoding/json would
// (FuzzDecodeWire holds them to that). Everything else — a field of the
// wrong type, broken JSON, bytes that are not UTF-8 — is decoded by
// encoding/json itself, whose partial result (the event_id a rejection
// echoes), error messages and repair of invalid UTF-8 are the ones the
// contract and its tests were written against.
//
// The fast decoders' strings may share raw's memory (raw is the request's
// own body, which nothing changes): whatever outlives the request must copy
// what it keeps. No tags and an empty tags object both decode as nil:
// Validate treats them alike.
func decodeWire(raw []byte, w *wireEvent) error {
	err := decodeWireAny(raw, w)
	if len(w.Tags) == 0 {
		w.Tags = nil
	}
	return err
}

func decodeWireAny(raw []byte, w *wireEvent) error {
	if utf8.Valid(raw) {
		if decodeWireFast(raw, w) {
			return nil
		}
		*w = wireEvent{}
		// segmentio makes room for 64 tags in every map it creates (2 KiB
		// for an event's one or two); into a map it is given, it only adds.
		w.Tags = make(map[string]string)
		rest, err := fastjson.Parse(raw, w, fastjson.ZeroCopy)
		if err == nil && len(bytes.TrimLeft(rest, " \t\r\n")) == 0 {
			return nil
		}
		*w = wireEvent{}
	}
	return json.Unmarshal(raw, w)
}

// wireEvent is the shape decoded from the wire. It is deliberately a typed
// struct rather than a map: encoding/json decodes it without building an
// intermediate tree, reports a wrong type with the field's path, and reads
// past unknown fields (including `browser`) for free.
type wireEvent struct {
	SchemaVersion json.RawMessage   `json:"schema_version"`
	EventID       json.RawMessage   `json:"event_id"`
	Timestamp     string            `json:"timestamp"`
	Title         string            `json:"title"`
	Level         string            `json:"level"`
	Environment   string            `json:"environment"`
	Service       string            `json:"service"`
	Language      string            `json:"language"`
	SDK           *wireSDK          `json:"sdk"`
	Exception     *wireException    `json:"exception"`
	Release       string            `json:"release"`
	Request       *wireRequest      `json:"request"`
	User          *wireUser         `json:"user"`
	Breadcrumbs   []string          `json:"breadcrumbs"`
	Tags          map[string]string `json:"tags"`
	Enrichment    json.RawMessage   `json:"enrichment"`
	AgentContext  json.RawMessage   `json:"agent_context"`
	Browser       json.RawMessage   `json:"browser"`
	OS            json.RawMessage   `json:"os"`
	DebugMeta     json.RawMessage   `json:"debug_meta"`
}

type wireSDK struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Runtime string `json:"runtime"`
}

type wireException struct {
	Type       string  `json:"type"`
	Message    string  `json:"message"`
	Stacktrace []Frame `json:"stacktrace"`
}

type wireRequest struct {
	Method     string `json:"method"`
	URL        string `json:"url"`
	StatusCode int    `json:"status_code"`
}

// wireUser has no ip_hash on purpose: the sender's value is never read.
type wireUser struct {
	ID string `json:"id"`
}

var levels = map[string]string{
	"debug": "debug", "info": "info", "warning": "warning", "error": "error", "fatal": "fatal",
}

// jsonString decodes raw when it is a JSON string and returns nil otherwise.
// event_id and schema_version are decoded this way rather than into a
// *string because encoding/json leaves a non-nil pointer to "" behind when the
// value has the wrong type, and a rejection must echo nil, not "", when no id
// could be read.
func jsonString(raw json.RawMessage) *string {
	if len(raw) == 0 || raw[0] != '"' {
		return nil
	}
	if s, ok := plainJSONString(raw); ok {
		return &s
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil
	}
	return &s
}

// plainJSONString is the value of a JSON string of printable ASCII without
// escapes (an event id, a version) — what encoding/json would decode it to,
// without its machinery. ok is false for any other input.
func plainJSONString(raw []byte) (string, bool) {
	n := len(raw)
	if n < 2 || raw[0] != '"' || raw[n-1] != '"' {
		return "", false
	}
	for _, c := range raw[1 : n-1] {
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			return "", false
		}
	}
	return string(raw[1 : n-1]), true
}

func reject(id *string, code, msg string) *Rejection {
	var echo *string
	if id != nil {
		s := *id
		echo = &s
	}
	return &Rejection{EventID: echo, ReasonCode: code, Message: msg}
}

// typeMessage names the field whose JSON type is wrong.
func typeMessage(e *json.UnmarshalTypeError) string {
	field := e.Field
	if field == "" {
		field = "the event"
	}
	want := "a string"
	if t := e.Type; t != nil {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Int, reflect.Int64:
			want = "an integer"
		case reflect.Bool:
			want = "a boolean"
		case reflect.Slice:
			want = "an array"
		case reflect.Map, reflect.Struct:
			want = "an object"
		}
	}
	return fmt.Sprintf("%s must be %s, got %s", field, want, e.Value)
}

// parseVersion accepts "MAJOR", "MAJOR.MINOR" or "MAJOR.MINOR.PATCH" with
// decimal components and returns MAJOR without leading zeros.
func parseVersion(v string) (major string, ok bool) {
	if v == "" || len(v) > MaxShortChars {
		return "", false
	}
	// One to three dot-separated runs of digits, each non-empty.
	first, dots, run := "", 0, 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '.':
			if run == 0 || dots == 2 {
				return "", false
			}
			if dots == 0 {
				first = v[:i]
			}
			dots++
			run = 0
		case '0' <= c && c <= '9':
			run++
		default:
			return "", false
		}
	}
	if run == 0 {
		return "", false
	}
	if dots == 0 {
		first = v
	}
	major = strings.TrimLeft(first, "0")
	if major == "" {
		major = "0"
	}
	return major, true
}

// isCanonicalUUID reports whether s is 8-4-4-4-12 hexadecimal digits in any
// case. The version nibble is not checked: the contract can require the
// canonical form of a UUID but not how the sender generated it.
func isCanonicalUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !isHex(c) {
				return false
			}
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// labelProblem checks the label rule ^[a-z0-9][a-z0-9._-]{0,63}$
// (case-insensitive) and says which part of it failed, or returns "".
func labelProblem(s string) string {
	if len(s) > 64 {
		return fmt.Sprintf("environment must be a label of at most 64 characters, got %d", utf8.RuneCountInString(s))
	}
	if !isAlnum(s[0]) {
		return fmt.Sprintf("environment must be a label starting with a letter or digit, got %s", quote(s))
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return fmt.Sprintf("environment must be a label of letters, digits, '.', '_' and '-' only; %s has %s at position %d", quote(s), quote(string(rune(c))), i+1)
		}
	}
	return ""
}

func isAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// isHTTPURL reports whether u is an http:// or https:// URL (the scheme in any
// case). Nothing else may be kept: the value is rendered as a link.
func isHTTPURL(u string) bool {
	return hasPrefixFold(u, "http://") || hasPrefixFold(u, "https://")
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// truncate cuts s after max characters and appends the visible marker.
func truncate(s string, max int) string {
	if len(s) <= max { // bytes bound runes from above
		return s
	}
	n := utf8.RuneCountInString(s)
	if n <= max {
		return s
	}
	cut := 0
	for i := 0; i < max; i++ {
		_, size := utf8.DecodeRuneInString(s[cut:])
		cut += size
	}
	return s[:cut] + "…[truncated " + strconv.Itoa(n-max) + " chars]"
}

func boundException(w *wireException) *Exception {
	ex := &Exception{
		Type:    truncate(w.Type, MaxNameChars),
		Message: truncate(w.Message, MaxMessageChars),
	}
	frames := w.Stacktrace
	if len(frames) > MaxFrames {
		head := MaxFrames / 2
		tail := MaxFrames - head
		ex.FramesOmitted = len(frames) - MaxFrames
		kept := make([]Frame, 0, MaxFrames)
		kept = append(kept, frames[:head]...)
		kept = append(kept, frames[len(frames)-tail:]...)
		frames = kept
	}
	for i := range frames {
		f := &frames[i]
		f.File = truncate(f.File, MaxNameChars)
		f.Function = truncate(f.Function, MaxNameChars)
		f.ContextCode = truncate(f.ContextCode, MaxContextCodeChars)
		f.AbsPath = truncate(f.AbsPath, MaxURLChars)
		if f.Colno < 0 {
			f.Colno = 0
		}
		f.Symbolication = nil // the server's (docs/sourcemap.md), never the sender's
	}
	if len(frames) > 0 {
		ex.Stacktrace = frames
	}
	return ex
}

func boundBreadcrumbs(in []string) ([]string, int) {
	if len(in) == 0 {
		return nil, 0
	}
	omitted := 0
	if len(in) > MaxBreadcrumbs {
		omitted = len(in) - MaxBreadcrumbs
		in = in[omitted:] // the most recent ones are nearest the error
	}
	for i, b := range in { // the decoder's own slice, cut in place
		in[i] = truncate(b, MaxBreadcrumbChars)
	}
	return in, omitted
}

func boundTags(in map[string]string) (map[string]string, int) {
	if len(in) == 0 {
		return nil, 0
	}
	if len(in) <= MaxTags && tagsWithinBounds(in) {
		return in, 0 // the decoder's own map, kept as it is
	}
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	omitted := 0
	if len(keys) > MaxTags {
		sort.Strings(keys)
		omitted = len(keys) - MaxTags
		keys = keys[:MaxTags]
	}
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		out[truncate(k, MaxTagKeyChars)] = truncate(in[k], MaxTagValueChars)
	}
	return out, omitted
}

// tagsWithinBounds reports whether no tag's key or value needs cutting
// (a byte count within the bound is a character count within it too).
func tagsWithinBounds(tags map[string]string) bool {
	for k, v := range tags {
		if len(k) > MaxTagKeyChars && truncate(k, MaxTagKeyChars) != k || len(v) > MaxTagValueChars && truncate(v, MaxTagValueChars) != v {
			return false
		}
	}
	return true
}

// decodeBag decodes enrichment or agent_context. Numbers stay json.Number so
// that a large integer id survives the round trip to JSONB unchanged.
func decodeBag(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, errors.New("not an object")
	}
	if m, ok := decodeBagFast(raw); ok {
		return boundBag(m), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	return boundBag(m), nil
}

// boundBag applies the Max* bag bounds to a decoded bag. A bag within
// them all — nearly every one — is kept as decoded: bounding it would
// only copy it, key by key, with every string boxed again (a fifth of the
// allocations of the README's event). FuzzBoundBag holds the shortcut to
// the copy.
func boundBag(m map[string]any) map[string]any {
	if f := (bagBounder{budget: MaxBagNodes}); f.fits(m, 0) {
		return m
	}
	b := bagBounder{budget: MaxBagNodes}
	return b.object(m, 0)
}

// fits reports whether object(m, depth) would return m unchanged, walking
// it as object does and spending the same budget.
func (b *bagBounder) fits(m map[string]any, depth int) bool {
	if len(m) > MaxBagKeys {
		return false
	}
	for k, v := range m {
		if len(k) > MaxTagKeyChars && truncate(k, MaxTagKeyChars) != k {
			return false
		}
		if !b.fitsValue(v, depth+1) {
			return false
		}
	}
	return true
}

// fitsValue is fits for value(v, depth).
func (b *bagBounder) fitsValue(v any, depth int) bool {
	if b.budget <= 0 {
		return false
	}
	b.budget--
	switch t := v.(type) {
	case string:
		return len(t) <= MaxBagStringChars || truncate(t, MaxBagStringChars) == t
	case map[string]any:
		return depth <= MaxBagDepth && b.fits(t, depth)
	case []any:
		if depth > MaxBagDepth || len(t) > MaxBagItems {
			return false
		}
		for _, item := range t {
			if !b.fitsValue(item, depth+1) {
				return false
			}
		}
		return true
	default: // json.Number, bool, nil: kept as they are
		return true
	}
}

// bagBounder applies the Max* bag bounds in one walk, replacing whatever does
// not fit with a marker string.
type bagBounder struct {
	budget int
}

func (b *bagBounder) object(m map[string]any, depth int) map[string]any {
	if len(m) == 0 {
		return m
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// Sorted so that what survives a bound is the same on every delivery.
	sort.Strings(keys)
	omitted := 0
	if len(keys) > MaxBagKeys {
		omitted = len(keys) - MaxBagKeys
		keys = keys[:MaxBagKeys]
	}
	out := make(map[string]any, len(keys)+1)
	for _, k := range keys {
		out[truncate(k, MaxTagKeyChars)] = b.value(m[k], depth+1)
	}
	if omitted > 0 {
		out[bagOmittedKey] = strconv.Itoa(omitted) + " keys omitted"
	}
	return out
}

func (b *bagBounder) value(v any, depth int) any {
	if b.budget <= 0 {
		return bagTooMany
	}
	b.budget--
	switch t := v.(type) {
	case string:
		return truncate(t, MaxBagStringChars)
	case map[string]any:
		if depth > MaxBagDepth {
			return bagTooDeep
		}
		return b.object(t, depth)
	case []any:
		if depth > MaxBagDepth {
			return bagTooDeep
		}
		n := len(t)
		if n > MaxBagItems {
			t = t[:MaxBagItems]
		}
		out := make([]any, 0, len(t)+1)
		for _, item := range t {
			out = append(out, b.value(item, depth+1))
		}
		if n > MaxBagItems {
			out = append(out, "…[truncated "+strconv.Itoa(n-MaxBagItems)+" items]")
		}
		return out
	default: // json.Number, bool, nil
		return v
	}
}

// quote renders a sender's value for a message, clipped so that an answer
// never grows with a hostile input.
func quote(s string) string {
	return strconv.Quote(clip(s, 64))
}

func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// missingFields lists the required fields w lacks, in the contract's order.
func missingFields(w *wireEvent, id *string) []string {
	var out []string
	add := func(absent bool, name string) {
		if absent {
			out = append(out, name)
		}
	}
	add(id == nil || *id == "", "event_id")
	add(w.Timestamp == "", "timestamp")
	add(strings.TrimSpace(w.Title) == "", "title")
	add(w.Level == "", "level")
	add(w.Environment == "", "environment")
	add(strings.TrimSpace(w.Service) == "", "service")
	add(w.SDK == nil || strings.TrimSpace(w.SDK.Name) == "", "sdk.name")
	return out
}
