package feed

import (
	"fmt"
	"time"

	"github.com/google/uuid"

	"anvil/domain/event"
	"anvil/domain/internal/copyenc"
)

// An event's row of feed_events in COPY's binary format (copyenc), encoded
// by the request that brought it, in parallel with the other requests, so
// that the group transaction only streams bytes.
//
// The row holds every column of feedEventColumns. Two are known only when
// the group is stored, and are written into the row then: the incident (its
// id is looked up, or chosen, by the group) and the time of receipt (the
// group's, so that an event's receipt and its incident's last_seen agree).

// copyRow is one event's encoded row.
type copyRow struct {
	b          []byte
	incidentAt int // offset of the incident id's 16 bytes
	receivedAt int // offset of received_at's 8 bytes
	payloadAt  int // offset of the payload's JSON text
}

// encodeEventRow encodes ev's row; the stored payload (event.Marshal's
// encoding) is written straight into it.
func encodeEventRow(org, project, conn uuid.UUID, key, fp string, ev *event.Event) (copyRow, error) {
	// The key is a canonical UUID (Validate's contract) stored as its 16
	// bytes (migration 20261207040000).
	id, err := uuid.Parse(key)
	if err != nil {
		return copyRow{}, fmt.Errorf("event key %q: %w", key, err)
	}
	b := make([]byte, 0, 1536)
	var r copyRow
	b = copyenc.BeginRow(b, len(feedEventColumns))
	b = copyenc.AppendUUID(b, org)
	b = copyenc.AppendUUID(b, id)
	b = copyenc.AppendUUID(b, project)
	b = copyenc.AppendUUID(b, conn)
	b = copyenc.AppendText(b, ev.Environment)
	b = copyenc.AppendText(b, fp)
	b = copyenc.AppendUUID(b, uuid.Nil)
	r.incidentAt = len(b) - 16
	b = copyenc.AppendTime(b, time.Time{})
	r.receivedAt = len(b) - 8
	b = copyenc.AppendTime(b, ev.Timestamp)
	b, lenAt := copyenc.BeginJSON(b)
	r.payloadAt = len(b)
	b, err = event.AppendMarshal(b, ev)
	if err != nil {
		return copyRow{}, err
	}
	copyenc.EndJSON(b, lenAt)
	r.b = b
	return r, nil
}

// place writes the incident and the time of receipt into the row.
func (r *copyRow) place(incident uuid.UUID, received time.Time) {
	copyenc.PutUUID(r.b, r.incidentAt, incident)
	copyenc.PutTime(r.b, r.receivedAt, received)
}

// payload is the stored form of the event, as text.
func (r *copyRow) payload() string { return string(r.b[r.payloadAt:]) }

// newCopyStream is the binary COPY stream of rows, in order.
func newCopyStream(rows []*copyRow) *copyenc.Stream {
	bs := make([][]byte, len(rows))
	for i, r := range rows {
		bs[i] = r.b
	}
	return copyenc.NewStream(bs)
}
