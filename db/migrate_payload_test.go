package db_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"anvil/db"
	"anvil/db/testdb"
)

// A database whose events were stored as jsonb keeps every one of them,
// the same JSON, when the payload becomes json and then text (migrations
// 20261207050000 and 20261207060000, docs/feed.md "The write path and its
// costs"): both are taken back on a migrated database, events are stored
// as that schema stored them, and Migrate applies them again.
func TestPayloadBecomesTextKeepingStoredEvents(t *testing.T) {
	ctx := context.Background()
	d := testdb.New(t)
	const first = "20261207050000"
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := d.SQL.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`ALTER TABLE feed_events ALTER COLUMN payload TYPE jsonb USING payload::jsonb`)
	exec(`DELETE FROM bun_migrations WHERE name IN ($1, '20261207060000')`, first)
	if applied, err := db.Applied(ctx, d); err != nil || applied >= first {
		t.Fatalf("taken back to %q (%v), want before %s", applied, err, first)
	}

	payloads := []string{
		`{"event_id":"e1","title":"NullPointerException in CheckoutService","level":"error","tags":{"tier":"gold"}}`,
		`{"z":1,"a":{"nested":[1,2.5,-3e10,true,false,null]},"text":"é \u2028 \"quoted\" \\ <tag> &amp;"}`,
		`{"big":123456789012345678901234567890,"empty":{},"list":[],"browser":{"name":"Firefox","version":"140.1"}}`,
	}
	org, project, incident := uuid.New(), uuid.New(), uuid.New()
	keys := make([]uuid.UUID, len(payloads))
	for i, p := range payloads {
		keys[i] = uuid.New()
		exec(`INSERT INTO feed_events (org_id, event_id_key, project_id, connection_id, environment, fingerprint, incident_id,
			received_at, occurred_at, payload) VALUES ($1, $2, $3, $3, 'production', 'fp', $4, now(), now(), $5::jsonb)`,
			org, keys[i], project, incident, p)
	}

	if err := db.Migrate(ctx, d); err != nil {
		t.Fatal(err)
	}
	var typ, compression string
	if err := d.SQL.QueryRowContext(ctx, `SELECT format_type(atttypid, atttypmod), attcompression::text FROM pg_attribute
		WHERE attrelid = 'feed_events'::regclass AND attname = 'payload'`).Scan(&typ, &compression); err != nil {
		t.Fatal(err)
	}
	if typ != "text" {
		t.Fatalf("payload is %s after the migrations, want text", typ)
	}
	var lz4 bool
	if err := d.SQL.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals))`).Scan(&lz4); err != nil {
		t.Fatal(err)
	}
	if lz4 && compression != "l" {
		t.Fatalf("payload's compression is %q after the migration, want lz4 ('l')", compression)
	}
	for i, p := range payloads {
		var same bool
		var level string
		if err := d.SQL.QueryRowContext(ctx, `SELECT payload::jsonb = $2::jsonb, coalesce(payload::json->>'level', '') FROM feed_events
			WHERE org_id = $1 AND event_id_key = $3`, org, p, keys[i]).Scan(&same, &level); err != nil {
			t.Fatalf("event %d after the migration: %v", i, err)
		}
		if !same {
			t.Fatalf("event %d is no longer %s", i, p)
		}
		if i == 0 && level != "error" {
			t.Fatalf("payload::json->>'level' reads %q, want error", level)
		}
	}
}
