package event

import (
	"encoding/json"
	"testing"
)

func TestFingerprint(t *testing.T) {
	t.Parallel()
	exc := func(typ string, frames ...Frame) *Event {
		return &Event{Title: "t", Exception: &Exception{Type: typ, Stacktrace: frames}}
	}
	msg := func(title string) *Event { return &Event{Title: title} }
	f := func(file, fn string, line int, inApp bool) Frame {
		return Frame{File: file, Function: fn, Line: line, InApp: inApp}
	}
	cases := []struct {
		name string
		a, b *Event
		same bool
	}{
		{"line numbers do not matter",
			exc("NPE", f("A.java", "charge", 88, true), f("B.java", "run", 10, true)),
			exc("NPE", f("A.java", "charge", 91, true), f("B.java", "run", 12, true)), true},
		{"context and message do not matter",
			&Event{Title: "x", Exception: &Exception{Type: "NPE", Message: "cart 1 is null", Stacktrace: []Frame{{File: "A.java", Function: "f", ContextCode: "a()", InApp: true}}}},
			&Event{Title: "y", Exception: &Exception{Type: "NPE", Message: "cart 2 is null", Stacktrace: []Frame{{File: "A.java", Function: "f", ContextCode: "b()", InApp: true}}}}, true},
		{"different function",
			exc("NPE", f("A.java", "charge", 88, true)),
			exc("NPE", f("A.java", "refund", 88, true)), false},
		{"different file",
			exc("NPE", f("A.java", "charge", 88, true)),
			exc("NPE", f("B.java", "charge", 88, true)), false},
		{"different type",
			exc("NPE", f("A.java", "charge", 88, true)),
			exc("IAE", f("A.java", "charge", 88, true)), false},
		{"library frames ignored when some are in-app",
			exc("NPE", f("lib.java", "invoke", 1, false), f("A.java", "charge", 88, true)),
			exc("NPE", f("other.java", "call", 2, false), f("A.java", "charge", 88, true)), true},
		{"all frames used when none is in-app",
			exc("NPE", f("lib.java", "invoke", 1, false)),
			exc("NPE", f("other.java", "call", 2, false)), false},
		{"frame boundaries are not ambiguous",
			exc("E", f("ab", "c", 1, true)),
			exc("E", f("a", "bc", 1, true)), false},
		{"query of a bundle file ignored",
			exc("TypeError", f("https://cdn.example/app.js?v=1", "render", 1, true)),
			exc("TypeError", f("https://cdn.example/app.js?v=2", "render", 1, true)), true},
		{"frameless exception groups by title",
			&Event{Title: "timeout after 30s", Exception: &Exception{Type: "Timeout"}},
			&Event{Title: "timeout after 12s", Exception: &Exception{Type: "Timeout"}}, true},
		{"frameless exception with other title",
			&Event{Title: "timeout talking to db", Exception: &Exception{Type: "Timeout"}},
			&Event{Title: "timeout talking to cache", Exception: &Exception{Type: "Timeout"}}, false},
		{"message numbers", msg("Order 4711 failed after 3 retries"), msg("Order 815 failed after 12 retries"), true},
		{"message uuids", msg("job f4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f30 lost"), msg("job 1C2D3E4F-0000-4a1e-9d7a-2b6c5d8e1f30 lost"), true},
		{"message quoted values", msg(`no binding for environment 'staging'`), msg(`no binding for environment 'qa'`), true},
		{"message double quotes", msg(`unknown key "alpha"`), msg(`unknown key "beta gamma"`), true},
		{"message case and blanks", msg("Disk  FULL on node 3"), msg("disk full on node 4 "), true},
		{"message differs in words", msg("disk full"), msg("disk slow"), false},
		{"exception vs message", exc("disk full"), msg("disk full"), false},
	}
	for _, c := range cases {
		fa, fb := Fingerprint(c.a), Fingerprint(c.b)
		if (fa == fb) != c.same {
			t.Fatalf("%s: same=%v, want %v", c.name, fa == fb, c.same)
		}
		if len(fa) != 64 {
			t.Fatalf("%s: %q is not a sha256 hex", c.name, fa)
		}
	}
}

func TestNormalizeTitle(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"NullPointerException in CheckoutService", "nullpointerexception in checkoutservice"},
		{"Order 4711 failed", "order <n> failed"},
		{"took 1234ms", "took <n>ms"},
		{"price 12.50 too high", "price <n> too high"},
		{"job f4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f30 lost", "job <uuid> lost"},
		{"object 5f3a9c1e77 missing", "object <hex> missing"},
		{"pointer 0xdeadbeef1 freed", "pointer <hex> freed"},
		{"a decade of deadbeef", "a decade of deadbeef"},
		{"mail to jane.doe+x@shop.example bounced", "mail to <email> bounced"},
		{"connect 10.0.12.7:5432 refused", "connect <ip>:<n> refused"},
		{"backup of 2026-09-16 failed", "backup of <date> failed"},
		{"at 2026-09-16T10:11:12Z timeout", "at <date> timeout"},
		{"at 10:11:12 timeout", "at <date> timeout"},
		{"no binding for environment 'staging'", "no binding for environment <str>"},
		{`key "a b" unknown`, "key <str> unknown"},
		{"can't open 'x.txt'", "can't open <str>"},
		{"  many \t\n blanks  ", "many blanks"},
		{"it's 'x' and 'y'", "it's <str> and <str>"},
		{"column `total` missing", "column <str> missing"},
		{"“Größe” ungültig", "<str> ungültig"},
		{"unclosed 'quote stays", "unclosed 'quote stays"},
		{"ÄRGER 42", "ärger <n>"},
	}
	for _, c := range cases {
		if got := NormalizeTitle(c.in); got != c.want {
			t.Fatalf("NormalizeTitle(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestFingerprintIsStable pins the material and its hashing: a change here
// would split every open incident from its future events.
func TestFingerprintIsStable(t *testing.T) {
	ev, rej := Validate(json.RawMessage(curlExample))
	if rej != nil {
		t.Fatal(rej.Message)
	}
	if got := Fingerprint(&ev); got != "d8d72ef2c360706d12700af4c0a1966cb8e0ef0fa0e6f62699ac3ffae26e743a" {
		t.Fatalf("with an exception: %s", got)
	}
	ev.Exception = nil
	if got := Fingerprint(&ev); got != "b1c251dc30aeb380d11c7119c729e7c7894e3cac59ed4ae748e64c3160dca36d" {
		t.Fatalf("without: %s", got)
	}
}

// TestDateAtForms: each form dateAt knows, the longest that ends at a word
// boundary winning, and the near misses.
func TestDateAtForms(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]int{
		"2026-09-16":                    10,
		"2026-09-16T10:11":              16,
		"2026-09-16T10:11:12Z":          20,
		"2026-09-16 10:11:12.123+02:00": 29,
		"2026-09-16T10:11:12+0200":      24,
		"2026-09-16T10:11:12+02x":       19, // the zone does not end at a boundary; the clock does
		"2026-09-16x":                   0,
		"16/09/2026":                    10,
		"1/9/26":                        6,
		"16/09/20261":                   0,
		"10:11:12":                      8,
		"10:11:12,5":                    10,
		"10:11":                         0, // a clock alone needs its seconds
	} {
		if got := dateAt(s, 0); got != want {
			t.Errorf("dateAt(%q) = %d, want %d", s, got, want)
		}
	}
}
