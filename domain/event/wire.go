package event

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// decodeWireFast decodes the common shape of an element straight into w, in
// one pass and without reflection: exact field names, each at most once,
// values of the declared types, strings without \u escapes. It returns
// false — and leaves w for the caller to reset — on anything else, which
// decodeWire then hands to the general decoders; it never accepts what
// encoding/json refuses, and what it accepts it decodes as encoding/json
// does (FuzzDecodeWire holds decodeWire to that, this path first).
//
// Every unescaped string it returns is a substring of one copy of raw, so
// an event costs one string allocation for all of them.
func decodeWireFast(raw []byte, w *wireEvent) bool {
	p := wireParser{b: raw, s: string(raw)}
	p.ws()
	if !p.event(w) {
		return false
	}
	p.ws()
	return p.i == len(p.b)
}

// event reads one event object into w, from p at its opening brace; false
// is decodeWireFast's false.
func (p *wireParser) event(w *wireEvent) bool {
	return p.object(p.members(wireEventFields[:], 0, func(f int) bool {
		var ok bool
		switch f {
		case 0:
			w.SchemaVersion, ok = p.rawValue()
		case 1:
			w.EventID, ok = p.rawValue()
		case 2:
			ok = p.str(&w.Timestamp)
		case 3:
			ok = p.str(&w.Title)
		case 4:
			ok = p.str(&w.Level)
		case 5:
			ok = p.str(&w.Environment)
		case 6:
			ok = p.str(&w.Service)
		case 7:
			ok = p.str(&w.Language)
		case 8:
			ok = nullableObject(p, &w.SDK, wireSDKFields[:], p.sdk)
		case 9:
			ok = nullableObject(p, &w.Exception, wireExceptionFields[:], p.exception)
		case 10:
			ok = p.str(&w.Release)
		case 11:
			ok = nullableObject(p, &w.Request, wireRequestFields[:], p.request)
		case 12:
			ok = nullableObject(p, &w.User, wireUserFields[:], p.user)
		case 13:
			ok = p.strings(&w.Breadcrumbs)
		case 14:
			ok = p.tags(&w.Tags)
		case 15:
			w.Enrichment, ok = p.rawValue()
		case 16:
			w.AgentContext, ok = p.rawValue()
		case 17:
			w.Browser, ok = p.rawValue()
		case 18:
			w.OS, ok = p.rawValue()
		case 19:
			w.DebugMeta, ok = p.rawValue()
		}
		return ok
	}))
}

// The fields of each wire type, in the order of the switches that fill them.
var (
	wireEventFields = [...]string{"schema_version", "event_id", "timestamp", "title", "level", "environment", "service",
		"language", "sdk", "exception", "release", "request", "user", "breadcrumbs", "tags", "enrichment", "agent_context",
		"browser", "os", "debug_meta"}
	wireSDKFields       = [...]string{"name", "version", "runtime"}
	wireExceptionFields = [...]string{"type", "message", "stacktrace"}
	wireRequestFields   = [...]string{"method", "url", "status_code"}
	wireUserFields      = [...]string{"id"}
	wireFrameFields     = [...]string{"file", "line", "function", "context_code", "in_app", "abs_path", "colno", "symbolication"}
)

// wireParser reads one JSON value from b; s is the same bytes as a string.
type wireParser struct {
	b    []byte
	s    string
	i    int
	seen uint64 // fields met in the object being read (see field)
}

// ws and str keep the index in a local while they loop: through p, every
// step would store it back to memory, which cost str a third of its time.
func (p *wireParser) ws() {
	i, b := p.i, p.b
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	p.i = i
}

func (p *wireParser) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *wireParser) literal(lit string) bool {
	// The first byte first: most calls ask whether a string is null.
	if p.i < len(p.b) && p.b[p.i] == lit[0] && strings.HasPrefix(p.s[p.i:], lit) {
		p.i += len(lit)
		return true
	}
	return false
}

// field finds key among names: its index, -1 for a field the type does not
// have, ok false for a key encoding/json would match to a field by folding
// case, and for a field met twice (encoding/json merges or replaces; the
// general path decides).
func (p *wireParser) field(key string, names []string) (int, bool) {
	for i, n := range names {
		if key == n {
			if p.seen&(1<<i) != 0 {
				return 0, false
			}
			p.seen |= 1 << i
			return i, true
		}
	}
	for _, n := range names {
		if strings.EqualFold(key, n) {
			return 0, false
		}
	}
	return -1, true
}

// members is the member reader of an object whose fields are names (at
// nesting depth depth): read reads the value of field f; a key the type
// does not have is skipped, its value checked.
func (p *wireParser) members(names []string, depth int, read func(f int) bool) func(key string) bool {
	return func(key string) bool {
		f, ok := p.field(key, names)
		switch {
		case !ok:
			return false
		case f < 0:
			return p.skip(depth)
		}
		return read(f)
	}
}

// nullableObject reads null into a nil *T, or an object with the fields
// names into a new T, read reading field f's value into it.
func nullableObject[T any](p *wireParser, dst **T, names []string, read func(v *T, f int) bool) bool {
	if p.literal("null") {
		*dst = nil
		return true
	}
	v := new(T)
	*dst = v
	return p.object(p.members(names, 1, func(f int) bool { return read(v, f) }))
}

// object reads an object, calling member for each key with p at its value;
// member reads the value. Each object has its own set of fields met.
func (p *wireParser) object(member func(key string) bool) bool {
	if p.peek() != '{' {
		return false
	}
	saved := p.seen
	p.seen = 0
	defer func() { p.seen = saved }()
	p.i++
	p.ws()
	if p.peek() == '}' {
		p.i++
		return true
	}
	for {
		var key string
		if p.peek() != '"' || !p.str(&key) {
			return false
		}
		p.ws()
		if p.peek() != ':' {
			return false
		}
		p.i++
		p.ws()
		if !member(key) {
			return false
		}
		p.ws()
		switch p.peek() {
		case ',':
			p.i++
			p.ws()
		case '}':
			p.i++
			return true
		default:
			return false
		}
	}
}

// str reads a string into dst; null leaves dst as it is, as encoding/json
// does. A \u escape or a control character sends the element elsewhere.
func (p *wireParser) str(dst *string) bool {
	if p.literal("null") {
		return true
	}
	if p.peek() != '"' {
		return false
	}
	start, b := p.i+1, p.b
	i := start
	for i < len(b) && !strStop[b[i]] {
		i++
	}
	p.i = i
	switch {
	case i >= len(b) || b[i] < 0x20:
		return false
	case b[i] == '\\':
		return p.escaped(dst, start)
	}
	*dst = p.s[start:i]
	p.i = i + 1
	return true
}

// strStop marks the bytes that end str's plain run: the closing quote, a
// backslash, and the control characters JSON refuses in a string.
var strStop = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// escaped finishes a string with escapes, from p.i at its first backslash.
func (p *wireParser) escaped(dst *string, start int) bool {
	var sb strings.Builder
	sb.Grow(p.stringEnd() - start)
	sb.WriteString(p.s[start:p.i])
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			*dst = sb.String()
			p.i++
			return true
		case c < 0x20:
			return false
		case c != '\\':
			sb.WriteByte(c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.b) {
			return false
		}
		switch p.b[p.i+1] {
		case '"', '\\', '/':
			sb.WriteByte(p.b[p.i+1])
		case 'b':
			sb.WriteByte('\b')
		case 'f':
			sb.WriteByte('\f')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		default: // \u, and what is no escape at all
			return false
		}
		p.i += 2
	}
	return false
}

// stringEnd is the index of the quote that ends the string p is in, or
// len(p.b): an upper bound of the unescaped string's length from its start.
func (p *wireParser) stringEnd() int {
	for i := p.i; i < len(p.b); i++ {
		switch p.b[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(p.b)
}

// integer reads a JSON integer that fits an int without question.
func (p *wireParser) integer(dst *int) bool {
	if p.literal("null") {
		return true
	}
	start := p.i
	neg := p.peek() == '-'
	if neg {
		p.i++
	}
	n, digits := 0, 0
	for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
		n = n*10 + int(p.b[p.i]-'0')
		p.i++
		digits++
	}
	if digits == 0 || digits > 18 || (p.b[start] == '0' || neg && p.b[start+1] == '0') && digits > 1 {
		return false
	}
	switch p.peek() {
	case '.', 'e', 'E':
		return false // a fraction or exponent: encoding/json's to refuse
	}
	if neg {
		n = -n
	}
	*dst = n
	return true
}

func (p *wireParser) boolean(dst *bool) bool {
	switch {
	case p.literal("true"):
		*dst = true
	case p.literal("false"):
		*dst = false
	case p.literal("null"):
	default:
		return false
	}
	return true
}

// rawValue reads any value as the bytes it was written with.
func (p *wireParser) rawValue() (json.RawMessage, bool) {
	start := p.i
	if !p.skip(0) {
		return nil, false
	}
	return json.RawMessage(p.b[start:p.i:p.i]), true
}

// maxSkipDepth bounds the nesting skip follows; deeper values go to the
// general path.
const maxSkipDepth = 64

// skip reads past any value, checking that it is valid JSON.
func (p *wireParser) skip(depth int) bool {
	if depth > maxSkipDepth {
		return false
	}
	switch c := p.peek(); {
	case c == '"':
		var s string
		return p.str(&s)
	case c == '{':
		return p.object(func(string) bool { return p.skip(depth + 1) })
	case c == '[':
		return p.array(func() bool { return p.skip(depth + 1) })
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return p.number()
	}
	return false
}

// number reads past a number in JSON's grammar.
func (p *wireParser) number() bool {
	if p.peek() == '-' {
		p.i++
	}
	switch c := p.peek(); {
	case c == '0':
		p.i++
	case '1' <= c && c <= '9':
		p.digits()
	default:
		return false
	}
	if p.peek() == '.' {
		p.i++
		if !p.digits() {
			return false
		}
	}
	if c := p.peek(); c == 'e' || c == 'E' {
		p.i++
		if c := p.peek(); c == '+' || c == '-' {
			p.i++
		}
		if !p.digits() {
			return false
		}
	}
	return true
}

func (p *wireParser) digits() bool {
	start := p.i
	for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
		p.i++
	}
	return p.i > start
}

// array reads an array, calling elem with p at each element.
func (p *wireParser) array(elem func() bool) bool {
	if p.peek() != '[' {
		return false
	}
	p.i++
	p.ws()
	if p.peek() == ']' {
		p.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		p.ws()
		switch p.peek() {
		case ',':
			p.i++
			p.ws()
		case ']':
			p.i++
			return true
		default:
			return false
		}
	}
}

// sdk, exception, request and user read field f (in the order of its
// wire*Fields) of the objects nullableObject reads.
func (p *wireParser) sdk(v *wireSDK, f int) bool {
	switch f {
	case 0:
		return p.str(&v.Name)
	case 1:
		return p.str(&v.Version)
	}
	return p.str(&v.Runtime)
}

func (p *wireParser) exception(v *wireException, f int) bool {
	switch f {
	case 0:
		return p.str(&v.Type)
	case 1:
		return p.str(&v.Message)
	}
	return p.frames(&v.Stacktrace)
}

func (p *wireParser) request(v *wireRequest, f int) bool {
	switch f {
	case 0:
		return p.str(&v.Method)
	case 1:
		return p.str(&v.URL)
	}
	return p.integer(&v.StatusCode)
}

func (p *wireParser) user(v *wireUser, _ int) bool { return p.str(&v.ID) }

func (p *wireParser) frames(dst *[]Frame) bool {
	if p.literal("null") {
		*dst = nil
		return true
	}
	frames := make([]Frame, 0, 16)
	ok := p.array(func() bool {
		frames = append(frames, Frame{})
		f := &frames[len(frames)-1]
		if p.literal("null") {
			return true
		}
		return p.object(p.members(wireFrameFields[:], 2, func(n int) bool {
			switch n {
			case 0:
				return p.str(&f.File)
			case 1:
				return p.integer(&f.Line)
			case 2:
				return p.str(&f.Function)
			case 3:
				return p.str(&f.ContextCode)
			case 4:
				return p.boolean(&f.InApp)
			case 5:
				return p.str(&f.AbsPath)
			case 7:
				// The server's field (docs/sourcemap.md): left to the
				// general decoder, and Validate drops it.
				return false
			}
			return p.integer(&f.Colno)
		}))
	})
	*dst = frames
	return ok
}

func (p *wireParser) strings(dst *[]string) bool {
	if p.literal("null") {
		*dst = nil
		return true
	}
	out := []string{}
	ok := p.array(func() bool {
		out = append(out, "")
		return p.str(&out[len(out)-1])
	})
	*dst = out
	return ok
}

func (p *wireParser) tags(dst *map[string]string) bool {
	if p.literal("null") {
		*dst = nil
		return true
	}
	m := map[string]string{}
	*dst = m
	return p.object(func(key string) bool { // a repeated key replaces, as in encoding/json
		var v string
		if !p.str(&v) {
			return false
		}
		m[key] = v
		return true
	})
}

// decodeBagFast decodes a bag (enrichment, agent_context) as encoding/json
// decodes it into a map[string]any with UseNumber, for the common shape:
// valid UTF-8, strings without \u escapes, no key twice in one object,
// nesting within maxSkipDepth. It returns false on anything else, which
// decodeBag hands to encoding/json; a bag decoded here costs a fraction of
// encoding/json's reflection (docs/feed.md, "The write path and its
// costs"). FuzzDecodeBag holds it to encoding/json.
func decodeBagFast(raw []byte) (map[string]any, bool) {
	if !utf8.Valid(raw) {
		return nil, false
	}
	p := wireParser{b: raw, s: string(raw)}
	p.ws()
	if p.peek() != '{' {
		return nil, false
	}
	v, ok := p.anyValue(0)
	if !ok {
		return nil, false
	}
	p.ws()
	if p.i != len(p.b) {
		return nil, false
	}
	return v.(map[string]any), true
}

// anyValue reads any value as encoding/json decodes it into an any with
// UseNumber: objects as map[string]any, arrays as []any, numbers as
// json.Number.
func (p *wireParser) anyValue(depth int) (any, bool) {
	if depth > maxSkipDepth {
		return nil, false
	}
	switch c := p.peek(); {
	case c == '"':
		var s string
		ok := p.str(&s)
		return s, ok
	case c == '{':
		m := map[string]any{}
		ok := p.object(func(key string) bool {
			if _, twice := m[key]; twice {
				return false // encoding/json keeps the last; the general path decides
			}
			v, ok := p.anyValue(depth + 1)
			m[key] = v
			return ok
		})
		return m, ok
	case c == '[':
		a := []any{}
		ok := p.array(func() bool {
			v, ok := p.anyValue(depth + 1)
			a = append(a, v)
			return ok
		})
		return a, ok
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		start := p.i
		ok := p.number()
		return json.Number(p.s[start:p.i]), ok
	}
	return nil, false
}
