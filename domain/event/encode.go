package event

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// Marshal encodes e in its stored form: byte for byte what encoding/json's
// Marshal makes of it (the same fields in the same order, the same
// omissions, the same escaping), without its reflection, which was the
// largest single cost of the ingest after decoding. The free-form maps
// (enrichment, agent_context) are written by appendBagValue when they hold
// what a decoded bag holds; other maps, and a timestamp encoding/json would
// refuse, go through encoding/json itself. FuzzMarshal holds the two
// together.
func Marshal(e *Event) ([]byte, error) { return AppendMarshal(make([]byte, 0, 1024), e) }

// appendTimestamp appends t as encoding/json writes a time.Time: quoted
// strict RFC 3339 with nanoseconds, or MarshalJSON's error.
func appendTimestamp(b []byte, t time.Time) ([]byte, error) {
	b = append(b, '"')
	b, err := t.AppendText(b)
	if err != nil {
		return nil, err
	}
	return append(b, '"'), nil
}

// AppendMarshal appends Marshal's encoding of e to b (the ingest writes it
// straight into the event's COPY row). On an error b is lost.
func AppendMarshal(b []byte, e *Event) ([]byte, error) {
	var tsb [48]byte
	ts, err := appendTimestamp(tsb[:0], e.Timestamp)
	if err != nil {
		v, err := json.Marshal(e) // its error, word for word
		if err != nil {
			return nil, err
		}
		return append(b, v...), nil
	}
	b = append(b, `{"schema_version":`...)
	b = appendString(b, e.SchemaVersion)
	b = append(b, `,"event_id":`...)
	b = appendString(b, e.EventID)
	b = append(b, `,"timestamp":`...)
	b = append(b, ts...)
	b = append(b, `,"title":`...)
	b = appendString(b, e.Title)
	b = append(b, `,"level":`...)
	b = appendString(b, e.Level)
	b = append(b, `,"environment":`...)
	b = appendString(b, e.Environment)
	b = append(b, `,"service":`...)
	b = appendString(b, e.Service)
	b = appendField(b, "language", e.Language)
	b = append(b, `,"sdk":{"name":`...)
	b = appendString(b, e.SDK.Name)
	b = appendField(b, "version", e.SDK.Version)
	b = appendField(b, "runtime", e.SDK.Runtime)
	b = append(b, '}')
	if x := e.Exception; x != nil {
		b = append(b, `,"exception":{"type":`...)
		b = appendString(b, x.Type)
		b = appendField(b, "message", x.Message)
		if len(x.Stacktrace) > 0 {
			b = append(b, `,"stacktrace":[`...)
			for i := range x.Stacktrace {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendFrame(b, &x.Stacktrace[i])
			}
			b = append(b, ']')
		}
		b = appendInt(b, "frames_omitted", x.FramesOmitted)
		b = append(b, '}')
	}
	b = appendField(b, "release", e.Release)
	if r := e.Request; r != nil {
		b = append(b, `,"request":{`...)
		b = appendObjectFields(b, func(b []byte) []byte {
			b = appendField(b, "method", r.Method)
			b = appendField(b, "url", r.URL)
			return appendInt(b, "status_code", r.StatusCode)
		})
		b = append(b, '}')
	}
	if e.User != (User{}) {
		b = append(b, `,"user":{`...)
		b = appendObjectFields(b, func(b []byte) []byte {
			b = appendField(b, "id", e.User.ID)
			return appendField(b, "ip_hash", e.User.IPHash)
		})
		b = append(b, '}')
	}
	if len(e.Breadcrumbs) > 0 {
		b = append(b, `,"breadcrumbs":[`...)
		for i, s := range e.Breadcrumbs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, s)
		}
		b = append(b, ']')
	}
	b = appendInt(b, "breadcrumbs_omitted", e.BreadcrumbsOmitted)
	if len(e.Tags) > 0 {
		b = append(b, `,"tags":{`...)
		keys := make([]string, 0, len(e.Tags))
		for k := range e.Tags {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendString(b, e.Tags[k])
		}
		b = append(b, '}')
	}
	b = appendInt(b, "tags_omitted", e.TagsOmitted)
	if b, err = appendAny(b, "enrichment", e.Enrichment); err != nil {
		return nil, err
	}
	if b, err = appendAny(b, "agent_context", e.AgentContext); err != nil {
		return nil, err
	}
	b = appendClient(b, "browser", e.Browser)
	b = appendClient(b, "os", e.OS)
	if dm := e.DebugMeta; dm != nil {
		b = append(b, `,"debug_meta":{`...)
		if len(dm.Images) > 0 {
			b = append(b, `"images":[`...)
			for i := range dm.Images {
				if i > 0 {
					b = append(b, ',')
				}
				im := &dm.Images[i]
				b = append(b, '{')
				b = appendObjectFields(b, func(b []byte) []byte {
					b = appendField(b, "type", im.Type)
					b = appendField(b, "code_file", im.CodeFile)
					return appendField(b, "debug_id", im.DebugID)
				})
				b = append(b, '}')
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

func appendFrame(b []byte, f *Frame) []byte {
	b = append(b, '{')
	b = appendObjectFields(b, func(b []byte) []byte {
		b = appendField(b, "file", f.File)
		b = appendInt(b, "line", f.Line)
		b = appendField(b, "function", f.Function)
		return appendField(b, "context_code", f.ContextCode)
	})
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, `"in_app":`...)
	b = strconv.AppendBool(b, f.InApp)
	b = appendField(b, "abs_path", f.AbsPath)
	b = appendInt(b, "colno", f.Colno)
	if f.Symbolication != nil {
		// Rare next to plain frames, and nested: encoding/json spells it
		// (strings and numbers only, nothing it refuses).
		v, _ := json.Marshal(f.Symbolication)
		b = append(b, `,"symbolication":`...)
		b = append(b, v...)
	}
	return append(b, '}')
}

// appendClient appends ,"name":{…} for a browser or an OS (omitted when nil).
func appendClient(b []byte, name string, c *Client) []byte {
	if c == nil {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, `":{`...)
	b = appendObjectFields(b, func(b []byte) []byte {
		b = appendField(b, "name", c.Name)
		return appendField(b, "version", c.Version)
	})
	return append(b, '}')
}

// appendObjectFields appends the fields fields writes (each led by a comma,
// as appendField and appendInt write them) as the first fields of an object
// just opened: without the comma before the first.
func appendObjectFields(b []byte, fields func([]byte) []byte) []byte {
	start := len(b)
	b = fields(b)
	if len(b) > start {
		b = append(b[:start], b[start+1:]...)
	}
	return b
}

// appendField appends ,"name":"value" unless value is empty (omitempty).
func appendField(b []byte, name, value string) []byte {
	if value == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendString(b, value)
}

// appendInt appends ,"name":value unless value is 0 (omitempty).
func appendInt(b []byte, name string, value int) []byte {
	if value == 0 {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, int64(value), 10)
}

// appendAny appends ,"name":<encoding/json of m> unless m is empty.
func appendAny(b []byte, name string, m map[string]any) ([]byte, error) {
	if len(m) == 0 {
		return b, nil
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	if v, ok := appendBagValue(b, m); ok {
		return v, nil
	}
	v, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append(b, v...), nil
}

// appendBagValue appends v as encoding/json's Marshal does (keys sorted,
// strings escaped alike) when it holds only what a decoded bag holds —
// objects, arrays, strings, json.Number, booleans, null — and reports false
// on anything else (a float, a func), which appendAny hands to encoding/json
// whole. Its reflection was the largest cost of encoding a bag. On false,
// what it appended is garbage past len(b) of the caller's slice.
func appendBagValue(b []byte, v any) ([]byte, bool) {
	switch t := v.(type) {
	case nil:
		return append(b, "null"...), true
	case string:
		return appendString(b, t), true
	case bool:
		return strconv.AppendBool(b, t), true
	case json.Number:
		if t == "" || !validJSONNumber(string(t)) {
			return b, false
		}
		return append(b, t...), true
	case []any:
		if t == nil {
			return append(b, "null"...), true
		}
		b = append(b, '[')
		for i, e := range t {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendBagValue(b, e); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case map[string]any:
		if t == nil {
			return append(b, "null"...), true
		}
		var kb [16]string
		keys := kb[:0]
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			var ok bool
			if b, ok = appendBagValue(b, t[k]); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	}
	return b, false
}

// validJSONNumber reports whether s is a number in JSON's grammar, as
// encoding/json checks a json.Number before writing it.
func validJSONNumber(s string) bool {
	p := wireParser{b: []byte(s), s: s}
	return p.number() && p.i == len(s)
}

const hexDigits = "0123456789abcdef"

// plainASCII marks the ASCII bytes a JSON string carries as they are.
var plainASCII = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendString appends s as a JSON string the way encoding/json does: HTML
// characters, U+2028 and U+2029 escaped, invalid UTF-8 replaced by U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if plainASCII[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
