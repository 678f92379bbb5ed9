package sentry

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	fastjson "github.com/segmentio/encoding/json"
)

// Defaults are what the translation takes from outside the event: the
// connection's name (the service of last resort) and the time the event
// arrived (its timestamp when it names none).
type Defaults struct {
	ConnectionName string
	Now            time.Time
	// EventID is the envelope header's event_id: the id of an event item
	// that carries none of its own, as Sentry's ingestion takes it (	// point 12). Empty on /store/, which has no header.
	EventID string
}

// Translated is one Sentry event as a feed event: Raw is the feed event's
// JSON for Feed.Ingest, EventID the canonical UUID in it and HexID the same
// id as Sentry spells it (32 hex digits) for the door's answer.
type Translated struct {
	Raw     json.RawMessage
	EventID string
	HexID   string
}

// Problem is an event the translation refuses: the feed's reason code
// (always schema_violation) and a message naming the field.
type Problem struct {
	ReasonCode string
	Message    string
}

func (p *Problem) Error() string { return p.ReasonCode + ": " + p.Message }

func problem(format string, args ...any) *Problem {
	return &Problem{ReasonCode: "schema_violation", Message: fmt.Sprintf(format, args...)}
}

// sentryEvent is the part of Sentry's event payload the door reads. Fields
// whose shape differs between SDKs are raw and read by hand.
type sentryEvent struct {
	EventID     json.RawMessage `json:"event_id"`
	Timestamp   json.RawMessage `json:"timestamp"`
	Level       string          `json:"level"`
	Logger      string          `json:"logger"`
	Platform    string          `json:"platform"`
	ServerName  string          `json:"server_name"`
	Release     string          `json:"release"`
	Environment *string         `json:"environment"`
	Message     json.RawMessage `json:"message"`
	Logentry    *logentry       `json:"logentry"`
	Exception   json.RawMessage `json:"exception"`
	Stacktrace  *stacktrace     `json:"stacktrace"`
	Request     *struct {
		Method  string          `json:"method"`
		URL     string          `json:"url"`
		Headers json.RawMessage `json:"headers"`
	} `json:"request"`
	DebugMeta   json.RawMessage `json:"debug_meta"`
	User        json.RawMessage `json:"user"`
	Breadcrumbs json.RawMessage `json:"breadcrumbs"`
	Tags        json.RawMessage `json:"tags"`
	SDK         *struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"sdk"`
	Contexts struct {
		Runtime *struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"runtime"`
		Response *struct {
			StatusCode int `json:"status_code"`
		} `json:"response"`
		Browser json.RawMessage `json:"browser"`
		OS      json.RawMessage `json:"os"`
	} `json:"contexts"`
}

type logentry struct {
	Message   string `json:"message"`
	Formatted string `json:"formatted"`
}

type sentryException struct {
	Type       string      `json:"type"`
	Value      string      `json:"value"`
	Module     string      `json:"module"`
	Stacktrace *stacktrace `json:"stacktrace"`
}

type stacktrace struct {
	Frames []sentryFrame `json:"frames"`
}

// sentryFrame has no vars on purpose: a frame's local variables are
// dropped, never stored (the feed has no place for them that the scrubber
// would walk).
type sentryFrame struct {
	Filename    string `json:"filename"`
	AbsPath     string `json:"abs_path"`
	Module      string `json:"module"`
	Function    string `json:"function"`
	Lineno      int    `json:"lineno"`
	ContextLine string `json:"context_line"`
	InApp       bool   `json:"in_app"`
	Colno       int    `json:"colno"`
}

// feedEvent is the feed event the translation writes (seed 004's wire
// shape); Feed.Ingest validates, bounds and scrubs it like any other.
type feedEvent struct {
	SchemaVersion string            `json:"schema_version"`
	EventID       string            `json:"event_id"`
	Timestamp     string            `json:"timestamp"`
	Title         string            `json:"title"`
	Level         string            `json:"level"`
	Environment   string            `json:"environment"`
	Service       string            `json:"service"`
	Language      string            `json:"language,omitempty"`
	SDK           feedSDK           `json:"sdk"`
	Exception     *feedException    `json:"exception,omitempty"`
	Release       string            `json:"release,omitempty"`
	Request       *feedRequest      `json:"request,omitempty"`
	User          *feedUser         `json:"user,omitempty"`
	Breadcrumbs   []string          `json:"breadcrumbs,omitempty"`
	Tags          map[string]string `json:"tags,omitempty"`
	// The browser's own fields (browser.go).
	// Browser is {name, version}, or a User-Agent string the feed reads.
	Browser   json.RawMessage `json:"browser,omitempty"`
	OS        *feedClient     `json:"os,omitempty"`
	DebugMeta json.RawMessage `json:"debug_meta,omitempty"`
}

type feedSDK struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Runtime string `json:"runtime,omitempty"`
}

type feedException struct {
	Type       string      `json:"type"`
	Message    string      `json:"message,omitempty"`
	Stacktrace []feedFrame `json:"stacktrace,omitempty"`
}

type feedFrame struct {
	File        string `json:"file,omitempty"`
	Line        int    `json:"line,omitempty"`
	Function    string `json:"function,omitempty"`
	ContextCode string `json:"context_code,omitempty"`
	InApp       bool   `json:"in_app"`
	AbsPath     string `json:"abs_path,omitempty"`
	Colno       int    `json:"colno,omitempty"`
}

type feedRequest struct {
	Method     string `json:"method,omitempty"`
	URL        string `json:"url,omitempty"`
	StatusCode int    `json:"status_code,omitempty"`
}

type feedUser struct {
	ID string `json:"id,omitempty"`
}

// Sentry's levels onto the feed's five; an unknown level is left for the
// feed's validation to name.
var levelMap = map[string]string{
	"fatal": "fatal", "critical": "fatal", "error": "error", "warning": "warning", "warn": "warning",
	"info": "info", "log": "info", "debug": "debug",
}

// Translate turns one Sentry event payload into a feed event. It refuses
// only what the feed could not even be asked about — a payload that is not
// a JSON object, or an event_id that is not an id — and leaves every other
// judgement (labels, bounds, scrubbing, bindings) to the feed, so that the
// two doors can never disagree about an event.
func Translate(raw []byte, d Defaults) (Translated, *Problem) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return Translated{}, problem("an event must be a JSON object")
	}
	var se sentryEvent
	if err := fastjson.Unmarshal(trimmed, &se); err != nil {
		return Translated{}, problem("the event is not valid JSON or a field has the wrong type: %s", clip(err.Error(), 200))
	}
	rawID := se.EventID
	if (len(rawID) == 0 || string(rawID) == "null") && d.EventID != "" {
		rawID, _ = json.Marshal(d.EventID)
	}
	id, hexID, p := eventID(rawID)
	if p != nil {
		return Translated{}, p
	}
	ts, p := timestamp(se.Timestamp, d.Now)
	if p != nil {
		return Translated{}, p
	}
	fe := feedEvent{
		SchemaVersion: "1.0",
		EventID:       id,
		Timestamp:     ts,
		Level:         "error",
		Environment:   "production",
		Language:      se.Platform,
		Release:       se.Release,
	}
	if se.Level != "" {
		fe.Level = se.Level
		if l, ok := levelMap[strings.ToLower(se.Level)]; ok {
			fe.Level = l
		}
	}
	if se.Environment != nil {
		fe.Environment = *se.Environment
	}
	tags := readTags(se.Tags)
	switch {
	case strings.TrimSpace(tags["service"]) != "":
		fe.Service = tags["service"]
	case strings.TrimSpace(se.ServerName) != "":
		fe.Service = se.ServerName
	default:
		fe.Service = d.ConnectionName
	}
	if len(tags) > 0 {
		fe.Tags = tags
	}
	fe.SDK.Name = "sentry"
	if se.SDK != nil && strings.TrimSpace(se.SDK.Name) != "" {
		fe.SDK.Name, fe.SDK.Version = se.SDK.Name, se.SDK.Version
	}
	if rt := se.Contexts.Runtime; rt != nil {
		fe.SDK.Runtime = strings.TrimSpace(rt.Name + " " + rt.Version)
	}

	exc, p := mainException(se.Exception)
	if p != nil {
		return Translated{}, p
	}
	if exc != nil {
		typ := strings.TrimSpace(exc.Type)
		if typ == "" {
			typ = "Error"
		}
		fe.Exception = &feedException{Type: typ, Message: exc.Value}
		if exc.Stacktrace != nil {
			fe.Exception.Stacktrace = frames(exc.Stacktrace.Frames)
		}
		fe.Title = typ
		if exc.Value != "" {
			fe.Title = typ + ": " + exc.Value
		}
	} else {
		msg := message(se.Logentry, se.Message)
		typ := strings.TrimSpace(se.Logger)
		if typ == "" {
			typ = "Message"
		}
		fe.Exception = &feedException{Type: typ, Message: msg}
		if se.Stacktrace != nil {
			fe.Exception.Stacktrace = frames(se.Stacktrace.Frames)
		}
		fe.Title = msg
		if strings.TrimSpace(msg) == "" {
			fe.Title = typ
		}
	}
	if r := se.Request; r != nil {
		fr := &feedRequest{Method: r.Method, URL: r.URL}
		if se.Contexts.Response != nil {
			fr.StatusCode = se.Contexts.Response.StatusCode
		}
		if *fr != (feedRequest{}) {
			fe.Request = fr
		}
	}
	if uid := userID(se.User); uid != "" {
		fe.User = &feedUser{ID: uid}
	}
	fe.Breadcrumbs = breadcrumbs(se.Breadcrumbs)
	browserFields(&se, &fe)

	out, err := fastjson.Marshal(&fe)
	if err != nil {
		return Translated{}, problem("the event could not be translated: %s", clip(err.Error(), 200))
	}
	return Translated{Raw: out, EventID: id, HexID: hexID}, nil
}

// eventID reads Sentry's event_id — 32 hex digits, or a dashed UUID — as a
// canonical lower-case UUID (the feed's dedupe key is then the same for
// both spellings) and as 32 hex digits (Sentry's answer).
func eventID(raw json.RawMessage) (id, hexID string, p *Problem) {
	var s string
	if len(raw) == 0 || string(raw) == "null" {
		return "", "", problem("event_id is required (32 hexadecimal digits, as every Sentry SDK sends)")
	}
	if fastjson.Unmarshal(raw, &s) != nil {
		return "", "", problem("event_id must be a string of 32 hexadecimal digits or a UUID, got %s", clip(string(raw), 64))
	}
	h := strings.ToLower(strings.ReplaceAll(s, "-", ""))
	dashed := strings.Contains(s, "-")
	if len(h) != 32 || (dashed && !isDashedUUID(s)) {
		return "", "", problem("event_id must be 32 hexadecimal digits or a UUID, got %q", clip(s, 64))
	}
	if _, err := hex.DecodeString(h); err != nil {
		return "", "", problem("event_id must be 32 hexadecimal digits or a UUID, got %q", clip(s, 64))
	}
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32], h, nil
}

func isDashedUUID(s string) bool {
	return len(s) == 36 && s[8] == '-' && s[13] == '-' && s[18] == '-' && s[23] == '-'
}

// timestamp reads an RFC 3339 string (a missing zone means UTC, as Sentry
// reads it) or Unix seconds as a number; none means the arrival time.
func timestamp(raw json.RawMessage, now time.Time) (string, *Problem) {
	if len(raw) == 0 || string(raw) == "null" {
		return now.UTC().Format(time.RFC3339Nano), nil
	}
	if raw[0] == '"' {
		var s string
		if fastjson.Unmarshal(raw, &s) != nil {
			return "", problem("timestamp must be an RFC 3339 string or Unix seconds")
		}
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return t.UTC().Format(time.RFC3339Nano), nil
		}
		if t, err := time.Parse("2006-01-02T15:04:05.999999999", s); err == nil {
			return t.UTC().Format(time.RFC3339Nano), nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return unixSeconds(f)
		}
		return "", problem("timestamp must be an RFC 3339 date-time or Unix seconds, got %q", clip(s, 64))
	}
	var f float64
	if fastjson.Unmarshal(raw, &f) != nil {
		return "", problem("timestamp must be an RFC 3339 string or Unix seconds, got %s", clip(string(raw), 64))
	}
	return unixSeconds(f)
}

func unixSeconds(f float64) (string, *Problem) {
	// Year 1 to 9999: what RFC 3339 can spell.
	if math.IsNaN(f) || f < -62135596800 || f > 253402300799 {
		return "", problem("timestamp %v is out of range", f)
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC().Format(time.RFC3339Nano), nil
}

// mainException is the exception Sentry titles an event by: the last of
// exception.values (the list, or the bare array some SDKs send) — Sentry
// lists a chain from the cause to the error that was raised.
func mainException(raw json.RawMessage) (*sentryException, *Problem) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var values []sentryException
	if raw[0] == '[' {
		if fastjson.Unmarshal(raw, &values) != nil {
			return nil, problem("exception must be an object with values or a list of exceptions")
		}
	} else {
		var w struct {
			Values []sentryException `json:"values"`
		}
		if fastjson.Unmarshal(raw, &w) != nil {
			return nil, problem("exception must be an object with values or a list of exceptions")
		}
		values = w.Values
	}
	if len(values) == 0 {
		return nil, nil
	}
	return &values[len(values)-1], nil
}

// frames turns Sentry's frames (the outermost call first, the crash site
// last) into the feed's, the crash site first, as the seed's example lists
// them. The file is filename, else abs_path, else the module.
func frames(in []sentryFrame) []feedFrame {
	if len(in) == 0 {
		return nil
	}
	out := make([]feedFrame, 0, len(in))
	for i := len(in) - 1; i >= 0; i-- {
		f := &in[i]
		file := f.Filename
		if file == "" {
			file = f.AbsPath
		}
		if file == "" {
			file = f.Module
		}
		line := f.Lineno
		if line < 0 {
			line = 0
		}
		out = append(out, feedFrame{File: file, Line: line, Function: f.Function, ContextCode: f.ContextLine, InApp: f.InApp,
			AbsPath: f.AbsPath, Colno: max(f.Colno, 0)})
	}
	return out
}

// message is the formatted message of an event without an exception:
// logentry.formatted, logentry.message, or message (a string, or an object
// with formatted or message, as older SDKs send).
func message(le *logentry, raw json.RawMessage) string {
	if le != nil {
		if le.Formatted != "" {
			return le.Formatted
		}
		if le.Message != "" {
			return le.Message
		}
	}
	if len(raw) == 0 {
		return ""
	}
	var s string
	if fastjson.Unmarshal(raw, &s) == nil {
		return s
	}
	var o logentry
	if fastjson.Unmarshal(raw, &o) == nil {
		if o.Formatted != "" {
			return o.Formatted
		}
		return o.Message
	}
	return ""
}

// readTags reads tags as an object or as a list of [key, value] pairs;
// values that are not strings are spelled as JSON. Anything else is no tags.
func readTags(raw json.RawMessage) map[string]string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	out := map[string]string{}
	switch raw[0] {
	case '{':
		var m map[string]json.RawMessage
		if fastjson.Unmarshal(raw, &m) != nil {
			return nil
		}
		for k, v := range m {
			out[k] = scalar(v)
		}
	case '[':
		var pairs []json.RawMessage
		if fastjson.Unmarshal(raw, &pairs) != nil {
			return nil
		}
		for _, pr := range pairs {
			var kv []json.RawMessage
			if fastjson.Unmarshal(pr, &kv) != nil || len(kv) != 2 {
				continue
			}
			out[scalar(kv[0])] = scalar(kv[1])
		}
	}
	delete(out, "")
	return out
}

// scalar spells a JSON value as a tag value: a string as itself, anything
// else as its JSON.
func scalar(v json.RawMessage) string {
	var s string
	if fastjson.Unmarshal(v, &s) == nil {
		return s
	}
	return string(bytes.TrimSpace(v))
}

// userID is user.id (a string or a number), else user.username. The
// client address never comes from here: the feed hashes the connection's.
func userID(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var u struct {
		ID       json.RawMessage `json:"id"`
		Username string          `json:"username"`
	}
	if fastjson.Unmarshal(raw, &u) != nil {
		return ""
	}
	if len(u.ID) > 0 && string(u.ID) != "null" {
		if id := scalar(u.ID); id != "" && id[0] != '{' && id[0] != '[' {
			return id
		}
	}
	return u.Username
}

type breadcrumb struct {
	Type      string          `json:"type"`
	Category  string          `json:"category"`
	Message   string          `json:"message"`
	Timestamp json.RawMessage `json:"timestamp"`
}

// breadcrumbs reads breadcrumbs.values (or the bare list) and spells each
// as "category: message" (either alone when the other is empty, else the
// type), after its time when it has one.
func breadcrumbs(raw json.RawMessage) []string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var list []json.RawMessage
	if raw[0] == '[' {
		if fastjson.Unmarshal(raw, &list) != nil {
			return nil
		}
	} else {
		var w struct {
			Values []json.RawMessage `json:"values"`
		}
		if fastjson.Unmarshal(raw, &w) != nil {
			return nil
		}
		list = w.Values
	}
	out := make([]string, 0, len(list))
	for _, item := range list {
		var b breadcrumb
		if fastjson.Unmarshal(item, &b) != nil {
			continue
		}
		var s string
		switch {
		case b.Category != "" && b.Message != "":
			s = b.Category + ": " + b.Message
		case b.Message != "":
			s = b.Message
		case b.Category != "":
			s = b.Category
		default:
			s = b.Type
		}
		if s != "" && len(b.Timestamp) > 0 && string(b.Timestamp) != "null" {
			// The breadcrumb's time goes before its text, RFC 3339 in UTC: the
			// feed's breadcrumbs are strings, and the event view splits it
			// out again (incident.SplitBreadcrumb).
			if at, p := timestamp(b.Timestamp, time.Time{}); p == nil {
				s = at + " " + s
			}
		}
		if s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
