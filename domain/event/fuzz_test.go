package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func FuzzValidate(f *testing.F) {
	f.Add([]byte(curlExample))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"event_id":"F4B1A0C2-0F4A-4A1E-9D7A-2B6C5D8E1F30","schema_version":"2.0"}`))
	f.Add([]byte(`{"event_id":42,"exception":{"stacktrace":[{"line":"x"}]}}`))
	f.Add([]byte(`{"event_id":"f4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f30","timestamp":"2026-09-16T10:11:12Z","title":"t","level":"info","environment":"dev","service":"s","sdk":{"name":"n"},"enrichment":{"a":{"b":[[[{"password":"x"}]]]}}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, rej := Validate(raw)
		if rej != nil {
			if rej.ReasonCode != SchemaViolation && rej.ReasonCode != UnsupportedSchemaVersion {
				t.Fatalf("Validate produced reason %q", rej.ReasonCode)
			}
			if rej.Message == "" {
				t.Fatalf("rejection without a message")
			}
			return
		}
		if !isCanonicalUUID(ev.EventID) || ev.Title == "" || ev.SDK.Name == "" || ev.Environment == "" {
			t.Fatalf("accepted an event missing a required field: %+v", ev)
		}
		if ev.Request != nil && ev.Request.URL != "" && !isHTTPURL(ev.Request.URL) {
			t.Fatalf("kept a non-http URL %q", ev.Request.URL)
		}
		if ev.Exception != nil && len(ev.Exception.Stacktrace) > MaxFrames {
			t.Fatalf("kept %d frames", len(ev.Exception.Stacktrace))
		}
		if err := Scrub(&ev); err == nil {
			if _, err := json.Marshal(ev); err != nil {
				t.Fatalf("scrubbed event does not marshal: %v", err)
			}
		}
		_ = Fingerprint(&ev)
	})
}

// FuzzScrub plants known secrets, surrounded by blanks, into arbitrary text
// in every field Scrub reads, and checks that none survives a successful
// Scrub.
func FuzzScrub(f *testing.F) {
	f.Add("", "")
	f.Add("password=", "")
	f.Add("Authorization:", "\n")
	f.Add("Bearer", "x")
	f.Add(`{"token":"`, `"}`)
	f.Add("https://u:p@h/?a=1&b=", "&c=3")
	f.Add("-----BEGIN PRIVATE KEY-----", "")
	f.Add("5100", "1111")
	f.Add("DE89", "3704")
	f.Add("\xff", "")
	secrets := []string{"4111 1111 1111 1111", "5555555555554444", "abc.def", "DE89370400440532013000", "hunter2"}
	planted := " 4111 1111 1111 1111 x Bearer abc.def y 5555555555554444 z DE89370400440532013000 password=hunter2 "
	f.Fuzz(func(t *testing.T, prefix, suffix string) {
		for _, s := range secrets {
			if strings.Contains(prefix+suffix, s) {
				t.Skip("the secret is part of the input around it")
			}
		}
		text := prefix + planted + suffix
		ev := Event{
			Title:     text,
			Exception: &Exception{Type: "E", Message: text, Stacktrace: []Frame{{File: text, ContextCode: text}}},
			Request:   &Request{URL: "https://h/?" + text},
			Breadcrumbs: []string{
				text,
			},
			Tags:         map[string]string{"note": text, prefix: text},
			Enrichment:   map[string]any{"a": map[string]any{"b": []any{text}}, prefix: text},
			AgentContext: map[string]any{"ctx": text},
		}
		if err := Scrub(&ev); err != nil {
			return // refused: nothing is stored
		}
		out, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		for _, s := range secrets {
			if strings.Contains(string(out), s) {
				t.Fatalf("%q survived Scrub of %q: %s", s, text, out)
			}
		}
	})
}

// FuzzSplitArray checks the hand-written splitter against encoding/json:
// for every valid array, the same elements, byte for byte.
func FuzzSplitArray(f *testing.F) {
	f.Add([]byte(`[]`))
	f.Add([]byte(` [ 1 , "a,]\"}" , {"x":[1,{"y":"]"}]} ,null,[[]] ] `))
	f.Add([]byte(`["\\", "\\\"", {"a":"\\\\"}]`))
	f.Add([]byte(`[` + curlExample + `,` + curlExample + `]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		trimmed := []byte(strings.TrimSpace(string(body)))
		if len(trimmed) == 0 || trimmed[0] != '[' {
			return
		}
		var want []json.RawMessage
		if json.Unmarshal(trimmed, &want) != nil {
			splitArray(trimmed) // must not panic on anything
			return
		}
		got, ok := splitArray(trimmed)
		if !ok || len(got) != len(want) {
			t.Fatalf("%d elements, want %d", len(got), len(want))
		}
		for i := range got {
			if string(got[i]) != string(want[i]) {
				t.Fatalf("element %d: %q, want %q", i, got[i], want[i])
			}
		}
	})
}

// FuzzParseArray holds parseArray to encoding/json: what it accepts is
// valid JSON with the same elements (encoding/json's own decoding into raw
// messages, which also vouches for each one); what it refuses may still be
// valid, for SplitBody's slower path to judge.
func FuzzParseArray(f *testing.F) {
	f.Add([]byte(`[]`))
	f.Add([]byte(` [ 1 , "a,]\"}" , {"x":[1,{"y":"]"}]} ,null,[[]] ] `))
	f.Add([]byte(`["\\", "\\\"", {"a":"\\\\"}]`))
	f.Add([]byte(`[` + curlExample + `,` + curlExample + `]`))
	f.Add([]byte(`[1, "\ud800", {"a":-0.0e+1}, tru]`))
	f.Add([]byte("[\"\xff\"]"))
	f.Add([]byte(`[1] x`))
	f.Add([]byte(`[{"a":1}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := parseArray(body)
		if !ok {
			return
		}
		var want []json.RawMessage
		if err := json.Unmarshal(body, &want); err != nil {
			t.Fatalf("parseArray accepted what encoding/json refuses: %v", err)
		}
		if len(got) != len(want) {
			t.Fatalf("%d elements, want %d", len(got), len(want))
		}
		for i := range got {
			if string(got[i]) != string(want[i]) {
				t.Fatalf("element %d: %q, want %q", i, got[i], want[i])
			}
		}
	})
}

// FuzzDecodeWire holds decodeWire's fast path to encoding/json: whatever
// the input, the decoded value and whether it decoded at all are the same.
func FuzzDecodeWire(f *testing.F) {
	f.Add([]byte(curlExample))
	f.Add([]byte(`{"Event_ID":"x","EVENT_ID":"y","tags":{"a":"1","a":"2"},"breadcrumbs":null,"sdk":{}}`))
	f.Add([]byte(`{"title":"\ud800 \u00e9 \"q\" \\ \/","level":3}`))
	f.Add([]byte(`{"exception":{"stacktrace":[{"line":1.5},{"in_app":"yes"}]},"user":{"id":"u","ip_hash":"h"}}`))
	f.Add([]byte("{\"title\":\"\xff\xfe\",\"enrichment\":{\"a\":[1,2e3,-0.5]}}"))
	f.Add([]byte(`{"title":"t","tags":{}}`))
	f.Add([]byte(`{"schema_version":null,"event_id":null,"title":null,"sdk":null,"exception":{"stacktrace":[null,{"line":null,"in_app":null}]},"breadcrumbs":[null,"a"],"tags":{"a":null},"user":null,"request":{"status_code":-0}}`))
	f.Add([]byte(`{"title":"a\"b\\c\/d\n\t","breadcrumbs":[],"exception":{"stacktrace":[]},"enrichment":{"a":[1,-2.5e+3,true,false,null,"\u00e9",{}]},"x":{"y":[[]]}}`))
	f.Add([]byte(`{"title":"a","title":"b","Title":"c","sdk":{"name":"n","NAME":"m"}}`))
	f.Add([]byte(`{"exception":{"stacktrace":[{"line":01},{"line":1.0},{"line":123456789012345678901}]}}`))
	f.Add([]byte(` {"user":{"id":"u","ip_hash":"h"},"request":{"url":"https://x","method":"GET","status_code":500}} `))
	f.Add([]byte(`{"title":"t","tags":null}`))
	f.Add([]byte(`{"title":"t"}`))
	f.Add([]byte(`{"browser":{"name":"Chrome","version":"136"},"os":"Linux","debug_meta":{"images":[{"debug_id":"d"}]},"exception":{"stacktrace":[{"abs_path":"https://x/a.js","colno":12,"line":1}]}}`))
	f.Add([]byte(`{"browser":"Mozilla/5.0","os":null,"debug_meta":[],"exception":{"stacktrace":[{"colno":"x","abs_path":1}]}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var got, want wireEvent
		gotErr := decodeWire(raw, &got)
		wantErr := json.Unmarshal(raw, &want)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("error %v, encoding/json says %v", gotErr, wantErr)
		}
		if len(want.Tags) == 0 {
			want.Tags = nil // no tags and an empty object are alike
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded\n%#v\nencoding/json decodes\n%#v", got, want)
		}
	})
}

// FuzzValidJSON holds validJSON to encoding/json's Valid.
func FuzzValidJSON(f *testing.F) {
	f.Add([]byte(`[` + curlExample + `]`))
	f.Add([]byte(`[1, "\ud800", {"a":-0.0e+1}, tru]`))
	f.Add([]byte("[\"\xff\"]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON %v, encoding/json %v", got, want)
		}
	})
}

// FuzzJSONString holds jsonString's shortcut to encoding/json.
func FuzzJSONString(f *testing.F) {
	for _, s := range []string{`"f4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f30"`, `"1.0"`, `""`, `"a\"b"`, `"\u0041"`, "\"\xff\"", `"x`, `x"`, `"a"b"`, `"` + "\t" + `"`, `42`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want *string
		if len(raw) > 0 && raw[0] == '"' {
			var s string
			if json.Unmarshal(raw, &s) == nil {
				want = &s
			}
		}
		got := jsonString(raw)
		if (got == nil) != (want == nil) || (got != nil && *got != *want) {
			t.Fatalf("jsonString(%q) = %v, encoding/json %v", raw, got, want)
		}
	})
}

// FuzzDecodeBag holds decodeBagFast to encoding/json with UseNumber: what it
// accepts, encoding/json accepts and decodes alike; and appendBagValue to
// encoding/json's Marshal on whatever encoding/json decodes.
func FuzzDecodeBag(f *testing.F) {
	f.Add([]byte(`{"affected_file":"src/main/java/shop/CheckoutService.java"}`))
	f.Add([]byte(`{"a":[1,-2.5e+3,true,false,null,"x",{},[]],"b":{"c":{"d":"<&>\n\"\\\/"}}}`))
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte(`{"\u00e9":"\ud800"}`))
	f.Add([]byte("{\"a\":\"\xff\"}"))
	f.Add([]byte(` { "a" : [ 01 ] } `))
	f.Add([]byte(`{"n":123456789012345678901234567890,"f":1e400,"z":-0}`))
	f.Add([]byte(`{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want map[string]any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		wantErr := dec.Decode(&want)
		if wantErr == nil && dec.More() {
			wantErr = errors.New("trailing data")
		}
		if got, ok := decodeBagFast(raw); ok {
			if wantErr != nil || want == nil {
				t.Fatalf("decoded %#v, encoding/json refuses: %v", got, wantErr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded\n%#v\nencoding/json decodes\n%#v", got, want)
			}
		}
		if wantErr != nil {
			return
		}
		wantJSON, err := json.Marshal(want)
		if err != nil {
			return
		}
		gotJSON, ok := appendBagValue(nil, want)
		if !ok {
			t.Fatalf("appendBagValue refuses %#v", want)
		}
		if !bytes.Equal(gotJSON, wantJSON) {
			t.Fatalf("encoded\n%s\nencoding/json encodes\n%s", gotJSON, wantJSON)
		}
	})
}

// FuzzBoundBag holds boundBag's shortcut (a bag within the bounds is kept
// as decoded) to the bounding copy it skips: both must give the same bag.
func FuzzBoundBag(f *testing.F) {
	f.Add([]byte(`{"affected_file":"src/main/java/shop/CheckoutService.java"}`))
	f.Add([]byte(`{"a":[1,true,null,"x",{},[]],"b":{"c":{"d":"e"}}}`))
	f.Add([]byte(`{"` + strings.Repeat("k", MaxTagKeyChars+1) + `":1}`))
	f.Add([]byte(`{"` + strings.Repeat("é", MaxTagKeyChars) + `":1}`))
	f.Add([]byte(`{"s":"` + strings.Repeat("é", MaxBagStringChars) + `"}`))
	f.Add([]byte(`{"s":"` + strings.Repeat("x", MaxBagStringChars+1) + `"}`))
	f.Add([]byte(`{"a":[` + strings.Repeat("0,", MaxBagItems) + `0]}`))
	f.Add([]byte(`{"a":` + strings.Repeat("[", MaxBagDepth+1) + strings.Repeat("]", MaxBagDepth+1) + `}`))
	f.Add([]byte(`{"a":` + strings.Repeat(`{"b":`, MaxBagDepth+1) + `1` + strings.Repeat("}", MaxBagDepth+1) + `}`))
	many := func(n int) []byte {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"k%d":[1,2,3,4,5,6,7,8,9]`, i)
		}
		b.WriteString("}")
		return []byte(b.String())
	}
	f.Add(many(MaxBagKeys))     // 1,000 values: at the budget
	f.Add(many(MaxBagKeys + 1)) // over the keys
	f.Add([]byte(`{"a":[` + strings.Repeat("[1,2,3,4,5,6,7,8,9,10],", 95) + `1]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil || m == nil {
			return
		}
		b := bagBounder{budget: MaxBagNodes}
		want := b.object(m, 0)
		if got := boundBag(m); !reflect.DeepEqual(got, want) {
			t.Fatalf("boundBag gives\n%#v\nbounding gives\n%#v", got, want)
		}
	})
}

// FuzzSplitBatch holds SplitBatch's one pass to its slow twin, SplitBody
// then Validate on each element: the same error, the same elements byte
// for byte, and for each the same event or the same rejection.
func FuzzSplitBatch(f *testing.F) {
	f.Add([]byte(`[`+curlExample+`,`+curlExample+`]`), false)
	f.Add([]byte(curlExample), true)
	f.Add([]byte(` [ `+curlExample+` , 1, "x", null, {"title":"\u00e9"}, {"event_id":3} ] `), false)
	f.Add([]byte(`[{"a":1}}`), false)
	f.Add([]byte(`[{"title":"t"},]`), false)
	f.Add([]byte(`[]`), false)
	f.Add([]byte(`[`+curlExample+`] x`), false)
	f.Add([]byte("[{\"title\":\"\xff\"}]"), false)
	f.Add([]byte(`[{},{},{}]`), false)
	f.Add([]byte(`{"title":"t","tags":{}}`), true)
	f.Add([]byte(`[`+curlExample+`]`), true)
	f.Add([]byte(curlExample), false)
	f.Fuzz(func(t *testing.T, body []byte, single bool) {
		const maxBatch = 3
		got, err := SplitBatch(body, single, maxBatch)
		raws, wantErr := SplitBody(body, single, maxBatch)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("error %v, want %v", err, wantErr)
		}
		if got.Len() != len(raws) {
			t.Fatalf("%d elements, want %d", got.Len(), len(raws))
		}
		for i, raw := range raws {
			if string(got.Raws[i]) != string(raw) {
				t.Fatalf("element %d is %q, want %q", i, got.Raws[i], raw)
			}
			ev, rej := got.Validate(i)
			wantEv, wantRej := Validate(raw)
			if !reflect.DeepEqual(rej, wantRej) || !reflect.DeepEqual(ev, wantEv) {
				t.Fatalf("element %d %q:\n got %+v %+v\nwant %+v %+v", i, raw, ev, rej, wantEv, wantRej)
			}
		}
	})
}
