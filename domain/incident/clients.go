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
const clientSample = 10000

// clients counts the browsers and the operating systems of an incident's
// newest events (event.Event's browser and os, kept since stage B).
func (in *Incidents) clients(ctx context.Context, id uuid.UUID) (browsers, oses []ClientCount, err error) {
	q := `SELECT f.value->>'name' AS name, split_part(coalesce(f.value->>'version', ''), '.', 1) AS version, count(*) AS count
		FROM (SELECT payload FROM feed_events WHERE incident_id = ? ORDER BY received_at DESC LIMIT ?) e,
		LATERAL (SELECT e.payload->? AS value) f
		WHERE coalesce(f.value->>'name', '') <> ''
		GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2 LIMIT 10`
	browsers, oses = []ClientCount{}, []ClientCount{}
	if err := in.s.DB.NewRaw(q, id, clientSample, "browser").Scan(ctx, &browsers); err != nil {
		return nil, nil, fmt.Errorf("incidents: browsers of %s: %w", id, err)
	}
	if err := in.s.DB.NewRaw(q, id, clientSample, "os").Scan(ctx, &oses); err != nil {
		return nil, nil, fmt.Errorf("incidents: operating systems of %s: %w", id, err)
	}
	return browsers, oses, nil
}
