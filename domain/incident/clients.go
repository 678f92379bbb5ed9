package incident

import (
	"context"
	"fmt"

	"github.com/google/uuid"
)

// ClientCount is one browser or operating system an incident was seen on:
// its name, the major version, and how many of the incident's
// events came from it.
type ClientCount struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Count   int64  `json:"count"`
}

// clientSample bounds the events whose browsers are counted: the newest
// ones, so a huge incident costs a bounded read (the page says "recent").
// Each stored payload read is parsed as json here (docs/feed.md, "The
// write path and its costs"), about 25 µs an event with its share of the
// page; 3,000 keep the read within about 80 ms and are plenty for a top
// ten.
const clientSample = 3000

// clients counts the browsers and the operating systems of an incident's
// newest events (event.Event's browser and os, kept since stage B), in one
// read of the sample: each stored payload (text, migration
// 20261207060000) is read as json once, for both fields.
func (in *Incidents) clients(ctx context.Context, id uuid.UUID) (browsers, oses []ClientCount, err error) {
	const q = `WITH sample AS (
			SELECT r.browser, r.os
			FROM (SELECT payload FROM feed_events WHERE incident_id = ? ORDER BY received_at DESC LIMIT ?) e,
			json_to_record(e.payload::json) AS r(browser json, os json)),
		counted AS (
			SELECT 'browser' AS kind, c->>'name' AS name, split_part(coalesce(c->>'version', ''), '.', 1) AS version, count(*) AS count
			FROM (SELECT browser AS c FROM sample) s WHERE coalesce(c->>'name', '') <> '' GROUP BY 2, 3
			UNION ALL
			SELECT 'os', c->>'name', split_part(coalesce(c->>'version', ''), '.', 1), count(*)
			FROM (SELECT os AS c FROM sample) s WHERE coalesce(c->>'name', '') <> '' GROUP BY 2, 3)
		SELECT kind, name, version, count FROM (
			SELECT *, row_number() OVER (PARTITION BY kind ORDER BY count DESC, name, version) AS rank FROM counted) ranked
		WHERE rank <= 10 ORDER BY kind, count DESC, name, version`
	var rows []struct {
		Kind string `bun:"kind"`
		ClientCount
	}
	if err := in.s.DB.NewRaw(q, id, clientSample).Scan(ctx, &rows); err != nil {
		return nil, nil, fmt.Errorf("incidents: browsers and operating systems of %s: %w", id, err)
	}
	browsers, oses = []ClientCount{}, []ClientCount{}
	for _, r := range rows {
		if r.Kind == "browser" {
			browsers = append(browsers, r.ClientCount)
		} else {
			oses = append(oses, r.ClientCount)
		}
	}
	return browsers, oses, nil
}
