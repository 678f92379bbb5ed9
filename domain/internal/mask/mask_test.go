package mask

import (
	"bytes"
	"encoding/base64"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

const secret = "hunter2-s3cr3t/&+ value"

func run(m *Masker, parts ...string) string {
	var b bytes.Buffer
	for _, p := range parts {
		b.Write(m.Write([]byte(p)))
	}
	b.Write(m.Flush())
	return b.String()
}

func TestMasksEveryForm(t *testing.T) {
	t.Parallel()
	basic := base64.StdEncoding.EncodeToString([]byte("user:" + secret))
	cases := map[string]string{
		"whole":         "token is " + secret + " ok\n",
		"twice":         secret + secret + "\n",
		"base64":        "b64 " + base64.StdEncoding.EncodeToString([]byte(secret)) + "\n",
		"base64url":     "b64 " + base64.URLEncoding.EncodeToString([]byte(secret)) + "\n",
		"basic auth":    "Authorization: Basic " + basic + "\n",
		"basic auth 2":  base64.StdEncoding.EncodeToString([]byte("ab:"+secret+"!")) + "\n",
		"query escaped": "https://x/?t=" + url.QueryEscape(secret) + "\n",
		"path escaped":  "https://x/" + url.PathEscape(secret) + "/y\n",
		"js component":  "u=" + strings.NewReplacer("/", "%2F", "&", "%26", "+", "%2B", " ", "%20").Replace(secret) + "\n",
		"lower hex":     "u=" + strings.NewReplacer("/", "%2f", "&", "%26", "+", "%2b", " ", "%20").Replace(secret) + "\n",
	}
	for name, in := range cases {
		out := run(New([]string{secret}), in)
		if strings.Contains(out, secret) || !strings.Contains(out, Replacement) {
			t.Errorf("%s: %q → %q", name, in, out)
		}
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			for _, f := range Base64Forms(enc, secret) {
				if strings.Contains(out, f) {
					t.Errorf("%s: base64 form %q left in %q", name, f, out)
				}
			}
		}
		if strings.Contains(out, url.QueryEscape(secret)) || strings.Contains(out, url.PathEscape(secret)) {
			t.Errorf("%s: URL-encoded form left in %q", name, out)
		}
	}
}

// TestSplitAcrossWrites cuts the line at every byte, and into single bytes.
func TestSplitAcrossWrites(t *testing.T) {
	t.Parallel()
	line := "before " + secret + " after\n"
	want := "before *** after\n"
	for cut := range len(line) + 1 {
		if got := run(New([]string{secret}), line[:cut], line[cut:]); got != want {
			t.Fatalf("cut at %d: %q, want %q", cut, got, want)
		}
	}
	m := New([]string{secret})
	var parts []string
	for i := range len(line) {
		parts = append(parts, line[i:i+1])
	}
	if got := run(m, parts...); got != want {
		t.Fatalf("byte by byte: %q", got)
	}
}

// TestHoldsOnlyWhatCouldBeASecret keeps ordinary output flowing: nothing is
// held back unless it could still become a value.
func TestHoldsOnlyWhatCouldBeASecret(t *testing.T) {
	t.Parallel()
	m := New([]string{secret})
	if out := m.Write([]byte("plain line\n")); string(out) != "plain line\n" || m.Held() != 0 {
		t.Fatalf("%q held %d", out, m.Held())
	}
	if out := m.Write([]byte("x hunt")); string(out) != "x " || m.Held() != 4 {
		t.Fatalf("%q held %d", out, m.Held())
	}
	if out := m.Write([]byte("ing\n")); string(out) != "hunting\n" || m.Held() != 0 {
		t.Fatalf("%q held %d", out, m.Held())
	}
	if string(run(New(nil), "anything")) != "anything" {
		t.Fatal("a masker without values changed the stream")
	}
}

// TestOverlappingValues masks a value that contains another whole.
func TestOverlappingValues(t *testing.T) {
	t.Parallel()
	m := New([]string{"abcd", "abcdefgh"})
	if got := run(m, "x abcd", "efgh y abcd z"); got != "x *** y *** z" {
		t.Fatalf("%q", got)
	}
}

// shownText is what a reader sees of a log: without SGR/CSI sequences,
// OSC strings, other escapes and control characters (tab and newline
// kept) — written apart from the masker's own grammar, for the cases below.
func shownText(s string) string {
	s = strings.ReplaceAll(s, "\x00", "") // the store's, before the renderer
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile("\x1b\\[[0-9:;<=>?]*[ -/]*[@-~]"),
		regexp.MustCompile("\x1b\\][^\x07\x1b\n]*(\x07|\x1b\\\\)"),
		regexp.MustCompile("\x1b[^\\[\\]\n]"),
		regexp.MustCompile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]"),
	} {
		s = re.ReplaceAllString(s, "")
	}
	return s
}

// TestMasksWhatIsShown: a value split by colour codes (git diff
// --color-words, grep --color=always), by a NUL, a backspace, an OSC
// hyperlink or a bare ESC pair — all dropped by the renderer or the store
// — is masked, at every cut of the stream into two writes and byte by
// byte; the hidden bytes stay, so colours are still balanced.
func TestMasksWhatIsShown(t *testing.T) {
	t.Parallel()
	cases := map[string]struct{ in, want string }{
		"color words":  {"- old \x1b[32m" + secret[:6] + "\x1b[m\x1b[32m" + secret[6:] + "\x1b[m\n", "- old \x1b[32m***\x1b[m\x1b[32m\x1b[m\n"},
		"grep color":   {"key=\x1b[01;31m\x1b[K" + secret + "\x1b[m\x1b[K ok\n", "key=\x1b[01;31m\x1b[K***\x1b[m\x1b[K ok\n"},
		"every byte":   {"\x1b[1m" + strings.Join(strings.Split(secret, ""), "\x1b[0m") + "!\n", "\x1b[1m***" + strings.Repeat("\x1b[0m", len(secret)-1) + "!\n"},
		"nul":          {"v=" + secret[:3] + "\x00" + secret[3:] + ".\n", "v=***\x00.\n"},
		"backspace":    {secret[:5] + "\b" + secret[5:] + "\n", "***\b\n"},
		"osc link":     {secret[:4] + "\x1b]8;;https://x.example\x07" + secret[4:] + "\x1b]8;;\x1b\\\n", "***\x1b]8;;https://x.example\x07\x1b]8;;\x1b\\\n"},
		"esc nul pair": {secret[:5] + "\x1b\x00X" + secret[5:] + "\n", "***\x1b\x00X\n"}, // stored as ESC X: a pair
		"esc pair":     {secret[:4] + "\x1b7" + secret[4:] + "\n", "***\x1b7\n"},
		"base64 split": {"b64 " + b64(secret)[:5] + "\x1b[33m" + b64(secret)[5:] + "\n",
			strings.Replace(run(New([]string{secret}), "b64 "+b64(secret)+"\n"), "***", "***\x1b[33m", 1)},
	}
	for name, c := range cases {
		for cut := range len(c.in) + 1 {
			got := run(New([]string{secret}), c.in[:cut], c.in[cut:])
			if got != c.want {
				t.Fatalf("%s, cut at %d: %q, want %q", name, cut, got, c.want)
			}
		}
		var parts []string
		for i := range len(c.in) {
			parts = append(parts, c.in[i:i+1])
		}
		got := run(New([]string{secret}), parts...)
		if got != c.want {
			t.Fatalf("%s, byte by byte: %q, want %q", name, got, c.want)
		}
		if shown := shownText(got); strings.Contains(shown, secret) || !strings.Contains(shown, Replacement) {
			t.Fatalf("%s: shown as %q", name, shown)
		}
	}
}

// TestShownPassLeavesOtherTextAlone: escape codes and text that only look
// like a value once joined across a line end, or a sequence that ends the
// value's first part, are not masked — the renderer does not join them.
func TestShownPassLeavesOtherTextAlone(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		secret[:6] + "\n" + secret[6:] + "\n",             // two lines
		secret[:6] + "\r" + secret[6:] + "\n",             // a redraw shows the second part only
		"\x1b[31mred\x1b[0m and \x1b]0;title\x07 plain\n", // no value at all
		secret[:6] + "\x1b[31\n" + secret[6:] + "\n",      // the line ends the unfinished sequence
	} {
		if got := run(New([]string{secret}), in); got != in {
			t.Errorf("%q became %q", in, got)
		}
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func FuzzMasker(f *testing.F) {
	f.Add("log "+secret+" end", 3, secret)
	f.Add(base64.StdEncoding.EncodeToString([]byte(secret)), 7, secret)
	f.Add("aaaaaaaaaa", 2, "aaaa")
	f.Fuzz(func(t *testing.T, text string, cut int, value string) {
		if len(value) < MinLen || strings.Contains(value, Replacement) || strings.Contains(Replacement, value) {
			return
		}
		in := text + value + text
		if cut < 0 {
			cut = -cut
		}
		cut %= len(in) + 1
		out := run(New([]string{value}), in[:cut], in[cut:])
		if strings.Contains(out, value) {
			t.Fatalf("value %q left in %q", value, out)
		}
		// Nor in what a reader is shown, when the value is all shown bytes.
		if shownText(value) == value && strings.Contains(shownText(out), value) {
			t.Fatalf("value %q shown in %q", value, shownText(out))
		}
		// Splitting never changes the result, while the hidden bytes are
		// too few to reach the cap on what is held back.
		if len(in) > MaxHeldHidden {
			return
		}
		if whole := run(New([]string{value}), in); whole != out {
			t.Fatalf("split at %d: %q, whole: %q", cut, out, whole)
		}
	})
}

// TestHiddenBytesCannotHoldTheLogOpen: a value's first character followed
// by an endless stream of colour codes is held back only up to the cap;
// past it the stream flows, and a value written whole after it is still
// masked.
func TestHiddenBytesCannotHoldTheLogOpen(t *testing.T) {
	t.Parallel()
	m := New([]string{secret})
	bound := 2*m.maxLen + MaxHeldHidden
	var out bytes.Buffer
	out.Write(m.Write([]byte("x " + secret[:1])))
	written := 3
	for range 100_000 {
		out.Write(m.Write([]byte("\x1b[m")))
		written += 3
		if m.Held() > bound {
			t.Fatalf("held %d bytes after %d written, bound %d", m.Held(), written, bound)
		}
	}
	if out.Len() < written-bound {
		t.Fatalf("emitted %d of %d bytes", out.Len(), written)
	}
	out.Write(m.Write([]byte(" " + secret + "\n")))
	out.Write(m.Flush())
	if strings.Contains(out.String(), secret) || !strings.HasSuffix(out.String(), " ***\n") {
		t.Fatalf("value after the flood not masked: %q", out.String()[out.Len()-40:])
	}
	// Under the cap, a value spread over colour codes is still masked.
	spread := secret[:1] + strings.Repeat("\x1b[m", MaxHeldHidden/3-1) + secret[1:] + "\n"
	if got := run(New([]string{secret}), spread[:10], spread[10:]); shownText(got) != "***\n" {
		t.Fatalf("spread value under the cap shown as %q", shownText(got))
	}
}

// FuzzMaskerHoldsLittle: whatever follows a value's prefix, in writes of
// any size, the masker holds back at most the bound and each write costs
// time in proportion to what is held, not to what came before.
func FuzzMaskerHoldsLittle(f *testing.F) {
	f.Add(secret, 1, "\x1b[m", 5000)
	f.Add(secret, 6, "\x1b]8;;", 3000)
	f.Add(secret, 3, "\x00", 9000)
	f.Add("abcdabcd", 4, "\x1b[1ma", 2000)
	f.Fuzz(func(t *testing.T, value string, prefix int, chunk string, n int) {
		if len(value) < MinLen || len(value) > 256 || len(chunk) == 0 || len(chunk) > 64 {
			return
		}
		prefix = max(1, min(len(value)-1, abs(prefix)))
		n = abs(n) % 20_000
		m := New([]string{value})
		bound := 2*m.maxLen + MaxHeldHidden
		start := time.Now()
		in, out := prefix, len(m.Write([]byte(value[:prefix])))
		for range n {
			out += len(m.Write([]byte(chunk)))
			in += len(chunk)
			if m.Held() > bound {
				t.Fatalf("held %d bytes after %d written, bound %d", m.Held(), in, bound)
			}
		}
		out += len(m.Flush())
		if m.Held() != 0 || out == 0 {
			t.Fatalf("held %d after Flush, emitted %d", m.Held(), out)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("%d writes of %d bytes took %s", n, len(chunk), d)
		}
	})
}

func abs(n int) int { return int(uint(n) % (1 << 30)) }
