package dbdiff_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/db/testdb"
	"anvil/internal/dbdiff"
)

func TestMain(m *testing.M) { testdb.Main(m) }

var epoch = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)

// state is one database holding two things and their events: generated
// ids, serial ids, a sequence's positions and wall-clock times that
// differ from the other database's, and what the test changes.
func state(t *testing.T, skew func(db *sql.DB)) (*sql.DB, *dbdiff.Labels) {
	t.Helper()
	ctx := context.Background()
	db := testdb.New(t).SQL
	for _, q := range []string{
		`CREATE TABLE things (id uuid PRIMARY KEY, name text NOT NULL UNIQUE, secret bytea)`,
		`CREATE TABLE events (id bigserial PRIMARY KEY, thing_id uuid NOT NULL, position bigint, at timestamptz NOT NULL,
			seen timestamptz NOT NULL DEFAULT now(), detail jsonb NOT NULL)`,
		`SELECT setval(pg_get_serial_sequence('events', 'id'), (random() * 1000)::bigint + 1)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	ids := map[string]uuid.UUID{"a": uuid.New(), "b": uuid.New()}
	for _, name := range []string{"a", "b"} {
		if _, err := db.ExecContext(ctx, `INSERT INTO things VALUES ($1, $2, decode(md5(random()::text), 'hex'))`, ids[name], name); err != nil {
			t.Fatal(err)
		}
	}
	offset := time.Now().UnixNano() % 1000 // positions: tokens whose order counts
	for i, name := range []string{"a", "b", "a"} {
		if _, err := db.ExecContext(ctx, `INSERT INTO events (thing_id, position, at, detail) VALUES ($1, $2, $3, $4)`,
			ids[name], offset+int64(10*i), epoch.Add(time.Duration(i)*time.Second),
			`{"of": "`+ids[name].String()+`", "note": "msg_`+uuid.NewString()+`"}`); err != nil {
			t.Fatal(err)
		}
	}
	if skew != nil {
		skew(db)
	}
	l := dbdiff.NewLabels()
	if err := l.AddQuery(ctx, db, "", `SELECT id::text, 'thing:' || name FROM things`); err != nil {
		t.Fatal(err)
	}
	return db, l
}

var tables = []dbdiff.Table{
	{Name: "things", Key: []string{"name"}},
	{Name: "events", Key: []string{"thing_id", "id"}, Ranks: []dbdiff.Rank{
		{Column: "id", Within: []string{"thing_id"}}, {Column: "position"}}},
}

func clockOrWall(t time.Time) string {
	if d := t.Sub(epoch); d > -time.Hour && d < time.Hour {
		return "clock" + d.String()
	}
	return "wall clock"
}

func take(t *testing.T, db *sql.DB, l *dbdiff.Labels) *dbdiff.Snapshot {
	t.Helper()
	s, err := dbdiff.Take(context.Background(), db, l, dbdiff.Options{Time: clockOrWall}, tables...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestGeneratedValuesAreNormalised(t *testing.T) {
	t.Parallel()
	a, la := state(t, nil)
	b, lb := state(t, nil)
	sa, sb := take(t, a, la), take(t, b, lb)
	if d := dbdiff.Diff(sa, sb, "a", "b"); len(d) != 0 {
		t.Fatalf("two databases alike differ: %v", d)
	}
	if n := sa.Unlabelled["events.detail"]; n != 3 {
		t.Fatalf("%d unlabelled UUIDs in events.detail, want the three message ids", n)
	}
	row := sa.Rows["events"]["thing_id=thing:a id=rank 2"]
	want := map[string]any{"thing_id": "thing:a", "id": "rank 2", "position": "rank 3", "at": "clock2s", "seen": "wall clock",
		"detail": map[string]any{"of": "thing:a", "note": "msg_" + dbdiff.Unlabelled}}
	if got, exp := show(row), show(want); got != exp {
		t.Fatalf("normalised row %s, want %s", got, exp)
	}
}

func TestDifferencesNameTableRowAndColumn(t *testing.T) {
	t.Parallel()
	a, la := state(t, nil)
	b, lb := state(t, func(db *sql.DB) {
		for _, q := range []string{
			`UPDATE events SET at = at + interval '1 second' WHERE position = (SELECT max(position) FROM events)`,
			`INSERT INTO things VALUES (gen_random_uuid(), 'c', NULL)`,
		} {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
	})
	got := dbdiff.Diff(take(t, a, la), take(t, b, lb), "a", "b")
	want := []string{
		"table things: 2 rows in a, 3 in b",
		"table events, row [thing_id=thing:a id=rank 2], column at: clock2s in a, clock3s in b",
		`table things, row [name=c]: only in b: {"id":"thing:c","name":"c","secret":null}`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("differences:\n%q\nwant\n%q", got, want)
	}
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// A text column named in Table.JSON is compared as the JSON it holds,
// labelled within; one that holds no JSON is an error, not a difference.
func TestJSONInTextIsLabelledWithin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	notes := func(body func(id uuid.UUID) string) *dbdiff.Snapshot {
		db := testdb.New(t).SQL
		id := uuid.New()
		for _, q := range []string{`CREATE TABLE notes (name text PRIMARY KEY, body text NOT NULL)`,
			`INSERT INTO notes VALUES ('n', '` + body(id) + `')`} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		l := dbdiff.NewLabels()
		l.Add("", id.String(), "thing:n")
		s, err := dbdiff.Take(ctx, db, l, dbdiff.Options{}, dbdiff.Table{Name: "notes", Key: []string{"name"},
			JSON: map[string]string{"body": "a document"}})
		if err != nil {
			return nil
		}
		return s
	}
	doc := func(id uuid.UUID) string { return `{"of":"` + id.String() + `","n":[1,2]}` }
	a, b := notes(doc), notes(doc)
	if d := dbdiff.Diff(a, b, "a", "b"); len(d) != 0 {
		t.Fatalf("two documents alike differ: %v", d)
	}
	if got, want := show(a.Rows["notes"]["name=n"]["body"]), show(map[string]any{"of": "thing:n", "n": []any{json.Number("1"), json.Number("2")}}); got != want {
		t.Fatalf("body normalised to %s, want %s", got, want)
	}
	if s := notes(func(uuid.UUID) string { return `not json` }); s != nil {
		t.Fatal("a JSON column holding no JSON was read")
	}
}
