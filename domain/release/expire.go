package release

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// expireBatch bounds one delete of Expire: each is its own short
// statement, so the feed's upserts of a project's releases never wait long.
const expireBatch = 1000

// The fix chain's tables age with the project's events (docs/releases.md,
// "Retention"): retention's clean-up calls Expire with the events' cutoff.
//
//   - a release whose last event (or, never seen, its declaration) is
//     older than the cutoff goes, unless an incident was closed in it or a
//     fix still being verified shipped in it;
//   - a cached ancestry answer older than the cutoff goes, unless its fix
//     is still being verified (a later question asks git again);
//   - a question older than the cutoff whose fix no incident has any more
//     goes unanswered.
var expireSQL = []struct{ what, sql string }{
	{"releases", `DELETE FROM releases WHERE ctid = ANY(ARRAY(SELECT r.ctid FROM releases r
		WHERE r.project_id = ?0 AND COALESCE(r.last_seen, r.declared_at, '-infinity') < ?1
			AND NOT EXISTS (SELECT 1 FROM incidents i WHERE i.project_id = ?0 AND i.closed_release = r.version)
			AND NOT EXISTS (SELECT 1 FROM incidents i WHERE i.project_id = ?0 AND i.fix_release = r.version
				AND i.fix_verified_at IS NULL AND i.fix_recurred_at IS NULL)
		LIMIT ?2))`},
	{"ancestry answers", `DELETE FROM release_ancestry WHERE ctid = ANY(ARRAY(SELECT a.ctid FROM release_ancestry a
		WHERE a.project_id = ?0 AND a.checked_at < ?1
			AND NOT EXISTS (SELECT 1 FROM incidents i WHERE i.project_id = ?0 AND i.fix_commit_sha = a.fix_sha
				AND i.fix_verified_at IS NULL AND i.fix_recurred_at IS NULL)
		LIMIT ?2))`},
	{"ancestry questions", `DELETE FROM release_ancestry_questions WHERE ctid = ANY(ARRAY(SELECT q.ctid FROM release_ancestry_questions q
		WHERE q.project_id = ?0 AND q.fix_at < ?1
			AND NOT EXISTS (SELECT 1 FROM incidents i WHERE i.project_id = ?0 AND i.fix_commit_sha = q.fix_sha)
		LIMIT ?2))`},
}

// Expire removes a project's releases and ancestry rows past cutoff, in
// bounded batches. It is retention's hook (wiring: Retention.ExpireReleases).
func (rs *Releases) Expire(ctx context.Context, projectID uuid.UUID, cutoff time.Time) error {
	for _, e := range expireSQL {
		for {
			res, err := rs.s.DB.NewRaw(e.sql, projectID, cutoff, expireBatch).Exec(ctx)
			if err != nil {
				return fmt.Errorf("releases: expire %s of %s: %w", e.what, projectID, err)
			}
			if n, _ := res.RowsAffected(); n < expireBatch {
				break
			}
		}
	}
	return nil
}
