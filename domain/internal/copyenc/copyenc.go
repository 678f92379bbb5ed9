// Package copyenc encodes rows in Postgres's binary COPY format, so that a
// caller can encode its rows where it has time (in parallel, outside any
// transaction) and the transaction only streams bytes: pgx would encode
// every value of every row through its type map inside the transaction.
//
// A row is a []byte built with BeginRow and the Append functions; a value
// known only later is appended as a placeholder and written in place with
// PutUUID or PutTime at the offset the caller kept.
package copyenc

import (
	"encoding/binary"
	"io"
	"time"

	"github.com/google/uuid"
)

// pgEpoch is Postgres's zero time: timestamps travel as microseconds since.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix() * 1_000_000

// BeginRow starts a row of fields values on b.
func BeginRow(b []byte, fields int) []byte {
	return binary.BigEndian.AppendUint16(b, uint16(fields))
}

// AppendUUID appends a uuid value; its 16 bytes are the last of the result.
func AppendUUID(b []byte, id uuid.UUID) []byte {
	b = binary.BigEndian.AppendUint32(b, 16)
	return append(b, id[:]...)
}

// AppendText appends a text value.
func AppendText(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// AppendTime appends a timestamptz value; its 8 bytes are the last of the
// result.
func AppendTime(b []byte, t time.Time) []byte {
	b = binary.BigEndian.AppendUint32(b, 8)
	return binary.BigEndian.AppendUint64(b, uint64(Micros(t)))
}

// BeginJSON starts a json (or text) value: the JSON text follows it on
// the returned slice, and EndJSON(b, at) writes its length once it is
// complete. at is where the value's length goes. (json's binary form is
// its text; jsonb's would carry a format version byte first.)
func BeginJSON(b []byte) (out []byte, at int) {
	at = len(b)
	return append(b, 0, 0, 0, 0), at // the length, written by EndJSON
}

// EndJSON completes the json value begun at at.
func EndJSON(b []byte, at int) {
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
}

// PutUUID writes id over the 16 bytes at off.
func PutUUID(b []byte, off int, id uuid.UUID) { copy(b[off:], id[:]) }

// PutTime writes t over the 8 bytes of a timestamptz at off.
func PutTime(b []byte, off int, t time.Time) {
	binary.BigEndian.PutUint64(b[off:], uint64(Micros(t)))
}

// Micros is t as Postgres stores a timestamptz: microseconds since its
// epoch, rounded down (as pgx encodes it).
func Micros(t time.Time) int64 {
	return t.Unix()*1_000_000 + int64(t.Nanosecond())/1000 - pgEpoch
}

// Header and Trailer frame a binary COPY stream: the signature, no flags,
// no header extension; a tuple of -1 fields.
var (
	Header  = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")
	Trailer = []byte{0xff, 0xff}
)

// Stream reads the binary COPY stream of rows, in order, without copying
// them into one buffer first.
type Stream struct {
	parts [][]byte // header, rows, trailer
	off   int
}

// NewStream frames rows.
func NewStream(rows [][]byte) *Stream {
	parts := make([][]byte, 0, len(rows)+2)
	parts = append(parts, Header)
	parts = append(parts, rows...)
	return &Stream{parts: append(parts, Trailer)}
}

// Read implements io.Reader.
func (s *Stream) Read(p []byte) (int, error) {
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
