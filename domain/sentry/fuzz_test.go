package sentry

import (
	"encoding/json"
	"testing"

	"anvil/domain/event"
)

// FuzzEnvelope: the parser never panics, and what it reads is consistent:
// an error is always ErrEnvelope, and every event payload lies inside the body.
func FuzzEnvelope(f *testing.F) {
	ev := `{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc","message":"hi"}`
	f.Add([]byte("{}\n" + `{"type":"event"}` + "\n" + ev + "\n"))
	f.Add([]byte("{}\n" + `{"type":"event","length":62}` + "\n" + ev))
	f.Add([]byte("{}\n" + `{"type":"attachment","length":5}` + "\nab\ncd\n" + `{"type":"session"}` + "\n{}"))
	f.Add([]byte(""))
	f.Add([]byte("{}\n" + `{"type":"event","length":-1}` + "\n"))
	f.Add([]byte("{}\n" + `{"type":"event","length":1e99}` + "\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		env, err := ParseEnvelope(body)
		if err != nil {
			if env.Events != nil {
				t.Fatal("events beside an error")
			}
			return
		}
		total := 0
		for _, e := range env.Events {
			total += len(e)
		}
		if total > len(body) {
			t.Fatalf("%d bytes of events from a body of %d", total, len(body))
		}
		if len(env.Events)+env.Skipped > MaxItems {
			t.Fatalf("%d items", len(env.Events)+env.Skipped)
		}
	})
}

// FuzzTranslate: the translation never panics; what it accepts is JSON the
// feed can judge, with the id it reports; what it refuses is a
// schema_violation with a message.
func FuzzTranslate(f *testing.F) {
	f.Add([]byte(`{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc","exception":[{"type":"E","value":"v","stacktrace":{"frames":[{"filename":"a","vars":{"x":1}}]}}],"tags":[["a","b"]]}`))
	f.Add([]byte(`{"event_id":"9ec79c33-ec99-42ab-8353-589fcb2e04dc","timestamp":1.5,"logentry":{"message":"m"},"breadcrumbs":{"values":[{}]}}`))
	f.Add([]byte(`{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc","timestamp":"2026-01-01T00:00:00","user":{"id":[1]},"tags":{"a":{"b":1}}}`))
	f.Add([]byte(`{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc","timestamp":-1e20,"exception":{"values":null}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		tr, p := Translate(raw, defaults())
		if p != nil {
			if p.ReasonCode != event.SchemaViolation || p.Message == "" {
				t.Fatalf("%+v", p)
			}
			return
		}
		if !json.Valid(tr.Raw) {
			t.Fatalf("not JSON: %q", tr.Raw)
		}
		ev, rej := event.Validate(tr.Raw)
		if rej != nil {
			if rej.EventID == nil || *rej.EventID != tr.EventID {
				t.Fatalf("the feed's rejection does not echo %s: %+v", tr.EventID, rej)
			}
			return
		}
		if ev.EventID != tr.EventID || len(tr.HexID) != 32 {
			t.Fatalf("ids %q %q %q", ev.EventID, tr.EventID, tr.HexID)
		}
	})
}
