package domain

import (
	"encoding/binary"
	"io"
	"time"

	"github.com/google/uuid"

	"anvil/domain/event"
)

// An event's row of feed_events in COPY's binary format, encoded by the
// request that brought it, in parallel with the other requests, so that the
// group transaction only streams bytes: pgx would encode every value of
// every row through its type map inside the transaction, on the one
// goroutine the whole group waits for.
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
	payloadAt  int // offset of the payload's JSON text (after jsonb's version byte)
}

// pgEpoch is Postgres's zero time: timestamps travel as microseconds since.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix() * 1_000_000

// encodeEventRow encodes ev's row; the stored payload (event.Marshal's
// encoding) is written straight into it.
func encodeEventRow(org, project, conn uuid.UUID, key, fp string, ev *event.Event) (copyRow, error) {
	b := make([]byte, 0, 1536)
	var r copyRow
	b = binary.BigEndian.AppendUint16(b, uint16(len(feedEventColumns))) // the tuple's field count
	b = appendCopyUUID(b, org)
	b = appendCopyText(b, key)
	b = appendCopyUUID(b, project)
	b = appendCopyUUID(b, conn)
	b = appendCopyText(b, ev.Environment)
	b = appendCopyText(b, fp)
	b = appendCopyUUID(b, uuid.Nil)
	r.incidentAt = len(b) - 16
	b = appendCopyTime(b, time.Time{})
	r.receivedAt = len(b) - 8
	b = appendCopyTime(b, ev.Timestamp)
	lenAt := len(b)
	b = append(b, 0, 0, 0, 0, 1) // the length, then jsonb's format version
	r.payloadAt = len(b)
	b, err := event.AppendMarshal(b, ev)
	if err != nil {
		return copyRow{}, err
	}
	binary.BigEndian.PutUint32(b[lenAt:], uint32(len(b)-lenAt-4))
	r.b = b
	return r, nil
}

// place writes the incident and the time of receipt into the row.
func (r *copyRow) place(incident uuid.UUID, received time.Time) {
	copy(r.b[r.incidentAt:], incident[:])
	binary.BigEndian.PutUint64(r.b[r.receivedAt:], uint64(pgMicros(received)))
}

// payload is the stored form of the event, as text.
func (r *copyRow) payload() string { return string(r.b[r.payloadAt:]) }

func appendCopyUUID(b []byte, id uuid.UUID) []byte {
	b = binary.BigEndian.AppendUint32(b, 16)
	return append(b, id[:]...)
}

func appendCopyText(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func appendCopyTime(b []byte, t time.Time) []byte {
	b = binary.BigEndian.AppendUint32(b, 8)
	return binary.BigEndian.AppendUint64(b, uint64(pgMicros(t)))
}

// pgMicros is t as Postgres stores a timestamptz: microseconds since its
// epoch, rounded down (as pgx encodes it).
func pgMicros(t time.Time) int64 {
	return t.Unix()*1_000_000 + int64(t.Nanosecond())/1000 - pgEpoch
}

// copyHeader and copyTrailer frame a binary COPY stream: the signature, no
// flags, no header extension; a tuple of -1 fields.
var (
	copyHeader  = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")
	copyTrailer = []byte{0xff, 0xff}
)

// copyStream reads the binary COPY stream of rows, in order, without
// copying them into one buffer first.
type copyStream struct {
	parts [][]byte // header, rows, trailer
	off   int
}

func newCopyStream(rows []*copyRow) *copyStream {
	parts := make([][]byte, 0, len(rows)+2)
	parts = append(parts, copyHeader)
	for _, r := range rows {
		parts = append(parts, r.b)
	}
	return &copyStream{parts: append(parts, copyTrailer)}
}

func (s *copyStream) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && len(s.parts) > 0 {
		c := copy(p[n:], s.parts[0][s.off:])
		n += c
		s.off += c
		if s.off == len(s.parts[0]) {
			s.parts, s.off = s.parts[1:], 0
		}
	}
	if n == 0 && len(s.parts) == 0 {
		return 0, io.EOF
	}
	return n, nil
}
