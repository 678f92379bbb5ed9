package event

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const (
	ghToken   = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
	anvToken  = "anv_srv_0123456789abcdefghijABCDEFGHIJ01"
	jwt       = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
	pemBlock  = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq\nq1w2e3r4\n-----END RSA PRIVATE KEY-----"
	visa      = "4111 1111 1111 1111"
	visaSolid = "4111111111111111"
)

func TestScrubText(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, in, want string }{
		{"bearer", "call failed with Bearer abc.def.ghi", "call failed with Bearer [Filtered]"},
		{"bearer lower-case", "bearer abc.def rejected", "Bearer [Filtered] rejected"},
		{"bearer repeated", "Bearer Bearer abc.def", "Bearer [Filtered]"},
		{"authorization header", "Authorization: Bearer abc.def", "Authorization: [Filtered]"},
		{"basic credentials", "sent Basic dXNlcjpwYXNz to upstream", "sent Basic [Filtered] to upstream"},
		{"visa with spaces", "paid with 4111 1111 1111 1111 today", "paid with [creditcard] today"},
		{"visa solid", "card=" + visaSolid + "!", "card=[creditcard]!"},
		{"visa dashes", "4111-1111-1111-1111", "[creditcard]"},
		{"mastercard", "mc 5555555555554444", "mc [creditcard]"},
		{"mastercard 2-series", "mc 2223003122003222", "mc [creditcard]"},
		{"amex", "amex 378282246310005.", "amex [creditcard]."},
		{"discover", "6011111111111117", "[creditcard]"},
		{"card after a failing candidate", "5100 4111 1111 1111 1111", "5100 [creditcard]"},
		{"iban solid", "refund to DE89370400440532013000 failed", "refund to [iban] failed"},
		{"iban grouped", "IBAN DE89 3704 0044 0532 0130 00 AND MORE", "IBAN [iban] AND MORE"},
		{"iban gb", "GB82WEST12345698765432", "[iban]"},
		{"pem", "key:\n" + pemBlock + "\nend", "key:\n[private key]\nend"},
		{"pem cut off", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg…[truncated 900 chars]", "[private key]"},
		{"pem openssh", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----", "[private key]"},
		{"url password", "dial postgres://app:hunter2@db:5432/shop", "dial postgres://app:[Filtered]@db:5432/shop"},
		{"url password with @", "https://bob:p@ss@host/x", "https://bob:[Filtered]@host/x"},
		{"scheme-less url password", "//bob:secret@host", "//bob:[Filtered]@host"},
		{"aws", "key AKIAIOSFODNN7EXAMPLE leaked", "key [Filtered] leaked"},
		{"github", "token " + ghToken, "token [Filtered]"},
		{"github fine-grained", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "[Filtered]"},
		{"slack", "xoxb-123456789012-abcdefghijkl", "[Filtered]"},
		{"stripe", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "[Filtered]"},
		{"stripe restricted", "rk_live_4eC39HqLyjWDarjtT1zdp7dc", "[Filtered]"},
		{"anvil server token", "using " + anvToken, "using [Filtered]"},
		{"anvil personal token", "anv_pat_0123456789abcdefghijABCDEFGHIJ01", "[Filtered]"},
		{"jwt", "session " + jwt + " expired", "session [Filtered] expired"},
		{"ssn", "ssn 123-45-6789 on file", "ssn [ssn] on file"},
		{"query parameter", "GET /cb?code=1&access_token=abc123&state=x", "GET /cb?code=1&access_token=[Filtered]&state=x"},
		{"query api key", "https://api.example/v1?api_key=k1&apiKey=k2&x-api-key=k3", "https://api.example/v1?api_key=[Filtered]&apiKey=[Filtered]&x-api-key=[Filtered]"},
		{"log pair", "login failed password=hunter2 user=bob", "login failed password=[Filtered] user=bob"},
		{"json fragment", `{"password":"hunter 2","user":"bob"}`, `{"password":"[Filtered]","user":"bob"}`},
		{"escaped quote", `{"secret": "a\"b c"}`, `{"secret": "[Filtered]"}`},
		{"dotted name", "db.password = s3cr3t", "db.password = [Filtered]"},
		{"bracketed name", "user[password]=s3cr3t", "user[password]=[Filtered]"},
		{"cookie header", "Cookie: a=1; sessionid=xyz\nnext", "Cookie: [Filtered]\nnext"},
		{"mysql_pwd", "MYSQL_PWD=root", "MYSQL_PWD=[Filtered]"},
		{"quoted value never closed", `token="abc def`, `token="[Filtered]`},
		{"plain text untouched", "NullPointerException in CheckoutService", "NullPointerException in CheckoutService"},
		{"code untouched", "var sum = cart.total();", "var sum = cart.total();"},
		{"url untouched", "https://shop.example/api/checkout?page=2", "https://shop.example/api/checkout?page=2"},
	}
	for _, c := range cases {
		if got := scrubText(c.in); got != c.want {
			t.Fatalf("%s: scrubText(%q)\n got %q\nwant %q", c.name, c.in, got, c.want)
		}
		if again := scrubText(c.want); again != c.want {
			t.Fatalf("%s: not idempotent: %q → %q", c.name, c.want, again)
		}
	}
}

func TestScrubKeepsLookalikes(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"order 4111111111111112 shipped",           // fails Luhn
		"order 4111 1111 1111 1112 shipped",        // fails Luhn
		"id 41111111111111111111",                  // a longer digit run is not a card
		"invoice 1234567812345678",                 // no card prefix
		"tx 94111111111111111",                     // card inside a longer run
		"ref DE89370400440532013001",               // fails mod-97
		"ref de89370400440532013000",               // lower-case is no printed IBAN
		"phone 000-12-3456 and 666-12-3456",        // never-issued SSN areas
		"date 2026-09-16",                          // not an SSN
		"the authenticated user is the author: ok", // tokens, not substrings
		"author: jane",
		"basic configuration missing",
	} {
		if got := scrubText(s); got != s {
			t.Fatalf("scrubText(%q) = %q, want it unchanged", s, got)
		}
	}
}

func TestIsSecretKey(t *testing.T) {
	t.Parallel()
	cases := []struct {
		key    string
		secret bool
	}{
		{"password", true}, {"Password", true}, {"user_password", true}, {"passwd", true},
		{"secret", true}, {"client_secret", true}, {"api_key", true}, {"apikey", true},
		{"apiKey", true}, {"API_KEY", true}, {"APIKey", true}, {"x-api-key", true},
		{"auth", true}, {"auth_token", true}, {"authToken", true}, {"Authorization", true},
		{"credentials", true}, {"token", true}, {"access_token", true}, {"refreshToken", true},
		{"cookie", true}, {"Set-Cookie", true}, {"session", true}, {"sessionid", true},
		{"sessionId", true}, {"PHPSESSID", true}, {"csrf", true}, {"_csrf", true},
		{"csrftoken", true}, {"XSRF-TOKEN", true}, {"private_key", true}, {"privateKey", true},
		{"mysql_pwd", true}, {"MYSQL_PWD", true}, {"db.password", true},
		{"authenticated", false}, {"author", false}, {"authorId", false}, {"isAuthenticated", false},
		{"tier", false}, {"affected_file", false}, {"key", false}, {"primary_key", false},
		{"tokenizer", false}, {"passage", false}, {"secretary", false}, {"sessions_count", false},
		{"", false}, {"-", false},
	}
	for _, c := range cases {
		if got := isSecretKey(c.key); got != c.secret {
			t.Fatalf("isSecretKey(%q) = %v, want %v", c.key, got, c.secret)
		}
	}
}

func TestScrubEvent(t *testing.T) {
	t.Parallel()
	ev := mustValidate(t, example(t, func(m map[string]any) {
		m["title"] = "login failed for Bearer abc.def"
		ex := obj(m, "exception")
		ex["message"] = "card " + visa + " declined"
		frame := ex["stacktrace"].([]any)[0].(map[string]any)
		frame["context_code"] = `conn = connect("postgres://app:hunter2@db/shop")`
		frame["file"] = "https://cdn.example/app.js?token=abc"
		obj(m, "request")["url"] = "https://user:pw@shop.example/cb?session=s1&page=2"
		m["breadcrumbs"] = []any{"auth with " + ghToken, "checkout.start"}
		m["tags"] = map[string]any{"tier": "gold", "api_key": "k-123", "note": "iban DE89370400440532013000", "authenticated": "yes"}
		m["enrichment"] = map[string]any{
			"affected_file": "src/main/java/shop/CheckoutService.java",
			"author":        "jane",
			"headers":       map[string]any{"Authorization": "Basic dXNlcjpwYXNz", "X-Request-Id": "r-1"},
			"db":            map[string]any{"password": map[string]any{"nested": "whole subtree goes"}},
			"cards":         []any{json.Number(visaSolid), "no card here"},
			"flags":         []any{map[string]any{"sessionId": "s-42", "count": 3}},
		}
		m["agent_context"] = map[string]any{"repo": "shop/api", "env": "DATABASE_URL=postgres://a:b@c/d", "privateKey": pemBlock}
	}))
	if err := Scrub(&ev); err != nil {
		t.Fatalf("Scrub: %v", err)
	}
	out, err := json.Marshal(ev)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	for _, leak := range []string{"abc.def", visa, visaSolid, "hunter2", "token=abc", ":pw@", "s1&", ghToken, "k-123",
		"DE89370400440532013000", "dXNlcjpwYXNz", "whole subtree", "s-42", "a:b@", "MIIE"} {
		if strings.Contains(string(out), leak) {
			t.Fatalf("%q survived Scrub: %s", leak, out)
		}
	}
	checks := []struct{ got, want string }{
		{ev.Title, "login failed for Bearer [Filtered]"},
		{ev.Exception.Message, "card [creditcard] declined"},
		{ev.Request.URL, "https://user:[Filtered]@shop.example/cb?session=[Filtered]&page=2"},
		{ev.Breadcrumbs[0], "auth with [Filtered]"},
		{ev.Breadcrumbs[1], "checkout.start"},
		{ev.Tags["tier"], "gold"},
		{ev.Tags["api_key"], "[Filtered]"},
		{ev.Tags["note"], "iban [iban]"},
		{ev.Tags["authenticated"], "yes"},
		{ev.Enrichment["author"].(string), "jane"},
		{ev.Enrichment["affected_file"].(string), "src/main/java/shop/CheckoutService.java"},
		{ev.Enrichment["headers"].(map[string]any)["Authorization"].(string), "[Filtered]"},
		{ev.Enrichment["headers"].(map[string]any)["X-Request-Id"].(string), "r-1"},
		{ev.Enrichment["db"].(map[string]any)["password"].(string), "[Filtered]"},
		{ev.Enrichment["cards"].([]any)[0].(string), "[creditcard]"},
		{ev.Enrichment["flags"].([]any)[0].(map[string]any)["sessionId"].(string), "[Filtered]"},
		{ev.AgentContext["repo"].(string), "shop/api"},
		{ev.AgentContext["privateKey"].(string), "[Filtered]"},
	}
	for i, c := range checks {
		if c.got != c.want {
			t.Fatalf("check %d: got %q, want %q", i, c.got, c.want)
		}
	}
	if n := ev.Enrichment["flags"].([]any)[0].(map[string]any)["count"]; n != json.Number("3") {
		t.Fatalf("a plain number was changed: %#v", n)
	}
}

func TestScrubRefuses(t *testing.T) {
	t.Parallel()
	deep := func(levels int) map[string]any {
		var v any = "x"
		for range levels {
			v = map[string]any{"d": v}
		}
		return v.(map[string]any)
	}
	deepList := func(levels int) map[string]any {
		var v any = "x"
		for range levels {
			v = []any{v}
		}
		return map[string]any{"l": v}
	}
	cases := []struct {
		name string
		ev   Event
		ok   bool
	}{
		{"invalid UTF-8 title", Event{Title: "bad \xff byte"}, false},
		{"invalid UTF-8 message", Event{Exception: &Exception{Type: "E", Message: "\xc3"}}, false},
		{"invalid UTF-8 tag value", Event{Tags: map[string]string{"k": "\xfe"}}, false},
		{"invalid UTF-8 bag key", Event{Enrichment: map[string]any{"\xff": "v"}}, false},
		{"invalid UTF-8 breadcrumb", Event{Breadcrumbs: []string{"ok", "\xff"}}, false},
		{"at the depth bound", Event{Enrichment: deep(MaxBagDepth + 1)}, true},
		{"deeper than the bound", Event{Enrichment: deep(MaxBagDepth + 2)}, false},
		{"lists deeper than the bound", Event{AgentContext: deepList(MaxBagDepth + 1)}, false},
		{"a type it cannot walk", Event{Enrichment: map[string]any{"c": make(chan int)}}, false},
		{"a struct", Event{AgentContext: map[string]any{"s": struct{ Password string }{"x"}}}, false},
		{"too many values", Event{Enrichment: map[string]any{"l": make([]any, maxScrubNodes+1)}}, false},
		{"the shapes it knows", Event{Enrichment: map[string]any{"a": []string{"x"}, "b": map[string]string{"token": "t"}, "c": 1.5, "d": 3, "e": int64(4), "f": true, "g": nil}}, true},
	}
	for _, c := range cases {
		err := Scrub(&c.ev)
		if c.ok != (err == nil) {
			t.Fatalf("%s: err = %v, want ok=%v", c.name, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrRedactionFailed) {
			t.Fatalf("%s: %v does not wrap ErrRedactionFailed", c.name, err)
		}
	}
}

// A fully validated event cannot be refused for depth: Validate cuts what
// Scrub would not walk.
func TestValidatedDeepBagScrubs(t *testing.T) {
	t.Parallel()
	ev := mustValidate(t, example(t, func(m map[string]any) {
		var v any = "password=hunter2"
		for range 40 {
			v = map[string]any{"d": []any{v}}
		}
		m["enrichment"] = v
	}))
	if err := Scrub(&ev); err != nil {
		t.Fatalf("Scrub: %v", err)
	}
	out, _ := json.Marshal(ev)
	if strings.Contains(string(out), "hunter2") {
		t.Fatalf("secret survived")
	}
}

// FuzzMayHoldKey holds scanText's literal search to the plain one.
func FuzzMayHoldKey(f *testing.F) {
	for _, l := range keyLiterals {
		f.Add("xx " + l + " yy")
	}
	f.Add("")
	f.Add("g")
	f.Add("k_live")
	f.Add("AKI")
	f.Fuzz(func(t *testing.T, s string) {
		want := false
		for _, l := range keyLiterals {
			want = want || strings.Contains(s, l)
		}
		if got := scanText(s).key; got != want {
			t.Fatalf("scanText(%q).key = %t, want %t", s, got, want)
		}
	})
}

// scrubTextPassByPass is scrubText as it was before its checks shared one
// scan: every check reads the string as it stands at that point, and none
// relies on what an earlier mask can or cannot put in.
func scrubTextPassByPass(s string) string {
	if len(s) < 4 {
		return s
	}
	var digits int
	var sep, at, slash, dash bool
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case '0' <= c && c <= '9':
			digits++
		case c == '=' || c == ':':
			sep = true
		case c == '@':
			at = true
		case c == '/':
			slash = true
		case c == '-':
			dash = true
		}
	}
	hasFold := func(s, sub string) bool { return strings.Contains(strings.ToLower(s), sub) }
	hasLiteral := func(s string) bool {
		for _, l := range keyLiterals {
			if strings.Contains(s, l) {
				return true
			}
		}
		return false
	}
	if dash && strings.Contains(s, "-----BEGIN") {
		s = pemRe.ReplaceAllLiteralString(s, privateKey)
	}
	if at && slash && sep {
		s = urlPassRe.ReplaceAllString(s, "${1}"+filtered+"@")
	}
	if sep {
		s = maskPairs(s)
	}
	if hasFold(s, "bearer") {
		s = bearerRe.ReplaceAllLiteralString(s, "Bearer "+filtered)
	}
	if hasFold(s, "basic") {
		s = maskBasic(s)
	}
	if len(s) >= 20 && hasLiteral(s) {
		s = keyRe.ReplaceAllLiteralString(s, filtered)
	}
	if digits >= 15 {
		s = maskCards(s)
	}
	if digits >= 2 && len(s) >= 15 {
		s = maskIBANs(s)
	}
	if digits >= 9 && dash {
		s = ssnRe.ReplaceAllStringFunc(s, maskSSN)
	}
	return s
}

// FuzzScrubTextOneScan holds scrubText, whose checks are decided by one scan
// of the original string, to the pass-by-pass version.
func FuzzScrubTextOneScan(f *testing.F) {
	for _, s := range []string{"", "password=hunter2 Bearer abc.def", "token: ghp_0123456789abcdefghij0123", "AKIA" + "ABCDEFGHIJKLMNOP",
		"https://u:p@h/x?api_key=AKIAABCDEFGHIJKLMNOP", "Authorization: Basic dXNlcjpwYXNz", "-----BEGIN PRIVATE KEY-----\nabc",
		"secret=eyJ eyJhbGciOi.eyJzdWIiOi.sig", "card 4111 1111 1111 1111 iban DE89370400440532013000 ssn 123-45-6789",
		"BEARER x basic QWxhZGRpbjpvcGVuIHNlc2FtZQ== Cookie: a=b", "pass:AIzaSyA-0123456789abcdefghijklmnopqrstu x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := scrubText(s), scrubTextPassByPass(s); got != want {
			t.Fatalf("scrubText(%q)\n= %q\nwant %q", s, got, want)
		}
	})
}

// keyFormats are tokens of every format keyRe knows, each alone in a
// sentence that nothing else in scrubText would touch.
var keyFormats = []string{"AKIAABCDEFGHIJKLMNOP", "ASIAABCDEFGHIJKLMNOP", "AIPAABCDEFGHIJKLMNOP",
	"ghp_abcdefABCDEF0123456789", "ghs_abcdefABCDEF0123456789", "github_pat_11ABCDEFG0123456789_abcdefxyzijkl",
	"xoxb-0123456789-abcdefABCDEF", "xoxp-0123456789-abcdef", "sk_live_abcdefABCDEF0123", "rk_test_abcdefABCDEF0123",
	"anv_srv_abcdefABCDEF0123456789abcdef", "anv_pat_abcdefABCDEF0123456789abcdef", "glpat-abcdefABCDEF01234567",
	"AIzaSyA-0123456789abcdefghijklmnopqrstu", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln"}

// TestScrubMasksEveryKeyFormat: every format is masked whatever surrounds
// it (a GitHub fine-grained token used to pass unmasked unless its string
// happened to contain "gh").
func TestScrubMasksEveryKeyFormat(t *testing.T) {
	for _, k := range keyFormats {
		t.Run(k[:4], func(t *testing.T) {
			if got := scrubText("leaked " + k + " in a log line"); got != "leaked "+filtered+" in a log line" {
				t.Fatalf("scrubText = %q", got)
			}
		})
	}
}

// FuzzKeyLiterals: a string keyRe matches always holds one of keyLiterals,
// so that the scan never lets a key skip the regex.
func FuzzKeyLiterals(f *testing.F) {
	for _, k := range keyFormats {
		f.Add(k)
		f.Add("x " + k[:len(k)-3])
	}
	f.Fuzz(func(t *testing.T, s string) {
		if keyRe.MatchString(s) && !scanText(s).key {
			t.Fatalf("keyRe matches %q, which holds none of keyLiterals", s)
		}
	})
}
