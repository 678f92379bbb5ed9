package event

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// fingerprintVersion prefixes the hashed material. When the grouping rules
// change, the tag changes with them, so that new fingerprints can never be
// mistaken for old ones computed from different material.
const fingerprintVersion = "anvil-fp/1"

// Fingerprint returns the key that groups events into incidents (docs/architecture.md,
// "Incident lifecycle"), as 64 lower-case hex digits of SHA-256.
//
// With an exception it hashes the exception type and the file and function of
// every in-app frame, in order — or of every frame when none is marked in-app.
// Line numbers are left out on purpose: the same fault moves by a line with
// every unrelated edit above it, and an incident that split at every deploy
// would be no incident at all. A file's query string and fragment are left out
// too (bundles are often served as app.js?v=123). With an exception but no
// frames at all, the type alone would lump every error of that type together,
// so the normalized title is hashed with it.
//
// Without an exception it hashes NormalizeTitle(title).
//
// Compute it after Scrub: the material then contains no secret, and the same
// event always scrubs to the same text.
func Fingerprint(e *Event) string {
	// The material is gathered in one buffer and hashed once: writing it
	// piece by piece through hash.Hash made every piece escape to the heap.
	var arr [512]byte
	m := append(arr[:0], fingerprintVersion...)
	ex := e.Exception
	if ex == nil {
		m = appendMaterial(m, "title")
		m = appendMaterial(m, NormalizeTitle(e.Title))
		return hexSum(m)
	}
	m = appendMaterial(m, "exception")
	m = appendMaterial(m, ex.Type)
	inApp := false
	for i := range ex.Stacktrace {
		if ex.Stacktrace[i].InApp {
			inApp = true
			break
		}
	}
	frames := 0
	for i := range ex.Stacktrace {
		f := &ex.Stacktrace[i]
		if inApp && !f.InApp {
			continue
		}
		m = appendMaterial(m, stripQuery(f.File))
		m = appendMaterial(m, f.Function)
		frames++
	}
	if frames == 0 {
		m = appendMaterial(m, "title")
		m = appendMaterial(m, NormalizeTitle(e.Title))
	}
	return hexSum(m)
}

// hexSum is the SHA-256 of m in lower-case hex.
func hexSum(m []byte) string {
	sum := sha256.Sum256(m)
	return hex.EncodeToString(sum[:])
}

// appendMaterial appends s length-prefixed, so that no choice of file and
// function names can make two different frame lists hash the same material.
func appendMaterial(m []byte, s string) []byte {
	m = strconv.AppendInt(m, int64(len(s)), 10)
	m = append(m, ':')
	return append(m, s...)
}

func stripQuery(file string) string {
	if i := strings.IndexAny(file, "?#"); i >= 0 {
		return file[:i]
	}
	return file
}

// emailRe is the one shape NormalizeTitle still matches with a regular
// expression: an address is recognised from its '@' outwards, which a
// left-to-right scanner cannot do cheaply, and the regex only runs on titles
// that contain an '@'.
var emailRe = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`)

// NormalizeTitle reduces a message to its shape, so that "timeout after 30s
// for order 4711" and "timeout after 12s for order 815" group together:
// quoted values ('…', "…", `…`, ‘…’, “…” within one line) become <str>,
// UUIDs <uuid>, emails <email>, IPv4 addresses <ip>, dates and times
// (2026-09-16, 2026-09-16T10:11:12Z, 16/09/2026, 10:11:12) <date>, hex strings
// of 8 or more digits <hex> (only when one of them is a decimal digit, so that
// a plain word spelled from a–f is kept), and every other number <n>;
// whitespace is collapsed and the result lower-cased. A single quote opens a
// quoted value only after a non-letter, so the apostrophe in "can't" does not.
//
// It is one hand-written left-to-right pass rather than a chain of regular
// expressions: Go's regexp engine made the chain cost tens of microseconds
// per title, more than validating the whole event.
func NormalizeTitle(s string) string {
	if strings.IndexByte(s, '@') >= 0 {
		s = emailRe.ReplaceAllLiteralString(s, "<email>")
	}
	var b strings.Builder
	b.Grow(len(s))
	nonASCII := false
	space := false // a blank is pending
	emit := func(str string) {
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteString(str)
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' {
			space = true
			i++
			continue
		}
		if n := quotedAt(s, i); n > 0 {
			emit("<str>")
			i += n
			continue
		}
		if isAlnum(c) && (i == 0 || !isWordByte(s[i-1])) {
			if n, ph := shapeAt(s, i); n > 0 {
				emit(ph)
				i += n
				continue
			}
		}
		if isDigit(c) {
			j := digitsEnd(s, i)
			if j+1 < len(s) && s[j] == '.' && isDigit(s[j+1]) {
				j = digitsEnd(s, j+1)
			}
			emit("<n>")
			i = j
			continue
		}
		if c >= utf8.RuneSelf {
			nonASCII = true
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteByte(lower(c))
		i++
	}
	out := b.String()
	if nonASCII {
		out = strings.TrimFunc(strings.ToLower(out), unicode.IsSpace)
	}
	return out
}

// quotedAt returns the length of a quoted value starting at i, or 0.
func quotedAt(s string, i int) int {
	var open, closing string
	switch c := s[i]; {
	case c == '"':
		open, closing = `"`, `"`
	case c == '\'' || c == '`':
		open, closing = s[i:i+1], s[i:i+1]
	case strings.HasPrefix(s[i:], "“"):
		open, closing = "“", "”"
	case strings.HasPrefix(s[i:], "‘"):
		open, closing = "‘", "’"
	default:
		return 0
	}
	if open != `"` && open != "“" && i > 0 {
		if r, _ := utf8.DecodeLastRuneInString(s[:i]); r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) {
			return 0 // an apostrophe inside a word
		}
	}
	rest := s[i+len(open):]
	end := strings.Index(rest, closing)
	if end < 0 || strings.IndexByte(rest[:end], '\n') >= 0 {
		return 0
	}
	return len(open) + end + len(closing)
}

// shapeAt recognises, at a word start, the shapes that contain digits and
// must be replaced whole before the number rule breaks them apart.
func shapeAt(s string, i int) (int, string) {
	if n := uuidAt(s, i); n > 0 {
		return n, "<uuid>"
	}
	if n := ipv4At(s, i); n > 0 {
		return n, "<ip>"
	}
	if n := dateAt(s, i); n > 0 {
		return n, "<date>"
	}
	if n := hexAt(s, i); n > 0 {
		return n, "<hex>"
	}
	return 0, ""
}

func digitsEnd(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

func uuidAt(s string, i int) int {
	if len(s)-i < 36 || !isCanonicalUUID(s[i:i+36]) || !boundaryAt(s, i+36) {
		return 0
	}
	return 36
}

func ipv4At(s string, i int) int {
	j := i
	for octet := 0; octet < 4; octet++ {
		if octet > 0 {
			if j >= len(s) || s[j] != '.' {
				return 0
			}
			j++
		}
		k := digitsEnd(s, j)
		if k == j || k-j > 3 {
			return 0
		}
		j = k
	}
	if !boundaryAt(s, j) {
		return 0
	}
	return j - i
}

// dateAt matches 2026-09-16 with an optional time and zone, 16/09/2026 and
// 10:11:12, each ending at a word boundary; the longest form that does wins.
func dateAt(s string, i int) int {
	var buf [4]int
	best := 0
	for _, j := range dateEnds(s, i, buf[:0]) {
		if boundaryAt(s, j) {
			best = j - i
		}
	}
	return best
}

// dateEnds appends, shortest first, the ends of every form of a date or
// time that starts at i.
func dateEnds(s string, i int, ends []int) []int {
	switch {
	case isoDateAt(s, i):
		return isoTimeEnds(s, i+10, append(ends, i+10))
	case digitsN(s, i, 2) && len(s) > i+2 && s[i+2] == ':':
		if k, ok := clockAt(s, i, true); ok {
			ends = append(ends, k)
		}
	default:
		if y, ok := slashDateAt(s, i); ok {
			ends = append(ends, y)
		}
	}
	return ends
}

// isoDateAt matches 2026-09-16 at i.
func isoDateAt(s string, i int) bool {
	return digitsN(s, i, 4) && len(s) > i+9 && s[i+4] == '-' && digitsN(s, i+5, 2) && s[i+7] == '-' && digitsN(s, i+8, 2)
}

// isoTimeEnds appends the ends of the time that may follow a date ending
// at j ('T' or a space, then a clock), and of its zone.
func isoTimeEnds(s string, j int, ends []int) []int {
	if j+1 >= len(s) || (s[j] != 'T' && s[j] != ' ') {
		return ends
	}
	k, ok := clockAt(s, j+1, false)
	if !ok {
		return ends
	}
	ends = append(ends, k)
	if z, ok := zoneAt(s, k); ok {
		ends = append(ends, z)
	}
	return ends
}

// clockAt matches 10:11(:12(.123)) at j; secondsRequired refuses 10:11.
func clockAt(s string, j int, secondsRequired bool) (int, bool) {
	if !digitsN(s, j, 2) || j+2 >= len(s) || s[j+2] != ':' || !digitsN(s, j+3, 2) {
		return 0, false
	}
	j += 5
	if j+2 < len(s) && s[j] == ':' && digitsN(s, j+1, 2) {
		j += 3
		if j+1 < len(s) && (s[j] == '.' || s[j] == ',') && isDigit(s[j+1]) {
			j = digitsEnd(s, j+1)
		}
	} else if secondsRequired {
		return 0, false
	}
	return j, true
}

// zoneAt matches Z, +02, +0200 or +02:00 (or -) at k.
func zoneAt(s string, k int) (int, bool) {
	switch {
	case k < len(s) && s[k] == 'Z':
		return k + 1, true
	case k < len(s) && (s[k] == '+' || s[k] == '-') && digitsN(s, k+1, 2):
		z := k + 3
		if z < len(s) && s[z] == ':' {
			z++
		}
		if digitsN(s, z, 2) {
			return z + 2, true
		}
	}
	return 0, false
}

// slashDateAt matches 16/09/2026 (one or two digits, one or two, two to
// four) at i.
func slashDateAt(s string, i int) (int, bool) {
	a := digitsEnd(s, i)
	if a-i < 1 || a-i > 2 || a >= len(s) || s[a] != '/' {
		return 0, false
	}
	m := digitsEnd(s, a+1)
	if m-a-1 < 1 || m-a-1 > 2 || m >= len(s) || s[m] != '/' {
		return 0, false
	}
	y := digitsEnd(s, m+1)
	if y-m-1 < 2 || y-m-1 > 4 {
		return 0, false
	}
	return y, true
}

// digitsN reports whether s holds n digits from j.
func digitsN(s string, j, n int) bool {
	if j+n > len(s) {
		return false
	}
	for k := j; k < j+n; k++ {
		if !isDigit(s[k]) {
			return false
		}
	}
	return true
}

// hexAt matches (0x)?[0-9a-f]{8,} (any case) ending at a word boundary and
// holding at least one decimal digit.
func hexAt(s string, i int) int {
	start := i
	if i+1 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') {
		start = i + 2
	}
	for _, from := range []int{start, i} {
		j, digit := from, from != i // "0x" itself holds a digit
		for j < len(s) && isHex(s[j]) {
			digit = digit || isDigit(s[j])
			j++
		}
		if j-from >= 8 && digit && boundaryAt(s, j) {
			return j - i
		}
		if from == i {
			break
		}
	}
	return 0
}
