package incident

import (
	"strings"

	"github.com/uptrace/bun"

	"anvil/domain"
)

// The inbox's search: free text over incidents' titles and
// their latest event's message, and filters by level (the latest event's)
// and release. Each narrows the list and the status counts alike, so the
// counts say what each status tab holds under the search.

var searchLevels = []string{"debug", "info", "warning", "error", "fatal"}

// normalizeSearch validates the search's filters; a bad one is a 422
// naming it.
func (f *IncidentFilter) normalizeSearch() error {
	f.Query = strings.TrimSpace(f.Query)
	if len(f.Query) > 200 {
		return domain.Invalid("invalid_query", "q must be at most 200 characters")
	}
	f.Level = strings.ToLower(strings.TrimSpace(f.Level))
	if f.Level != "" && !contains(searchLevels, f.Level) {
		return domain.Invalid("invalid_level", "level must be one of %s", strings.Join(searchLevels, ", "))
	}
	f.Release = strings.TrimSpace(f.Release)
	if len(f.Release) > 200 {
		return domain.Invalid("invalid_release", "release must be at most 200 characters")
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// likePattern is s as a literal ILIKE substring pattern.
func likePattern(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(s) + "%"
}

// latestEvent is the incident's latest stored event, found by the dedupe
// key (one index probe per incident).
const latestEvent = `SELECT e.payload FROM feed_events e WHERE e.org_id = i.org_id AND e.event_id_key = lower(i.latest_event_id)`

// searchWhere narrows q (over incidents AS i) by the search.
func (f *IncidentFilter) searchWhere(q *bun.SelectQuery) *bun.SelectQuery {
	if f.Query != "" {
		pat := likePattern(f.Query)
		q = q.Where("(i.title ILIKE ? OR EXISTS (SELECT 1 FROM ("+latestEvent+") le WHERE le.payload->'exception'->>'message' ILIKE ?))", pat, pat)
	}
	if f.Level != "" {
		q = q.Where("EXISTS (SELECT 1 FROM ("+latestEvent+") le WHERE le.payload->>'level' = ?)", f.Level)
	}
	if f.Release != "" {
		q = q.Where("i.release = ?", f.Release)
	}
	return q
}
