// Package dbdiff compares the state of two databases row by row: the
// differential tests run the same inputs through a fast path and its slow
// twin, each in a database of its own, and require the same rows
// (docs/architecture.md, "Fast paths and their slow twins").
//
// Values that legitimately differ between the two databases are normalised
// before they are compared, and only those: a generated UUID becomes the
// label of what it names (its natural key, through Labels); a generated
// integer id becomes its rank or a label; a timestamp becomes what the
// caller's Options.Time makes of it; a bytea value its presence. Every
// other value is compared exactly. A difference names its table, its row
// (by the table's key) and its column.
//
// It imports nothing of anvil, so the tests of any package may use it.
package dbdiff

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Table says how the rows of one table are named and normalised.
type Table struct {
	Name string
	// Key are the columns that name a row, compared after normalisation:
	// a natural key (no two rows may share it).
	Key []string
	// Ranks replace generated, ordered values (bigserial ids, positions
	// drawn from a sequence) by their rank.
	Ranks []Rank
	// Refs label the values of non-UUID columns (a River job id, say):
	// column → the Labels namespace of its values.
	Refs map[string]string
	// Skip names the columns not compared, each with the reason why.
	Skip map[string]string
	// JSON names the text columns that hold JSON, each with why it is
	// text: their values are compared as the JSON they hold, labelled
	// within, as a json column's are.
	JSON map[string]string
	// Where, when set, limits the rows read and counted (an SQL condition
	// on the table's alias t), for rows whose number depends on the wall
	// clock rather than on the path under test.
	Where string
}

// Rank replaces Column by its rank (1, 2, …) in ascending order among the
// rows that agree on the Within columns (after normalisation); equal
// values share a rank and NULL stays NULL. Column holds integers or
// timestamps.
type Rank struct {
	Column string
	Within []string
}

// Labels names values by what they stand for. Namespace "" holds whole
// strings found anywhere (a UUID, an event id, a derived hash); the UUIDs
// inside a longer string are replaced as well. Other namespaces serve
// Table.Refs.
type Labels struct {
	byNS map[string]map[string]string
}

// NewLabels returns an empty set of labels.
func NewLabels() *Labels { return &Labels{byNS: map[string]map[string]string{}} }

// Add labels raw in namespace ns (exactly: a UUID spelled upper-case is
// another value, as an event id spelled so is stored as spelled).
func (l *Labels) Add(ns, raw, label string) {
	m := l.byNS[ns]
	if m == nil {
		m = map[string]string{}
		l.byNS[ns] = m
	}
	m[raw] = label
}

// AddQuery labels in namespace ns the rows of query, each (raw, label).
func (l *Labels) AddQuery(ctx context.Context, db *sql.DB, ns, query string, args ...any) error {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("dbdiff: labels: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var raw, label string
		if err := rows.Scan(&raw, &label); err != nil {
			return fmt.Errorf("dbdiff: labels: %w", err)
		}
		l.Add(ns, raw, label)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dbdiff: labels: %w", err)
	}
	return nil
}

// Label returns the label of raw in ns.
func (l *Labels) Label(ns, raw string) (string, bool) {
	v, ok := l.byNS[ns][raw]
	return v, ok
}

var uuidRE = regexp.MustCompile(`(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// Unlabelled stands for a UUID no label names (a random message id).
const Unlabelled = "<unlabelled uuid>"

// String normalises s: its label, or s with the UUIDs inside it labelled.
// unlabelled counts the UUIDs no label names.
func (l *Labels) String(s string, unlabelled *int) string {
	if v, ok := l.Label("", s); ok {
		return v
	}
	return uuidRE.ReplaceAllStringFunc(s, func(u string) string {
		if v, ok := l.Label("", u); ok {
			return v
		}
		*unlabelled++
		return Unlabelled
	})
}

// Value normalises a decoded JSON value: its strings, deeply.
func (l *Labels) Value(v any, unlabelled *int) any {
	switch x := v.(type) {
	case string:
		return l.String(x, unlabelled)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = l.Value(e, unlabelled)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[l.String(k, unlabelled)] = l.Value(e, unlabelled)
		}
		return out
	}
	return v
}

// Options say how the values that are compared by kind are normalised.
type Options struct {
	// Time normalises a timestamp (nil: compared exactly).
	Time func(time.Time) string
}

// Snapshot is the normalised state of a database.
type Snapshot struct {
	// Rows are the rows of each Table, by key.
	Rows map[string]map[string]map[string]any
	// Counts is the number of rows of every table of the schema, those
	// compared row by row and all the others.
	Counts map[string]int64
	// Unlabelled counts the UUIDs no label named, per "table.column".
	Unlabelled map[string]int
}

type column struct{ dataType, udt string }

// Take reads the tables of db's current schema: every row of each Table,
// normalised, and the row count of every table.
func Take(ctx context.Context, db *sql.DB, labels *Labels, opt Options, tables ...Table) (*Snapshot, error) {
	s := &Snapshot{Rows: map[string]map[string]map[string]any{}, Counts: map[string]int64{}, Unlabelled: map[string]int{}}
	names, err := strs(ctx, db, `SELECT table_name::text FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1`)
	if err != nil {
		return nil, err
	}
	cond := map[string]string{}
	for _, t := range tables {
		if t.Where != "" {
			cond[t.Name] = ` WHERE ` + t.Where
		}
	}
	for _, n := range names {
		var c int64
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM `+quoteIdent(n)+` t`+cond[n]).Scan(&c); err != nil {
			return nil, fmt.Errorf("dbdiff: count %s: %w", n, err)
		}
		s.Counts[n] = c
	}
	for _, t := range tables {
		rows, err := s.read(ctx, db, labels, opt, t)
		if err != nil {
			return nil, err
		}
		s.Rows[t.Name] = rows
	}
	return s, nil
}

func strs(ctx context.Context, db *sql.DB, q string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("dbdiff: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("dbdiff: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// read reads and normalises the rows of one table.
func (s *Snapshot) read(ctx context.Context, db *sql.DB, labels *Labels, opt Options, t Table) (map[string]map[string]any, error) {
	cols := map[string]column{}
	rows, err := db.QueryContext(ctx, `SELECT column_name::text, data_type::text, udt_name::text FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = $1`, t.Name)
	if err != nil {
		return nil, fmt.Errorf("dbdiff: columns of %s: %w", t.Name, err)
	}
	for rows.Next() {
		var n string
		var c column
		if err := rows.Scan(&n, &c.dataType, &c.udt); err != nil {
			rows.Close()
			return nil, fmt.Errorf("dbdiff: columns of %s: %w", t.Name, err)
		}
		cols[n] = c
	}
	rows.Close()
	if len(cols) == 0 {
		return nil, fmt.Errorf("dbdiff: no table %s", t.Name)
	}
	for _, c := range t.Key {
		if _, ok := cols[c]; !ok {
			return nil, fmt.Errorf("dbdiff: %s has no key column %s", t.Name, c)
		}
	}
	raws, err := strs(ctx, db, `SELECT to_jsonb(t)::text FROM `+quoteIdent(t.Name)+` t`+where(t))
	if err != nil {
		return nil, fmt.Errorf("dbdiff: read %s: %w", t.Name, err)
	}
	ranked := map[string]bool{}
	for _, r := range t.Ranks {
		ranked[r.Column] = true
	}
	type pair struct{ raw, norm map[string]any }
	all := make([]pair, 0, len(raws))
	for _, text := range raws {
		dec := json.NewDecoder(strings.NewReader(text))
		dec.UseNumber()
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("dbdiff: decode a row of %s: %w", t.Name, err)
		}
		norm := make(map[string]any, len(raw))
		for name, v := range raw {
			if _, skip := t.Skip[name]; skip || ranked[name] {
				continue
			}
			if text, ok := v.(string); ok {
				if _, isJSON := t.JSON[name]; isJSON {
					dec := json.NewDecoder(strings.NewReader(text))
					dec.UseNumber()
					if err := dec.Decode(&v); err != nil {
						return nil, fmt.Errorf("dbdiff: %s.%s holds no JSON: %w", t.Name, name, err)
					}
				}
			}
			n := 0
			norm[name] = normalise(v, cols[name], t.Refs[name], labels, opt, &n)
			if n > 0 {
				s.Unlabelled[t.Name+"."+name] += n
			}
		}
		all = append(all, pair{raw, norm})
	}
	for _, r := range t.Ranks {
		groups := map[string][]int{}
		for i, p := range all {
			groups[keyOf(p.norm, r.Within)] = append(groups[keyOf(p.norm, r.Within)], i)
		}
		for _, idx := range groups {
			var vals []sortable
			for _, i := range idx {
				v, err := sortValue(all[i].raw[r.Column])
				if err != nil {
					return nil, fmt.Errorf("dbdiff: rank %s.%s: %w", t.Name, r.Column, err)
				}
				vals = append(vals, v)
			}
			// Dense ranks: equal values share one.
			var distinct []sortable
			for _, v := range vals {
				if !v.null {
					distinct = append(distinct, v)
				}
			}
			sort.Slice(distinct, func(a, b int) bool { return distinct[a].less(distinct[b]) })
			distinct = slices.CompactFunc(distinct, func(a, b sortable) bool { return !a.less(b) && !b.less(a) })
			for j, i := range idx {
				if vals[j].null {
					all[i].norm[r.Column] = nil
					continue
				}
				rank := sort.Search(len(distinct), func(k int) bool { return !distinct[k].less(vals[j]) })
				all[i].norm[r.Column] = fmt.Sprintf("rank %d", rank+1)
			}
		}
	}
	out := make(map[string]map[string]any, len(all))
	for _, p := range all {
		k := keyOf(p.norm, t.Key)
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("dbdiff: two rows of %s have the key %s", t.Name, k)
		}
		out[k] = p.norm
	}
	return out, nil
}

// normalise makes one value comparable, by its column's type.
func normalise(v any, c column, ref string, labels *Labels, opt Options, unlabelled *int) any {
	if v == nil {
		return nil
	}
	if ref != "" {
		raw := fmt.Sprint(v)
		if l, ok := labels.Label(ref, raw); ok {
			return l
		}
		return "<unlabelled " + ref + ">"
	}
	if arr, ok := v.([]any); ok && strings.HasPrefix(c.udt, "_") {
		out := make([]any, len(arr))
		elem := column{dataType: c.dataType, udt: strings.TrimPrefix(c.udt, "_")}
		for i, e := range arr {
			out[i] = normalise(e, elem, "", labels, opt, unlabelled)
		}
		return out
	}
	switch c.udt {
	case "bytea":
		return "<bytes>"
	case "timestamptz", "timestamp":
		str, _ := v.(string)
		ts, err := time.Parse(time.RFC3339Nano, str)
		if err != nil {
			ts, err = time.Parse("2006-01-02T15:04:05.999999999", str)
		}
		if err != nil || opt.Time == nil {
			return v
		}
		return opt.Time(ts)
	}
	return labels.Value(v, unlabelled)
}

// sortable is a value of a ranked column.
type sortable struct {
	null bool
	n    int64
	t    time.Time
}

func (a sortable) less(b sortable) bool {
	switch {
	case a.null || b.null:
		return !a.null && b.null
	case !a.t.IsZero() || !b.t.IsZero():
		return a.t.Before(b.t)
	}
	return a.n < b.n
}

func sortValue(v any) (sortable, error) {
	switch x := v.(type) {
	case nil:
		return sortable{null: true}, nil
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		return sortable{n: n}, err
	case string:
		t, err := time.Parse(time.RFC3339Nano, x)
		return sortable{t: t}, err
	}
	return sortable{}, fmt.Errorf("cannot rank %v (%T)", v, v)
}

// keyOf names a row by the normalised values of cols.
func keyOf(row map[string]any, cols []string) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = c + "=" + show(row[c])
	}
	return strings.Join(parts, " ")
}

// show is a value as a difference prints it.
func show(v any) string {
	if v == nil {
		return "NULL"
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Diff lists every difference between a and b (named nameA and nameB):
// row counts of any table, rows of a compared table that only one holds,
// and each column that differs in a row both hold — table, row, column.
func Diff(a, b *Snapshot, nameA, nameB string) []string {
	var out []string
	tables := map[string]bool{}
	for n := range a.Counts {
		tables[n] = true
	}
	for n := range b.Counts {
		tables[n] = true
	}
	for _, n := range sortedKeys(tables) {
		ca, okA := a.Counts[n]
		cb, okB := b.Counts[n]
		if !okA || !okB || ca != cb {
			out = append(out, fmt.Sprintf("table %s: %d rows in %s, %d in %s", n, ca, nameA, cb, nameB))
		}
	}
	names := map[string]bool{}
	for n := range a.Rows {
		names[n] = true
	}
	for n := range b.Rows {
		names[n] = true
	}
	for _, n := range sortedKeys(names) {
		ra, rb := a.Rows[n], b.Rows[n]
		keys := map[string]bool{}
		for k := range ra {
			keys[k] = true
		}
		for k := range rb {
			keys[k] = true
		}
		for _, k := range sortedKeys(keys) {
			rowA, okA := ra[k]
			rowB, okB := rb[k]
			switch {
			case !okA:
				out = append(out, fmt.Sprintf("table %s, row [%s]: only in %s: %s", n, k, nameB, show(rowB)))
				continue
			case !okB:
				out = append(out, fmt.Sprintf("table %s, row [%s]: only in %s: %s", n, k, nameA, show(rowA)))
				continue
			}
			cols := map[string]bool{}
			for c := range rowA {
				cols[c] = true
			}
			for c := range rowB {
				cols[c] = true
			}
			for _, c := range sortedKeys(cols) {
				if va, vb := show(rowA[c]), show(rowB[c]); va != vb {
					out = append(out, fmt.Sprintf("table %s, row [%s], column %s: %s in %s, %s in %s", n, k, c, va, nameA, vb, nameB))
				}
			}
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// where is t's row condition as an SQL clause, or nothing.
func where(t Table) string {
	if t.Where == "" {
		return ""
	}
	return ` WHERE ` + t.Where
}
