package event

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrRedactionFailed is returned by Scrub when an event cannot be scrubbed
// safely. The ingest refuses such an event as redaction_failed: storing
// something the scrubber could not read in full would be storing an unknown.
var ErrRedactionFailed = errors.New("event cannot be scrubbed safely")

// Markers that replace what Scrub removes. Free text is masked in place,
// never blanked, so that the sentence around a secret stays readable.
const (
	filtered   = "[Filtered]"
	creditCard = "[creditcard]"
	ibanMark   = "[iban]"
	privateKey = "[private key]"
	ssnMark    = "[ssn]"
)

// maxScrubNodes bounds the walk over enrichment and agent_context. Validate
// already cuts a bag to MaxBagNodes; the generous bound here only exists for
// events that did not come through Validate.
const maxScrubNodes = 20 * MaxBagNodes

// Scrub masks secrets in e in place, before anything is stored.
//
// Two mechanisms, after Sentry's Relay defaults:
//
//   - Keys that name secrets lose their values: in tags, enrichment and
//     agent_context (at any depth) the value becomes "[Filtered]". Keys are
//     matched by token, not by substring — split on punctuation and camelCase
//     — so that "auth" and "api_key" match while "authenticated" and "author"
//     do not; over-matching on substrings is the complaint users make most.
//   - Free text (title, exception message, frame files and context lines,
//     breadcrumbs, request.url, tag values and every string in the bags) is
//     masked in place: "name=value" and "name: value" pairs whose name is
//     secret-like (which covers URL query parameters), bearer and basic
//     credentials, PEM private keys, passwords in URLs, well-known key
//     formats (AWS, GitHub, Slack, Stripe, GitLab, Google, anvil's own
//     anv_srv_/anv_pat_, JWTs), card numbers that pass the Luhn check, IBANs
//     that pass the mod-97 check and US social security numbers.
//
// Checks with a checksum keep their false positives low: a 16-digit order id
// that fails Luhn stays as it is.
//
// Scrub returns an error wrapping ErrRedactionFailed, and the caller must not
// store the event, when it cannot vouch for the result: a string that is not
// valid UTF-8 (the patterns cannot be trusted on it), a bag nested deeper
// than MaxBagDepth or larger than the walk's bound, or a value of a type it
// does not know how to walk.
func Scrub(e *Event) error {
	var err error
	if e.Title, err = scrubField("title", e.Title); err != nil {
		return err
	}
	if ex := e.Exception; ex != nil {
		if !utf8.ValidString(ex.Type) {
			return invalidUTF8("exception.type")
		}
		if ex.Message, err = scrubField("exception.message", ex.Message); err != nil {
			return err
		}
		for i := range ex.Stacktrace {
			f := &ex.Stacktrace[i]
			if !utf8.ValidString(f.Function) {
				return invalidUTF8("exception.stacktrace.function")
			}
			if f.File, err = scrubField("exception.stacktrace.file", f.File); err != nil {
				return err
			}
			if f.ContextCode, err = scrubField("exception.stacktrace.context_code", f.ContextCode); err != nil {
				return err
			}
			if f.AbsPath, err = scrubField("exception.stacktrace.abs_path", f.AbsPath); err != nil {
				return err
			}
			if f.Symbolication != nil {
				if err := scrubSymbolication(f.Symbolication); err != nil {
					return err
				}
			}
		}
	}
	if e.Request != nil {
		if e.Request.URL, err = scrubField("request.url", e.Request.URL); err != nil {
			return err
		}
	}
	for i, b := range e.Breadcrumbs {
		if e.Breadcrumbs[i], err = scrubField("breadcrumbs", b); err != nil {
			return err
		}
	}
	if err := scrubTags(e.Tags); err != nil {
		return err
	}
	if err := scrubClients(e); err != nil {
		return err
	}
	w := bagWalker{}
	if err := w.object("enrichment", e.Enrichment, 0); err != nil {
		return err
	}
	return w.object("agent_context", e.AgentContext, 0)
}

func invalidUTF8(field string) error {
	return fmt.Errorf("%w: %s is not valid UTF-8", ErrRedactionFailed, field)
}

func scrubField(field, s string) (string, error) {
	sc := scanText(s)
	if sc.class&cHigh != 0 && !utf8.ValidString(s) {
		return "", invalidUTF8(field)
	}
	return scrubScanned(s, sc), nil
}

func scrubTags(tags map[string]string) error {
	var renamed map[string]string
	for k, v := range tags {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return invalidUTF8("tags")
		}
		if isSecretKey(k) {
			if v != "" {
				tags[k] = filtered
			}
		} else {
			tags[k] = scrubText(v)
		}
		renamed = noteRename(renamed, k)
	}
	applyRenames(tags, renamed, filtered)
	return nil
}

// noteRename records that key k must move to its scrubbed spelling (a key
// can hold a secret too, such as a token used as a map key).
func noteRename(renamed map[string]string, k string) map[string]string {
	if nk := scrubText(k); nk != k {
		if renamed == nil {
			renamed = make(map[string]string)
		}
		renamed[k] = nk
	}
	return renamed
}

// applyRenames moves values to their scrubbed keys; when a scrubbed key
// clashes with an existing one, the moved value is replaced by clash rather
// than kept in the clear or silently dropped.
func applyRenames[V any](m map[string]V, renamed map[string]string, clash V) {
	for old, nk := range renamed {
		v := m[old]
		delete(m, old)
		if _, taken := m[nk]; taken {
			v = clash
		}
		m[nk] = v
	}
}

// bagWalker scrubs enrichment and agent_context with a type switch rather
// than reflection: these are the shapes encoding/json produces, and anything
// else is refused instead of being guessed at.
type bagWalker struct {
	nodes int
}

func (w *bagWalker) object(field string, m map[string]any, depth int) error {
	if depth > MaxBagDepth {
		return fmt.Errorf("%w: %s is nested deeper than %d levels", ErrRedactionFailed, field, MaxBagDepth)
	}
	var renamed map[string]string
	for k, v := range m {
		if !utf8.ValidString(k) {
			return invalidUTF8(field)
		}
		if isSecretKey(k) {
			if v != nil && v != "" {
				m[k] = filtered
			}
		} else {
			nv, err := w.value(field, v, depth+1)
			if err != nil {
				return err
			}
			m[k] = nv
		}
		renamed = noteRename(renamed, k)
	}
	applyRenames(m, renamed, any(filtered))
	return nil
}

func (w *bagWalker) value(field string, v any, depth int) (any, error) {
	w.nodes++
	if w.nodes > maxScrubNodes {
		return nil, fmt.Errorf("%w: %s holds more than %d values", ErrRedactionFailed, field, maxScrubNodes)
	}
	switch t := v.(type) {
	case nil, bool:
		return v, nil
	case string:
		s, err := scrubField(field, t)
		if err == nil && s == t {
			return v, nil // unchanged: no new box for the same string
		}
		return s, err
	case json.Number:
		return scrubNumber(string(t), v), nil
	case float64:
		return scrubNumber(strconv.FormatFloat(t, 'f', -1, 64), v), nil
	case int:
		return scrubNumber(strconv.Itoa(t), v), nil
	case int64:
		return scrubNumber(strconv.FormatInt(t, 10), v), nil
	case map[string]any:
		return t, w.object(field, t, depth)
	case map[string]string:
		if depth > MaxBagDepth {
			return nil, fmt.Errorf("%w: %s is nested deeper than %d levels", ErrRedactionFailed, field, MaxBagDepth)
		}
		return t, scrubTags(t)
	case []any:
		if depth > MaxBagDepth {
			return nil, fmt.Errorf("%w: %s is nested deeper than %d levels", ErrRedactionFailed, field, MaxBagDepth)
		}
		for i, item := range t {
			nv, err := w.value(field, item, depth+1)
			if err != nil {
				return nil, err
			}
			t[i] = nv
		}
		return t, nil
	case []string:
		for i, s := range t {
			ns, err := scrubField(field, s)
			if err != nil {
				return nil, err
			}
			t[i] = ns
		}
		return t, nil
	default:
		return nil, fmt.Errorf("%w: %s holds a value of type %T that cannot be walked", ErrRedactionFailed, field, v)
	}
}

// scrubNumber masks a number that is really a card number (a JSON number is
// as good a carrier for one as a string) and leaves every other number as the
// value it was.
func scrubNumber(digits string, orig any) any {
	if len(digits) < 15 {
		return orig
	}
	if s := maskCards(digits); s != digits {
		return s
	}
	return orig
}

// secretTokens are the key tokens (after splitting and lower-casing) that
// name secrets. Two-word names ("api_key", "private_key", "session_id") are
// matched by joining adjacent tokens, so "apiKey", "API-KEY" and "apikey" are
// all one name.
var secretTokens = map[string]bool{
	"password": true, "passwd": true, "pwd": true, "passphrase": true,
	"secret": true, "secrets": true,
	"apikey": true, "privatekey": true,
	"auth": true, "authorization": true, "bearer": true,
	"credential": true, "credentials": true, "creds": true,
	"token": true, "tokens": true,
	"cookie": true, "cookies": true,
	"session": true, "sessionid": true, "sessid": true, "phpsessid": true, "jsessionid": true,
	"csrf": true, "xsrf": true, "csrftoken": true, "xsrftoken": true,
	"ssn": true, "cvv": true, "cvc": true,
}

// isSecretKey reports whether a key names a secret, matching by token: the
// key is split at every character that is not an ASCII letter or digit and at
// camelCase boundaries ("sessionId" → session, id; "APIKey" → api, key), and
// each token, and each pair of adjacent tokens joined, is looked up in
// secretTokens. "mysql_pwd" matches through "pwd"; "authenticated" and
// "author" are single tokens that are not in the set.
func isSecretKey(key string) bool {
	var prev, cur [32]byte
	prevN, curN := -1, 0
	flush := func() bool {
		if curN == 0 {
			return false
		}
		if curN <= len(cur) {
			if secretTokens[string(cur[:curN])] {
				return true
			}
			if prevN > 0 && prevN+curN <= 32 {
				var pair [32]byte
				n := copy(pair[:], prev[:prevN])
				n += copy(pair[n:], cur[:curN])
				if secretTokens[string(pair[:n])] {
					return true
				}
			}
			prevN = copy(prev[:], cur[:curN])
		} else {
			prevN = 0 // a token longer than any name in the set
		}
		curN = 0
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !isAlnum(c) {
			if flush() {
				return true
			}
			continue
		}
		if isUpper(c) && curN > 0 {
			p := key[i-1]
			if isLower(p) || isDigit(p) || (isUpper(p) && i+1 < len(key) && isLower(key[i+1])) {
				if flush() {
					return true
				}
			}
		}
		if curN < len(cur) {
			cur[curN] = lower(c)
		}
		curN++
	}
	return flush()
}

func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }
func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func lower(c byte) byte {
	if isUpper(c) {
		return c + ('a' - 'A')
	}
	return c
}

// isWordByte is the \b notion of a word character: [A-Za-z0-9_].
func isWordByte(c byte) bool { return isAlnum(c) || c == '_' }

// Patterns, compiled once at package initialisation: the ingest scrubs every
// event it stores and must not pay for compilation per call.
var (
	// PEM private keys, including one whose END line was cut off by a bound.
	pemRe = regexp.MustCompile(`(?s)-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)`)
	// //user:PASSWORD@host — the password runs to the last '@' of the
	// authority, so that a password containing '@' is masked whole.
	urlPassRe = regexp.MustCompile(`(//[^\s:@/?#]*:)[^\s/?#]+@`)
	// Repeated "Bearer" is swallowed so that "Bearer Bearer x" loses x too.
	bearerRe = regexp.MustCompile(`(?i)\bbearer(?:\s+bearer)*\s+\S+`)
	basicRe  = regexp.MustCompile(`(?i)\bbasic\s+([A-Za-z0-9+/]{6,}={0,2})`)
	keyRe    = regexp.MustCompile(`\b(?:(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}` +
		`|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}` +
		`|xox[baprs]-[A-Za-z0-9-]{10,}` +
		`|[sr]k_(?:live|test)_[A-Za-z0-9]{10,}` +
		`|anv_(?:srv|pat)_[A-Za-z0-9]+` +
		`|glpat-[A-Za-z0-9_-]{20,}` +
		`|AIza[0-9A-Za-z_-]{35}` +
		`|eyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*)`)
	ssnRe = regexp.MustCompile(`\b(\d{3})-(\d{2})-(\d{4})\b`)
)

// keyLiterals are substrings every match of keyRe contains (one per
// alternative, as long as the alternative allows); a string without any of
// them skips the regex. FuzzKeyLiterals holds them to keyRe.
var keyLiterals = []string{"AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA",
	"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xoxb-", "xoxa-", "xoxp-", "xoxr-", "xoxs-",
	"k_live_", "k_test_", "anv_", "glpat-", "AIza", "eyJ"}

// scrubText masks secrets in one piece of free text.
func scrubText(s string) string { return scrubScanned(s, scanText(s)) }

// Classes of the bytes scanText looks for.
const (
	cDigit = 1 << iota // 0-9
	cSep               // '=' or ':'
	cAt                // '@'
	cSlash             // '/'
	cDash              // '-'
	cB                 // 'b' or 'B', the start of "bearer" and "basic"
	cKey               // the first byte of one of keyLiterals
	cHigh              // a byte of a multi-byte UTF-8 sequence (or none at all)
)

// byteClass is the class of every byte value.
var byteClass = func() (t [256]uint8) {
	for c := '0'; c <= '9'; c++ {
		t[c] |= cDigit
	}
	t['='] |= cSep
	t[':'] |= cSep
	t['@'] |= cAt
	t['/'] |= cSlash
	t['-'] |= cDash
	t['b'] |= cB
	t['B'] |= cB
	for _, l := range keyLiterals {
		t[l[0]] |= cKey
	}
	for c := 0x80; c < 0x100; c++ {
		t[c] |= cHigh
	}
	return t
}()

// scanned is what one pass over a string found: the classes of its bytes,
// how many digits, and whether one of keyLiterals occurs.
type scanned struct {
	class  uint8
	digits int
	key    bool
}

// scanText reads s once and tells scrubScanned which patterns can possibly
// match, because almost every string in an event contains none of them and
// the patterns are the expensive part.
func scanText(s string) scanned {
	var sc scanned
	for i := 0; i < len(s); i++ {
		c := byteClass[s[i]]
		if c == 0 {
			continue
		}
		sc.class |= c
		if c&cDigit != 0 {
			sc.digits++
		}
		if c&cKey != 0 && !sc.key && i+1 < len(s) && keySecond[s[i]][s[i+1]>>6]&(1<<(s[i+1]&63)) != 0 {
			for _, l := range keyLiteralsByFirst[s[i]] {
				if strings.HasPrefix(s[i:], l) {
					sc.key = true
					break
				}
			}
		}
	}
	return sc
}

// scrubScanned masks the secrets in s that sc says may be there. The masks
// put in only "[Filtered]" and "[private key]", which can neither hold nor
// complete a key literal or a 'b', so what sc found in the original stays
// true of every intermediate string.
func scrubScanned(s string, sc scanned) string {
	if len(s) < 4 {
		return s
	}
	sep, at, slash, dash := sc.class&cSep != 0, sc.class&cAt != 0, sc.class&cSlash != 0, sc.class&cDash != 0
	if dash && strings.Contains(s, "-----BEGIN") {
		s = pemRe.ReplaceAllLiteralString(s, privateKey)
	}
	if at && slash && sep {
		s = urlPassRe.ReplaceAllString(s, "${1}"+filtered+"@")
	}
	if sep {
		s = maskPairs(s)
	}
	if sc.class&cB != 0 {
		if containsFold(s, "bearer") {
			s = bearerRe.ReplaceAllLiteralString(s, "Bearer "+filtered)
		}
		if containsFold(s, "basic") {
			s = maskBasic(s)
		}
	}
	if len(s) >= 20 && sc.key {
		s = keyRe.ReplaceAllLiteralString(s, filtered)
	}
	if sc.digits >= 15 {
		s = maskCards(s)
	}
	if sc.digits >= 2 && len(s) >= 15 {
		s = maskIBANs(s)
	}
	if sc.digits >= 9 && dash {
		s = ssnRe.ReplaceAllStringFunc(s, maskSSN)
	}
	return s
}

// keySecond holds, for each first byte of keyLiterals, the bit of each
// byte that follows it in one of them: 'a' and 'e' start many words, and
// only "an" and "ey" can start a key literal (every literal is longer than
// one byte).
var keySecond = func() (t [256][4]uint64) {
	for _, l := range keyLiterals {
		t[l[0]][l[1]>>6] |= 1 << (l[1] & 63)
	}
	return t
}()

// keyLiteralsByFirst is keyLiterals by their first byte.
var keyLiteralsByFirst = func() (t [256][]string) {
	for _, l := range keyLiterals {
		t[l[0]] = append(t[l[0]], l)
	}
	return t
}()

// containsFold reports whether s contains the lower-case ASCII word sub in
// any case, without allocating a lower-cased copy of s.
func containsFold(s, sub string) bool {
	first := sub[0]
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i]|0x20 == first && strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// authSchemes are the words that may precede a credential in an
// "Authorization: <scheme> <credential>" pair; the credential goes with them.
var authSchemes = []string{"bearer", "basic", "digest", "token", "negotiate", "ntlm", "apikey"}

// maskPairs masks the value of every "name=value" or "name: value" whose name
// is secret-like. That covers query strings (?access_token=…&…), form bodies,
// log lines (password=hunter2), JSON fragments ("token":"…") and headers
// (Authorization: Bearer …, Cookie: …).
func maskPairs(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '=' && c != ':' {
			continue
		}
		// The name: skip blanks and a closing quote before the separator.
		j := i
		for j > 0 && (s[j-1] == ' ' || s[j-1] == '\t') {
			j--
		}
		if j > 0 && (s[j-1] == '"' || s[j-1] == '\'') {
			j--
		}
		end := j
		for j > 0 && isKeyByte(s[j-1]) {
			j--
		}
		if j == end || end-j > 128 || !isSecretKey(s[j:end]) {
			continue
		}
		// The value.
		v := i + 1
		if c == ':' && v < len(s) && s[v] == '=' { // name := value
			v++
		}
		for v < len(s) && (s[v] == ' ' || s[v] == '\t') {
			v++
		}
		if v >= len(s) {
			break
		}
		var vs, ve int // the span replaced
		switch q := s[v]; {
		case q == '"' || q == '\'' || q == '`':
			vs = v + 1
			ve = closingQuote(s, vs, q)
		case c == ':' && containsFold(s[j:end], "cookie"):
			// A cookie header's value is a list of secrets: to the line end.
			vs = v
			ve = strings.IndexByte(s[v:], '\n')
			if ve < 0 {
				ve = len(s)
			} else {
				ve += v
			}
		default:
			vs = v
			ve = valueEnd(s, v)
			if isAuthScheme(s[vs:ve]) {
				w := ve
				for w < len(s) && (s[w] == ' ' || s[w] == '\t') {
					w++
				}
				if w < len(s) && w > ve {
					ve = valueEnd(s, w)
				}
			}
		}
		if ve > vs && s[vs:ve] != filtered {
			b.WriteString(s[last:vs])
			b.WriteString(filtered)
			last = ve
		}
		if ve > i {
			i = ve - 1
		}
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// isKeyByte reports whether c may be part of a name in a name=value pair:
// letters, digits and the punctuation of dotted, dashed and bracketed names
// (db.password, X-Api-Key, user[password]).
func isKeyByte(c byte) bool {
	return isAlnum(c) || c == '_' || c == '-' || c == '.' || c == '[' || c == ']'
}

// valueEnd finds the end of an unquoted value. It stops only at blanks, '&'
// and quotes: a password may hold any other punctuation, and over-masking
// the rest of a token is cheaper than leaking the tail of a secret.
func valueEnd(s string, v int) int {
	for v < len(s) {
		switch s[v] {
		case ' ', '\t', '\n', '\r', '\f', '\v', '&', '"', '\'', '`':
			return v
		}
		v++
	}
	return v
}

// closingQuote returns the index of the quote q that ends a quoted value
// starting at from, honouring backslash escapes; without one, the value runs
// to the end of s (a cut-off value is still a secret).
func closingQuote(s string, from int, q byte) int {
	for i := from; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case q:
			return i
		}
	}
	return len(s)
}

func isAuthScheme(w string) bool {
	for _, a := range authSchemes {
		if strings.EqualFold(w, a) {
			return true
		}
	}
	return false
}

// maskBasic masks "Basic <base64>" when the base64 decodes to "user:pass",
// which keeps "basic configuration" and friends readable.
func maskBasic(s string) string {
	idx := basicRe.FindAllStringSubmatchIndex(s, -1)
	if idx == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range idx {
		cred := s[m[2]:m[3]]
		dec, err := base64.StdEncoding.DecodeString(cred)
		if err != nil {
			dec, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(cred, "="))
		}
		if err != nil || !strings.Contains(string(dec), ":") {
			continue
		}
		b.WriteString(s[last:m[0]])
		b.WriteString("Basic " + filtered)
		last = m[1]
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// maskCards replaces card numbers that pass the Luhn check with
// "[creditcard]". It implements the reference pattern
// \b(?:3[47]\d|4\d{3}|5[1-5]\d\d|65\d\d|6011)(?:[-\s]?\d){12}\b (plus the
// 2221–2720 Mastercard range) by hand rather than as a regex, because a regex
// match that fails Luhn would hide a valid card starting inside it: here
// every word-boundary start is tried on its own.
func maskCards(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) || (i > 0 && isWordByte(s[i-1])) {
			continue
		}
		var d [16]byte
		n, j := 0, i
		end15, end16 := -1, -1
		for j < len(s) && n < 16 {
			c := s[j]
			if isDigit(c) {
				d[n] = c
				n++
				j++
				if n == 15 {
					end15 = j
				} else if n == 16 {
					end16 = j
				}
				continue
			}
			if n > 0 && isCardSep(c) && j+1 < len(s) && isDigit(s[j+1]) {
				j++
				continue
			}
			break
		}
		end := -1
		switch {
		case end16 > 0 && boundaryAt(s, end16) && cardPrefix16(d[:]) && luhn(d[:16]):
			end = end16
		case end15 > 0 && boundaryAt(s, end15) && d[0] == '3' && (d[1] == '4' || d[1] == '7') && luhn(d[:15]):
			end = end15
		}
		if end < 0 {
			continue
		}
		b.WriteString(s[last:i])
		b.WriteString(creditCard)
		last = end
		i = end - 1
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func isCardSep(c byte) bool {
	return c == '-' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'
}

func boundaryAt(s string, i int) bool { return i >= len(s) || !isWordByte(s[i]) }

func cardPrefix16(d []byte) bool {
	switch d[0] {
	case '4':
		return true
	case '5':
		return d[1] >= '1' && d[1] <= '5'
	case '6':
		return d[1] == '5' || (d[1] == '0' && d[2] == '1' && d[3] == '1')
	case '2':
		p := int(d[0]-'0')*1000 + int(d[1]-'0')*100 + int(d[2]-'0')*10 + int(d[3]-'0')
		return p >= 2221 && p <= 2720
	}
	return false
}

// luhn reports whether the ASCII digits pass the Luhn checksum.
func luhn(d []byte) bool {
	sum := 0
	double := false
	for i := len(d) - 1; i >= 0; i-- {
		v := int(d[i] - '0')
		if double {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
		double = !double
	}
	return sum%10 == 0
}

// maskIBANs replaces IBANs that pass the ISO 13616 mod-97 check with "[iban]".
// An IBAN is two upper-case letters, two check digits and 11–30 upper-case
// letters or digits, printed either solid or in groups separated by single
// spaces. Because a group-separated IBAN followed by an upper-case word looks
// like a longer one, every length from the longest candidate down is tried.
func maskIBANs(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i+4 <= len(s); i++ {
		if !isUpper(s[i]) || !isUpper(s[i+1]) || !isDigit(s[i+2]) || !isDigit(s[i+3]) || (i > 0 && isWordByte(s[i-1])) {
			continue
		}
		var chars [34]byte
		var ends [34]int
		n, j := 0, i
		for j < len(s) && n < 34 {
			c := s[j]
			if isUpper(c) || isDigit(c) {
				chars[n] = c
				n++
				j++
				ends[n-1] = j
				continue
			}
			if c == ' ' && n >= 4 && j+1 < len(s) && (isUpper(s[j+1]) || isDigit(s[j+1])) {
				j++
				continue
			}
			break
		}
		end := -1
		for k := n; k >= 15; k-- {
			if boundaryAt(s, ends[k-1]) && ibanValid(chars[:k]) {
				end = ends[k-1]
				break
			}
		}
		if end < 0 {
			continue
		}
		b.WriteString(s[last:i])
		b.WriteString(ibanMark)
		last = end
		i = end - 1
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// ibanValid computes the mod-97 check: the first four characters move to the
// end, letters become 10–35, and the number must leave remainder 1.
func ibanValid(c []byte) bool {
	rem := 0
	add := func(ch byte) {
		if isDigit(ch) {
			rem = (rem*10 + int(ch-'0')) % 97
		} else {
			rem = (rem*100 + int(ch-'A') + 10) % 97
		}
	}
	for _, ch := range c[4:] {
		add(ch)
	}
	for _, ch := range c[:4] {
		add(ch)
	}
	return rem == 1
}

// maskSSN masks a dashed US social security number unless its parts are ones
// the SSA never issues (area 000, 666 or 9xx, group 00, serial 0000), which
// keeps most dashed numbers that merely look alike.
func maskSSN(m string) string {
	area, group, serial := m[0:3], m[4:6], m[7:11]
	if area == "000" || area == "666" || area[0] == '9' || group == "00" || serial == "0000" {
		return m
	}
	return ssnMark
}

// scrubSymbolication scrubs what a source map brought into a frame
// (docs/sourcemap.md): a secret committed to the front-end's source is as
// secret as one in a message.
func scrubSymbolication(sy *Symbolication) error {
	var err error
	for _, lines := range [][]string{sy.PreContext, sy.PostContext} {
		for i := range lines {
			if lines[i], err = scrubField("exception.stacktrace.context_code", lines[i]); err != nil {
				return err
			}
		}
	}
	if r := sy.Raw; r != nil {
		if r.File, err = scrubField("exception.stacktrace.file", r.File); err != nil {
			return err
		}
		if r.AbsPath, err = scrubField("exception.stacktrace.abs_path", r.AbsPath); err != nil {
			return err
		}
	}
	return nil
}
