package copyenc

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/uuid"
)

// TestStreamReadsInAnyChunks: the stream is the header, the rows and the
// trailer, whatever the reader's buffer.
func TestStreamReadsInAnyChunks(t *testing.T) {
	t.Parallel()
	rows := [][]byte{[]byte("first"), {}, []byte("second row")}
	want := append(append(append(bytes.Clone(Header), "first"...), "second row"...), Trailer...)
	for name, r := range map[string]io.Reader{
		"whole":    NewStream(rows),
		"one byte": iotest.OneByteReader(NewStream(rows)),
		"half":     iotest.HalfReader(NewStream(rows)),
	} {
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
}

// TestMicrosRoundsDown: timestamps before 1970 and before Postgres's epoch
// round down to the microsecond, as pgx encodes them.
func TestMicrosRoundsDown(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		t    time.Time
		want int64
	}{
		{time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), 0},
		{time.Date(2000, 1, 1, 0, 0, 0, 1999, time.UTC), 1},
		{time.Date(1999, 12, 31, 23, 59, 59, 999999999, time.UTC), -1},
		{time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC), -946684800000001},
	} {
		if got := Micros(c.t); got != c.want {
			t.Fatalf("Micros(%v) = %d, want %d", c.t, got, c.want)
		}
	}
}

// TestPlaceholdersAreWrittenInPlace: a value appended as a placeholder is
// replaced at the offset kept, and a jsonb value carries its length.
func TestPlaceholdersAreWrittenInPlace(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	when := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	b := BeginRow(nil, 3)
	b = AppendUUID(b, uuid.Nil)
	idAt := len(b) - 16
	b = AppendTime(b, time.Time{})
	timeAt := len(b) - 8
	b, at := BeginJSON(b)
	b = append(b, `{"a":1}`...)
	EndJSON(b, at)
	PutUUID(b, idAt, id)
	PutTime(b, timeAt, when)
	want := BeginRow(nil, 3)
	want = AppendUUID(want, id)
	want = AppendTime(want, when)
	want = binary.BigEndian.AppendUint32(want, 7)
	want = append(want, `{"a":1}`...)
	if !bytes.Equal(b, want) {
		t.Fatalf("row %x, want %x", b, want)
	}
}
