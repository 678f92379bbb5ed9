package feed

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/db/testdb"
	"anvil/domain/event"
)

// TestCopyRowsStoreWhatTheyEncode COPYs hand-encoded rows into feed_events
// and reads every column back: the times rounded down to the microsecond
// as pgx rounds them (before 1970 and before Postgres's epoch too), the
// texts and the payload as given, the placed incident and receipt.
func TestCopyRowsStoreWhatTheyEncode(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	ctx := context.Background()
	org, project, conn, incident := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	received := time.Date(2026, 12, 2, 20, 0, 0, 123456789, time.UTC)
	times := []time.Time{
		time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(1999, 12, 31, 23, 59, 59, 500000001, time.UTC),
		time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 2, 22, 0, 0, 123456789, time.FixedZone("", 2*3600)),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
	}
	var rows []*copyRow
	var evs []event.Event
	for i, ts := range times {
		ev := event.Event{SchemaVersion: "1.0", EventID: uuid.NewString(), Timestamp: ts, Title: "é ✓ \u2028 <b>\"quoted\"</b> \\ " + string(rune('a'+i)),
			Level: "error", Environment: "prod-é", Service: "api", SDK: event.SDK{Name: "t"}}
		r, err := encodeEventRow(org, project, conn, ev.EventID, "fp-✓", &ev)
		if err != nil {
			t.Fatal(err)
		}
		r.place(incident, received)
		rows = append(rows, &r)
		evs = append(evs, ev)
	}
	c, err := d.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if _, err := c.Conn().PgConn().CopyFrom(ctx, newCopyStream(rows), copyEventsSQL); err != nil {
		t.Fatal(err)
	}
	for i, ev := range evs {
		want, _ := event.Marshal(&ev)
		var (
			gotOrg, gotProject, gotConn, gotIncident uuid.UUID
			key, env, fp                             string
			occurred, recv                           time.Time
			samePayload                              bool
		)
		err := c.Conn().QueryRow(ctx, `SELECT org_id, project_id, connection_id, incident_id, event_id_key, environment, fingerprint,
			occurred_at, received_at, payload = $2 AND payload::jsonb IS NOT NULL FROM feed_events WHERE event_id_key = $1`, ev.EventID, string(want)).
			Scan(&gotOrg, &gotProject, &gotConn, &gotIncident, &key, &env, &fp, &occurred, &recv, &samePayload)
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		if gotOrg != org || gotProject != project || gotConn != conn || gotIncident != incident || key != ev.EventID || env != "prod-é" || fp != "fp-✓" {
			t.Fatalf("row %d: ids or texts differ: %v %v %v %v %q %q %q", i, gotOrg, gotProject, gotConn, gotIncident, key, env, fp)
		}
		if !occurred.Equal(times[i].Truncate(time.Microsecond)) || !recv.Equal(received.Truncate(time.Microsecond)) {
			t.Fatalf("row %d: occurred %v received %v; want %v and %v", i, occurred, recv, times[i].Truncate(time.Microsecond), received.Truncate(time.Microsecond))
		}
		if !samePayload {
			t.Fatalf("row %d: the stored payload is not, byte for byte, %s", i, want)
		}
	}
}
