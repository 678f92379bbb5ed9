// Package event turns the bodies posted to the Anvil Feed ingest
// (POST /api/feed/events and /api/feed/events/batch, docs/contracts/feed.md)
// into events that are safe to store: it splits a body into its elements, validates each
// element against the wire contract, bounds long values with a visible cut,
// scrubs secrets out of everything a person or an agent will later read, and
// computes the fingerprint that groups events into incidents.
//
// The package is pure on purpose — no database, no HTTP, no clock. The ingest
// handler owns the order of the checks (413 → 401 → 403 → 429) and the
// storage; everything here is a function of its arguments, which is what makes
// it cheap to fuzz and to benchmark against the ingest's throughput target.
//
// The intended pipeline per element is
//
//	ev, rej := Validate(raw)      // schema_violation / unsupported_schema_version
//	ev.User.IPHash = IPHash(...)  // server-side pseudonym; the sender's is discarded
//	err := Scrub(&ev)             // redaction_failed when it cannot be done safely
//	fp := Fingerprint(&ev)        // after Scrub, so the grouping key never hashes a secret
package event

import (
	"strings"
	"time"
)

// Reason codes. They are the closed set of docs/contracts/feed.md: a sender
// may switch on them, so nothing outside this list may ever appear in a Rejection.
const (
	SchemaViolation          = "schema_violation"
	UnsupportedSchemaVersion = "unsupported_schema_version"
	PayloadTooLarge          = "payload_too_large"
	NoBinding                = "no_binding"
	BindingDisabled          = "binding_disabled"
	RedactionFailed          = "redaction_failed"
	InternalError            = "internal_error"
)

// Limits of the hosted service that the contract publishes. The HTTP layer
// enforces the body size; they live here so that the handler and the tests
// quote one number.
const (
	// MaxBodyBytes is the request body limit; above it the answer is 413.
	MaxBodyBytes = 256 << 10
	// DefaultMaxBatch is the number of events a batch may hold; above it the
	// whole request is a 400.
	DefaultMaxBatch = 50
)

// Rejection is one entry of the answer's "rejected" list.
type Rejection struct {
	// EventID is echoed exactly as the sender spelled it (an upper-case UUID
	// comes back upper-case) so that an SDK can clear its send buffer by
	// matching the answer against what it posted. It is nil when no string
	// event_id could be read from the element at all.
	EventID    *string `json:"event_id"`
	ReasonCode string  `json:"reason_code"`
	Message    string  `json:"message"`
}

// Event is the validated, bounded and scrubbed shape of one Anvil Feed event,
// the form in which it is stored (as JSONB) and shown. It keeps the fields of
// the feed contract's schema 1.0 and nothing else: unknown fields are read past
// (evolution is additive). `browser`, which release A read past, is kept
// since stage B, with `os` and `debug_meta`.
//
// The *_omitted counters make every cut visible: a reader of a stored event
// can always tell that something was removed and how much.
type Event struct {
	// SchemaVersion is the version the sender declared, or "1.0" when it
	// declared none (the contract's default).
	SchemaVersion string `json:"schema_version"`
	// EventID is the id as the sender spelled it; see CanonicalID for the
	// dedupe key.
	EventID     string     `json:"event_id"`
	Timestamp   time.Time  `json:"timestamp"`
	Title       string     `json:"title"`
	Level       string     `json:"level"`
	Environment string     `json:"environment"`
	Service     string     `json:"service"`
	Language    string     `json:"language,omitempty"`
	SDK         SDK        `json:"sdk"`
	Exception   *Exception `json:"exception,omitempty"`
	Release     string     `json:"release,omitempty"`
	Request     *Request   `json:"request,omitempty"`
	// User is a value, not a pointer: the ingest sets User.IPHash on every
	// event, whether or not the sender said anything about a user.
	User               User              `json:"user,omitzero"`
	Breadcrumbs        []string          `json:"breadcrumbs,omitempty"`
	BreadcrumbsOmitted int               `json:"breadcrumbs_omitted,omitempty"`
	Tags               map[string]string `json:"tags,omitempty"`
	TagsOmitted        int               `json:"tags_omitted,omitempty"`
	Enrichment         map[string]any    `json:"enrichment,omitempty"`
	AgentContext       map[string]any    `json:"agent_context,omitempty"`
	// Browser and OS are where a front-end error happened, and DebugMeta
	// the bundles' debug ids (client.go). They come last so the
	// stored form of an event without them is what it was.
	Browser   *Client    `json:"browser,omitempty"`
	OS        *Client    `json:"os,omitempty"`
	DebugMeta *DebugMeta `json:"debug_meta,omitempty"`
}

// SDK names the library that sent the event.
type SDK struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Runtime string `json:"runtime,omitempty"`
}

// Exception is the error the event reports.
type Exception struct {
	Type       string  `json:"type"`
	Message    string  `json:"message,omitempty"`
	Stacktrace []Frame `json:"stacktrace,omitempty"`
	// FramesOmitted counts the frames removed from the middle of the
	// stacktrace by the MaxFrames bound (see Validate).
	FramesOmitted int `json:"frames_omitted,omitempty"`
}

// Frame is one stack frame, in the order the sender listed them.
type Frame struct {
	File        string `json:"file,omitempty"`
	Line        int    `json:"line,omitempty"`
	Function    string `json:"function,omitempty"`
	ContextCode string `json:"context_code,omitempty"`
	InApp       bool   `json:"in_app"`
	// AbsPath and Colno are kept exactly as sent (Line is the lineno): the
	// source-map step resolves a minified frame from them.
	AbsPath string `json:"abs_path,omitempty"`
	Colno   int    `json:"colno,omitempty"`
	// Symbolication is the server's, never the sender's (docs/sourcemap.md):
	// a minified frame mapped through its source map names the original
	// file, line, column and function in the fields above (AbsPath then
	// empty) and keeps the frame as it came, the context lines and the
	// upload that mapped it here; a frame that could not be mapped says
	// why. A pointer, so that a Frame stays comparable.
	Symbolication *Symbolication `json:"symbolication,omitempty"`
}

// Symbolication is what mapping a frame through a source map left on it.
type Symbolication struct {
	// Raw is the frame as the sender reported it (nil when unmapped: the
	// frame itself is still raw).
	Raw *RawFrame `json:"raw,omitempty"`
	// PreContext and PostContext are the source lines before and after
	// ContextCode, nearest last and first.
	PreContext  []string `json:"pre_context,omitempty"`
	PostContext []string `json:"post_context,omitempty"`
	// Mapping names the upload whose map mapped the frame.
	Mapping string `json:"mapping,omitempty"`
	// Unmapped is why a frame that looked minified stayed as it came.
	Unmapped string `json:"unmapped,omitempty"`
	// UnmappedCode is Unmapped's kind (no_uploads, no_release, no_map,
	// map_refused, outside_map, transient): what the page advises.
	UnmappedCode string `json:"unmapped_code,omitempty"`
}

// RawFrame is a frame as the sender reported it, before symbolication.
type RawFrame struct {
	File     string `json:"file,omitempty"`
	AbsPath  string `json:"abs_path,omitempty"`
	Line     int    `json:"line,omitempty"`
	Colno    int    `json:"colno,omitempty"`
	Function string `json:"function,omitempty"`
}

// Request is the HTTP request that failed. URL is only ever an http(s) URL:
// it ends up rendered as a link in somebody's cockpit.
type Request struct {
	Method     string `json:"method,omitempty"`
	URL        string `json:"url,omitempty"`
	StatusCode int    `json:"status_code,omitempty"`
}

// User identifies who was affected without storing where they came from:
// IPHash is computed server-side (see IPHash) and whatever the sender put
// there is discarded.
type User struct {
	ID     string `json:"id,omitempty"`
	IPHash string `json:"ip_hash,omitempty"`
}

// CanonicalID returns the event_id lower-cased. It is the event component of
// the dedupe key (organisation, event_id): a retry that spells the same UUID
// in another case is the same delivery, while the answer still echoes the id
// as spelled.
func (e *Event) CanonicalID() string {
	return strings.ToLower(e.EventID)
}
