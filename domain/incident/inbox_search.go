package incident

import (
	"strings"

	"github.com/uptrace/bun"

	"anvil/domain"
)

// The inbox's search: free text over what an incident keeps of its latest
// event — title, message, culprit function and file, tag values — or its
// short id (SHOP-12), and filters by level (the latest event's) and
// release. Each narrows the list and the status counts alike, so the
// counts say what each status tab holds under the search. The text is the
// incident's own search_text column, kept by a trigger and searched
// through a trigram index (db/migrations/20261204004000_incident_search):
// counting a search's matches over an organisation's incidents reads the
// index, not a stored event per incident.

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

// searchWhere narrows q (over incidents AS i) by the search. A query that
// reads as a short id also finds that incident (of the project with that
// slug, in the incident's own organisation).
func (f *IncidentFilter) searchWhere(q *bun.SelectQuery) *bun.SelectQuery {
	if f.Query != "" {
		pat := likePattern(f.Query)
		if slug, n, ok := ParseShortID(f.Query); ok {
			q = q.Where("(i.search_text ILIKE ? OR (i.number = ? AND i.project_id IN (SELECT p.id FROM "+domain.AllProjects+
				" p WHERE p.org_id = i.org_id AND p.slug = ?)))", pat, n, slug)
		} else {
			q = q.Where("i.search_text ILIKE ?", pat)
		}
	}
	if f.Level != "" {
		q = q.Where("i.level = ?", f.Level)
	}
	if f.Release != "" {
		q = q.Where("i.release = ?", f.Release)
	}
	return q
}
