package event

import (
	"errors"
	"strings"
	"testing"
)

func TestSplitBody(t *testing.T) {
	t.Parallel()
	batch := func(n int) string {
		items := make([]string, n)
		for i := range items {
			items[i] = curlExample
		}
		return "[" + strings.Join(items, ",") + "]"
	}
	cases := []struct {
		name   string
		body   string
		single bool
		max    int
		n      int    // elements returned when ok
		bad    string // substring of the 400's message; "" = ok
	}{
		{"single object", curlExample, true, 50, 1, ""},
		{"single object with blanks", "\n  " + curlExample + "\n", true, 50, 1, ""},
		{"array on single endpoint", "[" + curlExample + "]", true, 50, 0, "one event object"},
		{"object on batch endpoint", curlExample, false, 50, 0, "JSON array"},
		{"batch of one", batch(1), false, 50, 1, ""},
		{"batch of 50", batch(50), false, 50, 50, ""},
		{"batch of 51", batch(51), false, 50, 0, "at most 50"},
		{"default limit", batch(51), false, 0, 0, "at most 50"},
		{"operator limit", batch(3), false, 2, 0, "at most 2"},
		{"empty array", "[]", false, 50, 0, ""},
		{"mixed elements are split, not judged", `[{"a":1}, 42, null, "x"]`, false, 50, 4, ""},
		{"not JSON", "event_id=1", true, 50, 0, "not valid JSON"},
		{"truncated object", `{"event_id": "x"`, true, 50, 0, "not valid JSON"},
		{"truncated array", `[{"a":1},`, false, 50, 0, "not valid JSON"},
		{"trailing garbage", curlExample + "x", true, 50, 0, "not valid JSON"},
		{"two objects", curlExample + curlExample, true, 50, 0, "not valid JSON"},
		{"empty body", "", true, 50, 0, "empty"},
		{"blank body", "  \n", false, 50, 0, "empty"},
		{"scalar number", "42", true, 50, 0, "neither a JSON object nor a JSON array"},
		{"scalar string", `"event"`, false, 50, 0, "neither a JSON object nor a JSON array"},
		{"null", "null", false, 50, 0, "neither a JSON object nor a JSON array"},
	}
	for _, c := range cases {
		got, err := SplitBody([]byte(c.body), c.single, c.max)
		if c.bad != "" {
			if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), c.bad) {
				t.Fatalf("%s: err = %v, want ErrBadRequest mentioning %q", c.name, err, c.bad)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got == nil || len(got) != c.n {
			t.Fatalf("%s: %d elements (nil=%v), want %d", c.name, len(got), got == nil, c.n)
		}
	}
}

func TestSplitBodyElementsValidate(t *testing.T) {
	t.Parallel()
	elems, err := SplitBody([]byte(`[`+curlExample+`, 42]`), false, 50)
	if err != nil {
		t.Fatalf("SplitBody: %v", err)
	}
	if _, rej := Validate(elems[0]); rej != nil {
		t.Fatalf("first element rejected: %+v", rej)
	}
	if _, rej := Validate(elems[1]); rej == nil || rej.ReasonCode != SchemaViolation || rej.EventID != nil {
		t.Fatalf("scalar element: %+v", rej)
	}
}
