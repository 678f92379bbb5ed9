// Package mask replaces secret values in a stream of log output with ***
// before anything is stored or shown.
//
// Each value is masked as written, in base64 (standard and URL alphabets,
// at each of the three alignments a value can have inside a longer encoded
// string, as in an Authorization: Basic header) and URL-encoded (query and
// path escaping, RFC 3986 and encodeURIComponent, either hex case). The stream may cut a value anywhere: the masker holds
// back a tail that could still become one, so a value split across two
// writes is masked as a whole.
//
// A value is masked twice over: in the raw bytes, and in what a reader is
// shown of them. The run page's renderer (views/ansi.go) drops escape
// sequences (colours, OSC titles and links) and control characters, and the
// log store drops NULs, so "sec\x1b[32mret" (git diff --color-words,
// grep --color=always) or "sec\x00ret" reads as the value whole on the page,
// in a terminal that cats the download, and in the download itself. The
// second pass matches values in the shown text only — the bytes the
// renderer keeps, tracked with the same escape-sequence grammar across
// writes — and replaces the shown characters of a match with *** while
// keeping the hidden bytes between them (so colours stay balanced).
//
// What the shown pass holds back is bounded: fewer than the longest form's
// length of shown bytes, and at most MaxHeldHidden hidden bytes after the
// first of them. A possible value whose shown bytes are spread over more
// hidden bytes than that is given up and its bytes flow on, so a stream of
// escape sequences after a value's first character cannot hold the log
// back (and its memory up) for as long as the run lasts. Giving up there
// is safe for what the shown pass is for: the tools that split a value by
// colour (git diff --color-words, grep --color, a hyperlink) put a few to a
// few dozen bytes between two characters of one word, far below the cap;
// output that hides a value under more than that is writing it to be
// unreadable on purpose, and such a writer can as well print the value
// reversed — the raw pass, which holds back fewer than the longest form's
// bytes and nothing else, still masks every value written whole.
package mask

import (
	"bytes"
	"encoding/base64"
	"net/url"
	"slices"
	"strings"
)

// Replacement stands for every masked occurrence.
const Replacement = "***"

// MinLen is the shortest value that can be masked: a shorter one would hide
// ordinary text everywhere in a log.
const MinLen = 4

// MaxHeldHidden bounds the hidden bytes the shown pass holds back behind a
// possible value's first shown byte (see the package comment for why
// flushing past it is safe).
const MaxHeldHidden = 1024

// minEncoded is the shortest encoded form worth masking: a base64 fragment
// of a value at an awkward alignment can be a few characters only, and
// those occur in any log.
const minEncoded = 4

// Masker masks a stream. It is not safe for concurrent use; the log writer
// serializes its writes.
type Masker struct {
	patterns [][]byte // longest first
	first    [256]bool
	maxLen   int
	pending  []byte // the raw pass's held-back tail

	// The shown pass: its held-back tail, which of its bytes a reader is
	// shown, and the escape-sequence state after the last byte seen.
	shownPending []byte
	shownVis     []bool
	esc          escState
}

// New builds a masker for values (those shorter than MinLen are ignored:
// the secret store refuses them). A masker without values passes the
// stream through.
func New(values []string) *Masker {
	m := &Masker{}
	seen := map[string]bool{}
	add := func(p string, min int) {
		if len(p) < min || seen[p] {
			return
		}
		seen[p] = true
		m.patterns = append(m.patterns, []byte(p))
	}
	for _, v := range values {
		if len(v) < MinLen {
			continue
		}
		add(v, MinLen)
		add(url.QueryEscape(v), MinLen)
		add(url.PathEscape(v), MinLen)
		// What other encoders write: RFC 3986's unreserved set alone, and
		// JavaScript's encodeURIComponent; in upper- and lower-case hex.
		for _, keep := range []string{"-_.~", "-_.!~*'()"} {
			add(percentEncode(v, keep, upperhex), MinLen)
			add(percentEncode(v, keep, lowerhex), MinLen)
		}
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			for _, p := range Base64Forms(enc, v) {
				add(p, minEncoded)
			}
		}
	}
	slices.SortFunc(m.patterns, func(a, b []byte) int { return len(b) - len(a) })
	for _, p := range m.patterns {
		m.first[p[0]] = true
		m.maxLen = max(m.maxLen, len(p))
	}
	return m
}

// Base64Forms are the parts of v's base64 encoding that appear whatever
// precedes v in the encoded bytes: v at offset 0, 1 and 2 of a 3-byte
// group. Characters that also carry bits of the neighbouring bytes are
// left out, so each form is found inside any encoding that contains v.
func Base64Forms(enc *base64.Encoding, v string) []string {
	var out []string
	for k := range 3 {
		src := append(make([]byte, k), v...)
		s := enc.WithPadding(base64.NoPadding).EncodeToString(src)
		from := 0
		if k > 0 {
			from = (8*k-1)/6 + 1 // the characters holding bits of the k filler bytes
		}
		to := 8 * len(src) / 6 // characters made of v's bits alone
		if to > from {
			out = append(out, s[from:to])
		}
	}
	return out
}

const (
	upperhex = "0123456789ABCDEF"
	lowerhex = "0123456789abcdef"
)

// percentEncode escapes every byte of v but ASCII letters, digits and keep.
func percentEncode(v, keep, hex string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(keep, c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// Write masks p and returns what may be emitted now; a tail that could be
// the start of a value is kept for the next write or Flush.
func (m *Masker) Write(p []byte) []byte {
	if len(m.patterns) == 0 {
		return p
	}
	data := append(m.pending, p...)
	out, rest := m.scan(data, false)
	m.pending = append(m.pending[:0:0], rest...)
	return m.writeShown(out, false)
}

// Flush returns the held-back tail, masked: the stream has ended.
func (m *Masker) Flush() []byte {
	if len(m.pending) == 0 && len(m.shownPending) == 0 {
		return nil
	}
	out, _ := m.scan(m.pending, true)
	m.pending = nil
	return m.writeShown(out, true)
}

// writeShown is the second pass: p (masked raw already) is classified byte
// by byte into shown and hidden, and values are matched in the shown bytes.
func (m *Masker) writeShown(p []byte, final bool) []byte {
	for _, c := range p {
		m.shownVis = append(m.shownVis, m.esc.shown(c))
	}
	data := append(m.shownPending, p...)
	out, rest := m.scanShown(data, m.shownVis, final)
	m.shownPending = append(m.shownPending[:0:0], data[rest:]...)
	m.shownVis = append(m.shownVis[:0:0], m.shownVis[rest:]...)
	return out
}

// scanShown masks data, matching values in its shown bytes (vis) only: a
// match's shown bytes become ***, the hidden ones between them are kept.
// Unless final, it stops before a shown tail that is a proper prefix of a
// value and returns where that tail starts in data; a tail carrying more
// than MaxHeldHidden hidden bytes is not held, its first byte flows on.
func (m *Masker) scanShown(data []byte, vis []bool, final bool) (out []byte, rest int) {
	idx := make([]int, 0, len(data)) // the shown bytes' places in data
	shown := make([]byte, 0, len(data))
	for i, c := range data {
		if vis[i] {
			idx = append(idx, i)
			shown = append(shown, c)
		}
	}
	out = make([]byte, 0, len(data))
	r := 0 // data[:r] is in out
	for i := 0; i < len(shown); {
		if !m.first[shown[i]] {
			i++
			continue
		}
		tail := shown[i:]
		hidden := (len(data) - idx[i]) - len(tail)
		if !final && len(tail) < m.maxLen && hidden <= MaxHeldHidden && m.couldStart(tail) {
			return append(out, data[r:idx[i]]...), idx[i]
		}
		matched := false
		for _, p := range m.patterns {
			if bytes.HasPrefix(tail, p) {
				start, end := idx[i], idx[i+len(p)-1]+1
				out = append(out, data[r:start]...)
				out = append(out, Replacement...)
				for k := start; k < end; k++ {
					if !vis[k] {
						out = append(out, data[k])
					}
				}
				r, i, matched = end, i+len(p), true
				break
			}
		}
		if !matched {
			i++
		}
	}
	return append(out, data[r:]...), len(data)
}

// escState follows the escape-sequence grammar of the run page's renderer
// (views.ANSIToHTML, which works on lines and on the text after a line's
// last carriage return): CSI (ESC [ parameters intermediates final), OSC
// (ESC ] … up to BEL or ESC \), ESC and one more byte; besides them every
// control character but tab, newline and carriage return is dropped, and
// so is DEL. NUL is dropped earlier, by the store. Keep the two in step.
type escState uint8

const (
	escGround   escState = iota
	escStart             // after ESC
	escCSIParam          // after ESC [ and parameter bytes
	escCSIInter          // after an intermediate byte
	escOSC               // inside ESC ] …
	escOSCEsc            // ESC inside an OSC
)

// shown reports whether the renderer shows byte c, and moves the state.
func (s *escState) shown(c byte) bool {
	if c == 0 {
		// The store drops NULs before the renderer reads the text, so a
		// NUL is no part of any sequence either ("\x1b\x00m" is "\x1bm").
		return false
	}
	for {
		switch *s {
		case escStart:
			switch c {
			case '\n', '\r': // the line ends the sequence; c is text again
				*s = escGround
				continue
			case '[':
				*s = escCSIParam
			case ']':
				*s = escOSC
			default:
				*s = escGround // ESC and this byte
			}
			return false
		case escCSIParam, escCSIInter:
			switch {
			case *s == escCSIParam && c >= 0x30 && c <= 0x3f:
			case c >= 0x20 && c <= 0x2f:
				*s = escCSIInter
			case c >= 0x40 && c <= 0x7e:
				*s = escGround
			default: // the sequence ends without a final byte; c is text again
				*s = escGround
				continue
			}
			return false
		case escOSC:
			switch c {
			case 0x07:
				*s = escGround
			case 0x1b:
				*s = escOSCEsc
			case '\n', '\r':
				*s = escGround
				continue
			}
			return false
		case escOSCEsc:
			if c == '\\' {
				*s = escGround
				return false
			}
			*s = escStart // this ESC ended the OSC and starts a sequence
			continue
		default:
			switch {
			case c == 0x1b:
				*s = escStart
				return false
			case c == '\t' || c == '\n' || c == '\r':
				return true
			case c < 0x20 || c == 0x7f:
				return false
			}
			return true
		}
	}
}

// scan masks data from the left, replacing the longest value found at each
// position. Unless final, it stops at a tail that is a proper prefix of a
// value (and returns that tail as rest).
func (m *Masker) scan(data []byte, final bool) (out, rest []byte) {
	out = make([]byte, 0, len(data))
	i := 0
	for i < len(data) {
		// Copy what cannot start a value in one go.
		j := i
		for j < len(data) && !m.first[data[j]] {
			j++
		}
		out = append(out, data[i:j]...)
		i = j
		if i == len(data) {
			break
		}
		tail := data[i:]
		if !final && len(tail) < m.maxLen && m.couldStart(tail) {
			return out, tail
		}
		matched := false
		for _, p := range m.patterns {
			if bytes.HasPrefix(tail, p) {
				out = append(out, Replacement...)
				i += len(p)
				matched = true
				break
			}
		}
		if !matched {
			out = append(out, data[i])
			i++
		}
	}
	return out, nil
}

// couldStart reports whether tail is a proper prefix of some value's form.
func (m *Masker) couldStart(tail []byte) bool {
	for _, p := range m.patterns {
		if len(p) > len(tail) && bytes.HasPrefix(p, tail) {
			return true
		}
	}
	return false
}

// Held reports how many bytes are held back: fewer than twice the longest
// form's length plus MaxHeldHidden.
func (m *Masker) Held() int { return len(m.pending) + len(m.shownPending) }
