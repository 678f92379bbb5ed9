// Package sentry is the pure half of anvil's Sentry-compatible door:
// it reads what an unmodified Sentry SDK posts — an envelope, or
// one event as JSON for /store/ — and translates a Sentry event into the
// Anvil Feed event of seed 004, which then goes through the feed's own
// validation, bounds, scrubbing and storage unchanged. No HTTP, no database,
// no clock: everything is a function of its arguments, so it is cheap to
// fuzz.
package sentry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	fastjson "github.com/segmentio/encoding/json"
)

// ErrEnvelope is the sentinel of every envelope that cannot be read.
var ErrEnvelope = errors.New("invalid envelope")

// Envelope is what an envelope says that the door needs: its header and the
// payloads of its event items. Every other item — transaction, session,
// sessions, client_report, attachment, profile, replay_* and types
// nobody knows yet — is read past and counted in Skipped.
type Envelope struct {
	Header Header
	Events [][]byte
	// CheckIns are the payloads of check_in items (cron monitors,
	// docs/monitors.md), which the door hands to domain/monitor.
	CheckIns [][]byte
	Skipped  int
}

// Header is the envelope's first line, as far as the door reads it.
type Header struct {
	EventID string `json:"event_id"`
	DSN     string `json:"dsn"`
}

type itemHeader struct {
	Type   string           `json:"type"`
	Length *json.RawMessage `json:"length"`
}

// MaxItems bounds the items of one envelope: the body is already bounded in
// bytes, but an envelope of a million empty items would still cost a JSON
// decode each.
const MaxItems = 1000

// ParseHeader reads only the envelope's header line, for the DSN the
// authentication may need before the body is judged.
func ParseHeader(body []byte) (Header, error) {
	line, _ := cutLine(body)
	var h Header
	if len(bytes.TrimSpace(line)) == 0 {
		return h, fmt.Errorf("%w: the header line is empty", ErrEnvelope)
	}
	if err := fastjson.Unmarshal(line, &h); err != nil {
		return Header{}, fmt.Errorf("%w: the header line is not a JSON object", ErrEnvelope)
	}
	return h, nil
}

// ParseEnvelope reads an envelope as Sentry defines it: a header line (a
// JSON object), then items, each an item header line (a JSON object with a
// type and an optional length) and a payload — length bytes when the length
// is given, else everything up to the next newline or the end. The final
// newline may be missing. An item longer than announced, a length that
// runs past the end, or a header that is not a JSON object makes the whole
// envelope unreadable.
func ParseEnvelope(body []byte) (Envelope, error) {
	var env Envelope
	h, err := ParseHeader(body)
	if err != nil {
		return env, err
	}
	env.Header = h
	_, rest := cutLine(body)
	for n := 1; len(rest) > 0; n++ {
		if n > MaxItems {
			return Envelope{}, fmt.Errorf("%w: more than %d items", ErrEnvelope, MaxItems)
		}
		var line []byte
		line, rest = cutLine(rest)
		if len(bytes.TrimSpace(line)) == 0 {
			if len(rest) == 0 {
				break // trailing blank line
			}
			return Envelope{}, fmt.Errorf("%w: item %d has an empty header line", ErrEnvelope, n)
		}
		var ih itemHeader
		if err := fastjson.Unmarshal(line, &ih); err != nil {
			return Envelope{}, fmt.Errorf("%w: the header of item %d is not a JSON object", ErrEnvelope, n)
		}
		var payload []byte
		if ih.Length != nil && string(*ih.Length) != "null" {
			var length int64
			if err := fastjson.Unmarshal(*ih.Length, &length); err != nil || length < 0 {
				return Envelope{}, fmt.Errorf("%w: item %d has a length that is not a non-negative integer", ErrEnvelope, n)
			}
			if length > int64(len(rest)) {
				return Envelope{}, fmt.Errorf("%w: item %d announces %d bytes but only %d follow", ErrEnvelope, n, length, len(rest))
			}
			payload, rest = rest[:length], rest[length:]
			switch {
			case len(rest) == 0:
			case rest[0] == '\n':
				rest = rest[1:]
			case rest[0] == '\r' && len(rest) > 1 && rest[1] == '\n':
				rest = rest[2:]
			default:
				return Envelope{}, fmt.Errorf("%w: item %d is longer than its announced length of %d bytes", ErrEnvelope, n, length)
			}
		} else {
			payload, rest = cutLine(rest)
		}
		switch ih.Type {
		case "event":
			env.Events = append(env.Events, payload)
		case "check_in":
			env.CheckIns = append(env.CheckIns, payload)
		default:
			env.Skipped++
		}
	}
	return env, nil
}

// cutLine splits b at its first newline (dropping a \r before it).
func cutLine(b []byte) (line, rest []byte) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return b, nil
	}
	line, rest = b[:i], b[i+1:]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, rest
}
