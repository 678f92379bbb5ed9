package feed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/event"
)

// The per-event verdicts that no real event can provoke through the HTTP
// path: the scrubber giving up (redaction_failed) and a fault in the
// pipeline (internal_error). Everything else is tested end to end in web.
func TestPrepareScrubFailureAndFault(t *testing.T) {
	t.Parallel()
	raw := []byte(`{"event_id":"F4B1A0C2-0F4A-4A1E-9D7A-2B6C5D8E1F30","timestamp":"2026-09-16T10:11:12Z","title":"boom",
		"level":"error","environment":"production","service":"api","sdk":{"name":"x"}}`)
	snd := &FeedSender{ConnectionID: uuid.New(), bindings: map[string]string{"production": domain.PolicyObserve}}
	cases := []struct {
		name  string
		scrub func(*event.Event) error
		code  string
		msg   string
	}{
		{"scrubber gives up", func(*event.Event) error {
			return fmt.Errorf("%w: title is not valid UTF-8", event.ErrRedactionFailed)
		}, event.RedactionFailed, "not valid UTF-8"},
		{"fault in the pipeline", func(*event.Event) error { panic("boom") }, event.InternalError, "fault on our side"},
		{"an unexpected error", func(*event.Event) error { return errors.New("x") }, event.RedactionFailed, "x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &Feed{s: &domain.Store{Log: slog.New(slog.DiscardHandler)}, scrub: tc.scrub}
			b, err := event.SplitBatch(raw, true, 1)
			if err != nil {
				t.Fatal(err)
			}
			_, rej := f.prepare(context.Background(), &b, 0, snd, event.IPHash("192.0.2.1", time.Now(), snd.ConnectionID.String()))
			if rej == nil || rej.ReasonCode != tc.code || rej.EventID == nil || *rej.EventID != "F4B1A0C2-0F4A-4A1E-9D7A-2B6C5D8E1F30" {
				t.Fatalf("got %+v, want %s with the id as spelled", rej, tc.code)
			}
			if !contains(rej.Message, tc.msg) {
				t.Fatalf("message %q lacks %q", rej.Message, tc.msg)
			}
		})
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
