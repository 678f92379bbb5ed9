package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	fastjson "github.com/segmentio/encoding/json"
)

// ErrBadRequest marks the cases the contract answers with a bare 400 for the
// whole request: the body is not JSON, is neither an object nor an array, is
// the wrong one of the two for the endpoint, or is an array above the batch
// limit. Callers test for it with errors.Is; the wrapped message says which.
var ErrBadRequest = errors.New("bad request")

// SplitBody checks the shape of a request body and returns its events, each
// as the raw JSON the sender wrote, for Validate to judge one by one.
//
// single selects the endpoint: true for POST /api/feed/events, whose body
// must be one JSON object; false for /api/feed/events/batch, whose body must
// be a JSON array of at most maxBatch elements (maxBatch <= 0 means
// DefaultMaxBatch). The other shape on either endpoint is a 400 rather than
// being accepted silently, so that a sender wired to the wrong path finds out
// at once instead of in production.
//
// Elements of an array are not judged here: a batch with one broken element is
// still a 202 with that element in "rejected", which is why an element that is
// not an object (a number, null, …) is returned like any other.
func SplitBody(body []byte, single bool, maxBatch int) ([]json.RawMessage, error) {
	if maxBatch <= 0 {
		maxBatch = DefaultMaxBatch
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("%w: the body is empty; expected JSON", ErrBadRequest)
	}
	switch trimmed[0] {
	case '{':
		if !validJSON(trimmed) {
			return nil, fmt.Errorf("%w: the body is not valid JSON", ErrBadRequest)
		}
		if !single {
			return nil, fmt.Errorf("%w: the batch endpoint takes a JSON array of events; post a single object to /api/feed/events", ErrBadRequest)
		}
		return []json.RawMessage{json.RawMessage(trimmed)}, nil
	case '[':
		elems, ok := parseArray(trimmed)
		if !ok {
			if !validJSON(trimmed) {
				return nil, fmt.Errorf("%w: the body is not valid JSON", ErrBadRequest)
			}
			if elems, ok = splitArray(trimmed); !ok {
				return nil, fmt.Errorf("%w: the body is not valid JSON", ErrBadRequest)
			}
		}
		if single {
			return nil, fmt.Errorf("%w: this endpoint takes one event object; post arrays to /api/feed/events/batch", ErrBadRequest)
		}
		if len(elems) > maxBatch {
			return nil, fmt.Errorf("%w: the batch holds %d events; at most %d are allowed", ErrBadRequest, len(elems), maxBatch)
		}
		return elems, nil
	default:
		if validJSON(trimmed) {
			return nil, fmt.Errorf("%w: the body is neither a JSON object nor a JSON array", ErrBadRequest)
		}
		return nil, fmt.Errorf("%w: the body is not valid JSON", ErrBadRequest)
	}
}

// validJSON is json.Valid, answered by segmentio/encoding's validator
// (several times faster) where that one accepts: FuzzValidJSON holds it to
// encoding/json's answer, and a refusal is confirmed by encoding/json.
func validJSON(b []byte) bool {
	return fastjson.Valid(b) || json.Valid(b)
}

// parseArray validates arr and finds its elements in one pass, with
// segmentio/encoding's parser; the elements are slices of arr, not copies.
// When it refuses (which FuzzParseArray holds to mean encoding/json may
// still accept), SplitBody asks validJSON and splitArray instead.
func parseArray(arr []byte) ([]json.RawMessage, bool) {
	elems := []json.RawMessage{}
	rest, err := fastjson.Parse(arr, &elems, fastjson.DontCopyRawMessage|fastjson.ZeroCopy)
	if err != nil || len(bytes.TrimLeft(rest, " \t\r\n")) != 0 {
		return nil, false
	}
	return elems, true
}

// splitArray returns the elements of arr, a valid JSON array, as slices of
// it (not copies), for the arrays parseArray refuses and validJSON accepts.
// It only has to find where each element ends — a comma or the closing
// bracket outside any string, object or array — because the validator has
// already vouched for everything else. ok is false if arr ends early after
// all, so that a validator that was wrong costs a 400, not a panic.
func splitArray(arr []byte) (elems []json.RawMessage, ok bool) {
	elems = []json.RawMessage{}
	i := skipSpace(arr, 1)
	if i < len(arr) && arr[i] == ']' {
		return elems, true
	}
	for {
		start, depth := i, 0
	scan:
		for ; i < len(arr); i++ {
			switch arr[i] {
			case '"':
				for i++; i < len(arr) && arr[i] != '"'; i++ {
					if arr[i] == '\\' {
						i++
					}
				}
			case '{', '[':
				depth++
			case '}', ']':
				if depth == 0 {
					break scan
				}
				depth--
			case ',':
				if depth == 0 {
					break scan
				}
			}
		}
		if i >= len(arr) {
			return nil, false
		}
		elems = append(elems, json.RawMessage(bytes.TrimRight(arr[start:i], " \t\r\n")))
		if arr[i] == ']' {
			return elems, true
		}
		i = skipSpace(arr, i+1)
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// A Batch is the events of one request body: each as the raw JSON the
// sender wrote and, when SplitBatch's one pass could decode it, already
// decoded, so that Validate does not read its bytes a second time.
type Batch struct {
	Raws    []json.RawMessage
	wires   []wireEvent // wires[i] is Raws[i] decoded, when decoded[i]
	decoded []bool
}

// RawBatch is a batch of elements nobody has decoded yet.
func RawBatch(raws []json.RawMessage) Batch { return Batch{Raws: raws} }

// Len is the number of elements.
func (b *Batch) Len() int { return len(b.Raws) }

// Validate is Validate(b.Raws[i]), answered from the element's decoding
// when SplitBatch has it.
func (b *Batch) Validate(i int) (Event, *Rejection) {
	if i < len(b.decoded) && b.decoded[i] {
		w := &b.wires[i]
		if len(w.Tags) == 0 {
			w.Tags = nil // as decodeWire leaves it
		}
		return validateWire(w, nil)
	}
	return Validate(b.Raws[i])
}

// SplitBatch is SplitBody, in one pass with the decoding of the events
// where it can: the common body — an array (or, on the single endpoint,
// an object) of valid UTF-8 whose events have the shape decodeWireFast
// takes — is checked, cut into its elements and decoded at once, where
// SplitBody's check and cut and Validate's decoding read every byte twice
// (docs/feed.md, "The server's share"). Anything else, and every error, is
// SplitBody's: FuzzSplitBatch holds the two to the same elements, errors
// and verdicts.
//
// The decoded strings share one copy of the body: whatever outlives the
// request must copy what it keeps, as with decodeWire.
func SplitBatch(body []byte, single bool, maxBatch int) (Batch, error) {
	if maxBatch <= 0 {
		maxBatch = DefaultMaxBatch
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && (trimmed[0] == '[' && !single || trimmed[0] == '{' && single) && utf8.Valid(trimmed) {
		if b, ok := splitDecoded(trimmed, maxBatch); ok {
			return b, nil
		}
	}
	raws, err := SplitBody(body, single, maxBatch)
	return RawBatch(raws), err
}

// splitDecoded is SplitBatch's one pass over trimmed, a UTF-8 array or
// object. An element decodeWireFast refuses is still checked and cut (by
// skip) and left to Validate; ok is false when skip refuses one too, when
// the body ends wrong, or when the array holds more than maxBatch elements
// — all of them SplitBody's to answer.
func splitDecoded(trimmed []byte, maxBatch int) (b Batch, ok bool) {
	p := wireParser{b: trimmed, s: string(trimmed)}
	elem := func() bool {
		if len(b.Raws) == maxBatch {
			return false
		}
		start := p.i
		b.wires = append(b.wires, wireEvent{})
		decoded := p.peek() == '{' && p.event(&b.wires[len(b.wires)-1])
		if !decoded {
			p.i = start
			b.wires[len(b.wires)-1] = wireEvent{}
			if !p.skip(0) {
				return false
			}
		}
		b.Raws = append(b.Raws, json.RawMessage(trimmed[start:p.i:p.i]))
		b.decoded = append(b.decoded, decoded)
		return true
	}
	if trimmed[0] == '{' {
		ok = elem()
	} else {
		// Room for the elements a body of this size can hold, within
		// the batch limit (an event of the storm is about 900 bytes).
		n := min(maxBatch, 1+len(trimmed)/512)
		b.Raws = make([]json.RawMessage, 0, n)
		b.wires = make([]wireEvent, 0, n)
		b.decoded = make([]bool, 0, n)
		ok = p.array(elem)
	}
	return b, ok && p.i == len(trimmed)
}
