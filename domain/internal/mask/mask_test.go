package mask

import (
	"bytes"
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
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
		// Splitting never changes the result.
		if whole := run(New([]string{value}), in); whole != out {
			t.Fatalf("split at %d: %q, whole: %q", cut, out, whole)
		}
	})
}
