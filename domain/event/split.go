package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
		if !json.Valid(trimmed) {
			return nil, fmt.Errorf("%w: the body is not valid JSON", ErrBadRequest)
		}
		if !single {
			return nil, fmt.Errorf("%w: the batch endpoint takes a JSON array of events; post a single object to /api/feed/events", ErrBadRequest)
		}
		return []json.RawMessage{json.RawMessage(trimmed)}, nil
	case '[':
		var elems []json.RawMessage
		if err := json.Unmarshal(trimmed, &elems); err != nil {
			return nil, fmt.Errorf("%w: the body is not valid JSON", ErrBadRequest)
		}
		if single {
			return nil, fmt.Errorf("%w: this endpoint takes one event object; post arrays to /api/feed/events/batch", ErrBadRequest)
		}
		if len(elems) > maxBatch {
			return nil, fmt.Errorf("%w: the batch holds %d events; at most %d are allowed", ErrBadRequest, len(elems), maxBatch)
		}
		if elems == nil {
			elems = []json.RawMessage{}
		}
		return elems, nil
	default:
		if json.Valid(trimmed) {
			return nil, fmt.Errorf("%w: the body is neither a JSON object nor a JSON array", ErrBadRequest)
		}
		return nil, fmt.Errorf("%w: the body is not valid JSON", ErrBadRequest)
	}
}
