package sentry

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestParseEnvelope(t *testing.T) {
	t.Parallel()
	ev := `{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc","message":"hi"}`
	cases := []struct {
		name    string
		body    string
		events  []string
		skipped int
		dsn     string
		err     string
	}{
		{name: "length-announced item", body: `{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc","dsn":"https://k@h/1"}` + "\n" +
			`{"type":"event","length":` + itoa(len(ev)) + "}\n" + ev + "\n", events: []string{ev}, dsn: "https://k@h/1"},
		{name: "newline-terminated item", body: "{}\n" + `{"type":"event"}` + "\n" + ev + "\n", events: []string{ev}},
		{name: "missing final newline", body: "{}\n" + `{"type":"event"}` + "\n" + ev, events: []string{ev}},
		{name: "missing final newline, length", body: "{}\n" + `{"type":"event","length":` + itoa(len(ev)) + "}\n" + ev, events: []string{ev}},
		{name: "CRLF lines", body: "{}\r\n" + `{"type":"event"}` + "\r\n" + ev + "\r\n", events: []string{ev}},
		{name: "payload with a newline inside its length", body: "{}\n" + `{"type":"attachment","length":5}` + "\nab\ncd\n" + `{"type":"event"}` + "\n" + ev + "\n",
			events: []string{ev}, skipped: 1},
		{name: "unknown and known non-event items", body: "{}\n" + `{"type":"session"}` + "\n{}\n" + `{"type":"client_report"}` + "\n{}\n" +
			`{"type":"made_up_future_item","length":3}` + "\nabc\n" + `{"type":"event"}` + "\n" + ev + "\n" + `{"type":"transaction"}` + "\n{}\n",
			events: []string{ev}, skipped: 4},
		{name: "header only", body: "{}\n"},
		{name: "header only, no newline", body: "{}"},
		{name: "empty payload with length 0", body: "{}\n" + `{"type":"event","length":0}` + "\n\n", events: []string{""}},
		{name: "empty envelope", body: "", err: "header line is empty"},
		{name: "blank envelope", body: "\n\n", err: "header line is empty"},
		{name: "header not JSON", body: "nope\n", err: "header line is not a JSON object"},
		{name: "item header not JSON", body: "{}\nnope\n{}\n", err: "header of item 1"},
		{name: "item longer than announced", body: "{}\n" + `{"type":"event","length":3}` + "\nabcdef\n", err: "longer than its announced length"},
		{name: "length past the end", body: "{}\n" + `{"type":"event","length":300}` + "\nabc\n", err: "announces 300 bytes but only 4 follow"},
		{name: "negative length", body: "{}\n" + `{"type":"event","length":-1}` + "\nabc\n", err: "non-negative integer"},
		{name: "string length", body: "{}\n" + `{"type":"event","length":"3"}` + "\nabc\n", err: "non-negative integer"},
		{name: "empty item header between items", body: "{}\n" + `{"type":"event"}` + "\n" + ev + "\n\n" + `{"type":"event"}` + "\n" + ev + "\n", err: "empty header line"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env, err := ParseEnvelope([]byte(tc.body))
			if tc.err != "" {
				if err == nil || !errors.Is(err, ErrEnvelope) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(env.Events) != len(tc.events) {
				t.Fatalf("%d events, want %d", len(env.Events), len(tc.events))
			}
			for i := range tc.events {
				if string(env.Events[i]) != tc.events[i] {
					t.Fatalf("event %d = %q, want %q", i, env.Events[i], tc.events[i])
				}
			}
			if env.Skipped != tc.skipped {
				t.Fatalf("skipped %d, want %d", env.Skipped, tc.skipped)
			}
			if env.Header.DSN != tc.dsn {
				t.Fatalf("dsn %q, want %q", env.Header.DSN, tc.dsn)
			}
		})
	}
}

func TestParseEnvelopeTooManyItems(t *testing.T) {
	t.Parallel()
	body := "{}\n" + strings.Repeat(`{"type":"session"}`+"\n{}\n", MaxItems+1)
	if _, err := ParseEnvelope([]byte(body)); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("error %v", err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
