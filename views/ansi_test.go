package views

import (
	"regexp"
	"strings"
	"testing"
)

func TestANSIToHTML(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"plain":                          "plain",
		"\x1b[31mred\x1b[0m ok":          `<span class="text-red-400">red</span> ok`,
		"\x1b[1;32mgreen\x1b[39m bold":   `<span class="text-green-400 font-bold">green</span><span class="font-bold"> bold</span>`,
		"<b>&amp;</b>":                   "&lt;b&gt;&amp;amp;&lt;/b&gt;",
		"\x1b[2Kcleared\x1b]0;title\x07": "cleared",
		"\x1b[38;5;196mx\x1b[m":          "x",
		"tab\tand\x00nul":                "tab\tandnul",
		"\x1b[31m<script>":               `<span class="text-red-400">&lt;script&gt;</span>`,
	}
	for in, want := range cases {
		if got := ANSIToHTML(in); got != want {
			t.Errorf("%q → %q, want %q", in, got, want)
		}
	}
}

func TestFoldProgress(t *testing.T) {
	t.Parallel()
	in := "Receiving objects:  33% (1/3)\rReceiving objects: 100% (3/3)\rReceiving objects: 100% (3/3), done.\r"
	if got := FoldProgress(in); got != "Receiving objects: 100% (3/3), done." {
		t.Fatalf("%q", got)
	}
}

// safeHTML is all ANSIToHTML may emit: escaped text and its own spans.
var (
	ownSpan  = regexp.MustCompile(`<span class="[a-z0-9 -]+">|</span>`)
	anyTagRE = regexp.MustCompile(`[<>]`)
)

func FuzzANSIToHTML(f *testing.F) {
	for _, s := range []string{"\x1b[31m<script>alert(1)</script>", "\x1b[1;4;91;44mx\x1b[0m", "\x1b[", "\x1b", "a\"b'c&d", "\x1b[31m\"><img src=x onerror=alert(1)>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := ANSIToHTML(in)
		rest := ownSpan.ReplaceAllString(out, "")
		if anyTagRE.MatchString(rest) {
			t.Fatalf("%q rendered markup of its own: %q", in, out)
		}
		if strings.Contains(out, "\x1b") {
			t.Fatalf("%q left a raw escape: %q", in, out)
		}
		if strings.Count(out, "<span") != strings.Count(out, "</span>") {
			t.Fatalf("unbalanced spans: %q", out)
		}
		if strings.ContainsAny(rest, "\"'") {
			t.Fatalf("unescaped quote in %q", out)
		}
	})
}

func TestOrdinal(t *testing.T) {
	t.Parallel()
	for n, w := range map[int]string{1: "1st", 2: "2nd", 3: "3rd", 4: "4th", 11: "11th", 12: "12th", 13: "13th", 21: "21st", 22: "22nd", 103: "103rd"} {
		if got := ordinal(n); got != w {
			t.Errorf("ordinal(%d) = %q", n, got)
		}
	}
}

// TestLooksLikeError: the first error of a run is the command's own —
// never anvil's echo of the command, never a JSON payload line of a
// repair agent.
func TestLooksLikeError(t *testing.T) {
	for line, want := range map[string]bool{
		"[anvil] $ make test-fail":                      false,
		"[anvil] $ ./fix.sh --on-error":                 false,
		`{"type":"tool_result","error":"none"}`:         false,
		`  {"is_error": false, "content": "ok"}`:        false,
		`[{"error": "x"}]`:                              false,
		"--- FAIL: TestCart (0.01s)":                    true,
		"Error: cart is null":                           true,
		"panic: runtime error: index out of range":      true,
		"[anvil] checkout failed: repository not found": true,
		"ok  	shop	0.2s":                                false,
		"[1/3] compiling":                               false,
		"[anvil] refused example.org:443 — not in this project's network list":        true,
		"[anvil] could not reach registry.test:4873 — registry.test does not resolve": true,
		"[anvil] network: this run may reach @npm through anvil's proxy":              false,
		`    "type": "ZeroDivisionError",`:                                            false,
		`  "message": "division by zero: error in cart",`:                             false,
		`  "exception": {`: false,
		`  "in_app": true`: false,
		"task: Fix the production incident \"ZeroDivisionError\" (production, 3 events) in this repository.": false,
		`error: "cart" is null`: true,
	} {
		if got := LooksLikeError(line); got != want {
			t.Errorf("LooksLikeError(%q) = %v, want %v", line, got, want)
		}
	}
	html := LogHTML("[anvil] $ make test-fail\nrunning\nFAIL: TestCart\n", 0)
	if first := strings.Index(html, "log-error"); first < 0 || first < strings.Index(html, "running") {
		t.Fatalf("the first error-looking line is not the command's own: %s", html)
	}
}
