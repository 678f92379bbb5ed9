package release

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"anvil/domain"
	"anvil/domain/incident"
)

// The fix check (docs/releases.md, "Shipped", "Proven", "Regressions that
// know releases") runs at least once a minute as a River job. Each pass:
//
//  1. shipped: for every fix not yet shipped, the releases of its
//     incident's environment whose commit contains it (the ancestry cache;
//     an open question enqueues the project's check_ancestry job) — the
//     one that served events first ships it;
//  2. judged: the new events of incidents with a fix (or a release-aware
//     close), by the release they came from: one that contains the fix is
//     a recurrence; one that does not is counted ("seen in R, before the
//     fix"); one not yet known waits for its answer;
//  3. proven: windows that ended with no recurrence close their incident
//     when a release with the fix served events in them, and say that they
//     wait otherwise.
//
// Everything is read in a few set queries; only incidents that change are
// written, each under its project's lock.

// fixRow is an incident with a fix, as the check reads it.
type fixRow struct {
	ID          uuid.UUID  `bun:"id"`
	ProjectID   uuid.UUID  `bun:"project_id"`
	Environment string     `bun:"environment"`
	Status      string     `bun:"status"`
	Commit      string     `bun:"fix_commit_sha"`
	PRNumber    int        `bun:"fix_pr_number"`
	MergedAt    *time.Time `bun:"fix_merged_at"`
	Release     string     `bun:"fix_release"`
	ShippedAt   *time.Time `bun:"fix_shipped_at"`
	VerifyUntil *time.Time `bun:"fix_verify_until"`
	Base        int64      `bun:"fix_release_base"`
	Closed      string     `bun:"closed_release"`
	ClosedAt    *time.Time `bun:"closed_first_seen"`
	// ClosedTrusted: the release it was closed in was declared or seen
	// from a server; one seen from browsers only guards nothing.
	ClosedTrusted bool  `bun:"closed_trusted"`
	Window        int64 `bun:"window"`
	// Done: verified or recurred already; only its new events are judged.
	Done bool `bun:"done"`
}

// relRow is a seen release with its commit.
type relRow struct {
	ProjectID   uuid.UUID `bun:"project_id"`
	Environment string    `bun:"environment"`
	Version     string    `bun:"version"`
	Declared    *string   `bun:"commit_sha"`
	FirstSeen   time.Time `bun:"first_seen"`
	LastSeen    time.Time `bun:"last_seen"`
	Events      int64     `bun:"event_count"`
	Source      string    `bun:"source"`
	// ShipAt is when the release may first ship a fix in its environment:
	// its first event from a server connection, or a declaration for this
	// environment (its deploy time, else when it was declared). A browser
	// key's events never set it, nor does a declaration for every
	// environment alone (docs/releases.md, "Sources and trust").
	ShipAt *time.Time `bun:"ship_at"`
	// Served is its events from server connections: what a proof counts.
	Served int64 `bun:"server_event_count"`
}

// shipAtSQL is when a release row r (with a, its declaration for every
// environment) may ship a fix: relRow.ShipAt. LEAST skips NULLs.
const shipAtSQL = `LEAST(r.server_first_seen, CASE WHEN r.declared_by <> '' THEN COALESCE(r.deployed_at, r.declared_at) END)`

// trusted: the release may ship the fix and prove it (docs/releases.md,
// "Sources and trust").
func (r relRow) trusted() bool { return trusted(r.Source) }

func (r relRow) commit() string {
	if r.Declared != nil && *r.Declared != "" {
		return *r.Declared
	}
	c, _ := CommitOf(r.Version)
	return c
}

type relKey struct {
	project uuid.UUID
	env     string
	version string
}

type ancKey struct {
	project  uuid.UUID
	fix, rel string
}

// MaxCandidates is how many releases of an environment, the latest first
// seen, a pass considers for shipping and proving a fix: a project that
// names a release per build must not make every pass ask git about its
// whole history.
const MaxCandidates = 50

// MaxQuestions is how many ancestry questions one check_ancestry run
// answers, oldest fix first; the rest wait for the next run.
const MaxQuestions = 200

// unknownTTL is how long an "unknown" ancestry answer stands.
const unknownTTL = time.Hour

// CheckResult counts what one pass did (for logs and the bench).
type CheckResult struct {
	Watched, Shipped, Recurred, Judged, Verified, Waiting, Questions int
}

// Check runs one pass of the fix check at the store's now.
func (f *Fixes) Check(ctx context.Context) (CheckResult, error) {
	var res CheckResult
	now := f.s.Now()
	var fixes []fixRow
	err := f.s.DB.NewRaw(`SELECT i.id, i.project_id, i.environment, i.status, i.fix_commit_sha, i.fix_pr_number, i.fix_merged_at,
			i.fix_release, i.fix_shipped_at, i.fix_verify_until, i.fix_release_base, i.closed_release, cr.first_seen AS closed_first_seen,
			(cr.declared_by <> '' OR cr.seen_server OR EXISTS (SELECT 1 FROM releases ca WHERE ca.project_id = i.project_id
				AND ca.environment = '' AND ca.version = i.closed_release AND ca.declared_by <> '')) IS TRUE AS closed_trusted,
			p.fix_verification_window AS window, false AS done
		FROM incidents i JOIN `+domain.LiveProjects+` p ON p.id = i.project_id
		LEFT JOIN releases cr ON cr.project_id = i.project_id AND cr.environment = i.environment AND cr.version = i.closed_release
		WHERE (i.fix_commit_sha <> '' OR i.closed_release <> '') AND i.status <> 'IGNORED'
			AND i.fix_verified_at IS NULL AND i.fix_recurred_at IS NULL
		UNION ALL
		SELECT i.id, i.project_id, i.environment, i.status, i.fix_commit_sha, i.fix_pr_number, i.fix_merged_at,
			i.fix_release, i.fix_shipped_at, i.fix_verify_until, i.fix_release_base, i.closed_release, NULL, false, p.fix_verification_window, true
		FROM incidents i JOIN `+domain.LiveProjects+` p ON p.id = i.project_id
		WHERE i.fix_commit_sha <> '' AND i.status = 'CLOSED' AND (i.fix_verified_at IS NOT NULL OR i.fix_recurred_at IS NOT NULL)
			AND i.last_seen > COALESCE(i.fix_judged_at, '-infinity')`).Scan(ctx, &fixes)
	if err != nil {
		return res, fmt.Errorf("fix check: incidents: %w", err)
	}
	res.Watched = len(fixes)
	if len(fixes) == 0 {
		return res, nil
	}
	projects := map[uuid.UUID]bool{}
	for _, r := range fixes {
		projects[r.ProjectID] = true
	}
	ids := make([]uuid.UUID, 0, len(projects))
	for id := range projects {
		ids = append(ids, id)
	}
	// The candidates: each environment's latest trusted releases that
	// served events. A release seen from browsers only is not one, however
	// many there are (docs/releases.md, "Sources and trust").
	var rels []relRow
	if err := f.s.DB.NewRaw(`SELECT project_id, environment, version, commit_sha, first_seen, last_seen, event_count, source, ship_at, server_event_count FROM (
			SELECT r.project_id, r.environment, r.version, COALESCE(r.commit_sha, a.commit_sha) AS commit_sha,
				COALESCE(r.first_seen, `+shipAtSQL+`) AS first_seen, COALESCE(r.last_seen, `+shipAtSQL+`) AS last_seen,
				r.event_count, `+sourceSQL+` AS source, `+shipAtSQL+` AS ship_at, r.server_event_count,
				row_number() OVER (PARTITION BY r.project_id, r.environment ORDER BY COALESCE(r.first_seen, `+shipAtSQL+`) DESC, r.version) AS n
			FROM releases r LEFT JOIN releases a ON a.project_id = r.project_id AND a.environment = '' AND a.version = r.version
			WHERE r.project_id IN (?) AND r.environment <> '' AND COALESCE(r.first_seen, `+shipAtSQL+`) IS NOT NULL
				AND (r.declared_by <> '' OR r.seen_server OR COALESCE(a.declared_by, '') <> '')) c
		WHERE n <= ?`, bun.List(ids), MaxCandidates).Scan(ctx, &rels); err != nil {
		return res, fmt.Errorf("fix check: releases: %w", err)
	}
	byEnv := map[[2]any][]relRow{}
	relBy := map[relKey]relRow{}
	for _, r := range rels {
		k := [2]any{r.ProjectID, r.Environment}
		byEnv[k] = append(byEnv[k], r)
		relBy[relKey{r.ProjectID, r.Environment, r.Version}] = r
	}
	var anc []struct {
		ProjectID uuid.UUID `bun:"project_id"`
		Fix       string    `bun:"fix_sha"`
		Rel       string    `bun:"release_sha"`
		Answer    string    `bun:"answer"`
	}
	// An "unknown" (a commit the mirror lacked after its fetch) is asked
	// again after unknownTTL: the commit may have been pushed since.
	if err := f.s.DB.NewRaw(`SELECT project_id, fix_sha, release_sha, answer FROM release_ancestry
		WHERE project_id IN (?) AND (answer <> 'unknown' OR checked_at > ?)`, bun.List(ids), now.Add(-unknownTTL)).Scan(ctx, &anc); err != nil {
		return res, fmt.Errorf("fix check: ancestry: %w", err)
	}
	answers := map[ancKey]string{}
	for _, a := range anc {
		answers[ancKey{a.ProjectID, a.Fix, a.Rel}] = a.Answer
	}
	// The questions the cache cannot answer are gathered and asked in one
	// statement at the end of the pass, each with its fix's time so that
	// the oldest fix is answered first.
	fixAt := map[string]time.Time{}
	for _, r := range fixes {
		if r.MergedAt != nil && r.Commit != "" {
			fixAt[r.Commit] = *r.MergedAt
		}
	}
	questions := map[ancKey]time.Time{}
	contains := func(project uuid.UUID, fix string, r relRow) string {
		c := r.commit()
		if c == "" || !r.trusted() {
			return ""
		}
		a, ok := answers[ancKey{project, fix, c}]
		if !ok {
			at, known := fixAt[fix]
			if !known {
				at = now
			}
			questions[ancKey{project, fix, c}] = at
			return "?"
		}
		return a
	}

	// 1. shipped
	for i := range fixes {
		r := &fixes[i]
		if r.Done || r.Commit == "" || r.ShippedAt != nil {
			continue
		}
		// Only a release a server connection sent events from, or one
		// declared for this environment, ships: the first of those.
		var cands []relRow
		for _, c := range byEnv[[2]any{r.ProjectID, r.Environment}] {
			if c.ShipAt != nil {
				cands = append(cands, c)
			}
		}
		sort.Slice(cands, func(a, b int) bool { return cands[a].ShipAt.Before(*cands[b].ShipAt) })
		for _, c := range cands {
			if contains(r.ProjectID, r.Commit, c) != "yes" {
				continue
			}
			at := *c.ShipAt
			if r.MergedAt != nil && r.MergedAt.After(at) {
				at = *r.MergedAt
			}
			// The base is the server events served until now: the proof
			// counts those served after.
			if err := f.incidents.FixShipped(ctx, r.ID, r.Commit, c.Version, SourceWords(c.Source), at, windowOf(r.Window), c.Served); err != nil {
				return res, err
			}
			r.Release, r.ShippedAt, r.Base = c.Version, &at, c.Served
			until := at.Add(windowOf(r.Window))
			r.VerifyUntil = &until
			res.Shipped++
			break
		}
	}

	// 2. judged: new events of the watched incidents, by release.
	if err := f.judge(ctx, fixes, relBy, contains, &res); err != nil {
		return res, err
	}

	// 3. proven
	for _, r := range fixes {
		if r.Done || r.ShippedAt == nil || r.VerifyUntil == nil || now.Before(*r.VerifyUntil) {
			continue
		}
		var served int64
		var withFix []string
		for _, c := range byEnv[[2]any{r.ProjectID, r.Environment}] {
			if c.LastSeen.Before(*r.ShippedAt) || contains(r.ProjectID, r.Commit, c) != "yes" {
				continue
			}
			withFix = append(withFix, c.Version+" ("+SourceWords(c.Source)+")")
			// Served events are a server connection's: a browser key's
			// prove nothing, being anyone's.
			n := c.Served
			if c.Version == r.Release {
				n -= r.Base
			}
			served += n
		}
		if served <= 0 {
			res.Waiting++
			why := fmt.Sprintf("the window ended, but no release with the fix from %s has served events since %s: waiting for traffic",
				incident.FixRef(r.PRNumber, r.Commit), r.ShippedAt.UTC().Format(time.RFC3339))
			if err := f.incidents.FixWaiting(ctx, r.ID, r.Commit, why); err != nil {
				return res, err
			}
			continue
		}
		sort.Strings(withFix)
		evidence := fmt.Sprintf("fix verified: the fix from %s (%s) shipped in %s at %s; no event of this incident from %v during the %s window until %s, while they served %d events",
			incident.FixRef(r.PRNumber, r.Commit), short(r.Commit), r.Release, r.ShippedAt.UTC().Format(time.RFC3339), withFix,
			domain.FormatWindow(windowOf(r.Window)), r.VerifyUntil.UTC().Format(time.RFC3339), served)
		if err := f.incidents.FixVerified(ctx, r.ID, r.Commit, evidence); err != nil {
			return res, err
		}
		res.Verified++
	}
	return res, f.ask(ctx, questions, &res)
}

// ask stores a pass's open questions in one statement and asks each of
// their projects' check_ancestry jobs to answer them (unique per project).
func (f *Fixes) ask(ctx context.Context, questions map[ancKey]time.Time, res *CheckResult) error {
	if len(questions) == 0 {
		return nil
	}
	var projects, fixes, rels []string
	var ats []time.Time
	ask := map[uuid.UUID]bool{}
	for k, at := range questions {
		projects, fixes, rels, ats = append(projects, k.project.String()), append(fixes, k.fix), append(rels, k.rel), append(ats, at)
		ask[k.project] = true
	}
	return f.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewRaw(`INSERT INTO release_ancestry_questions (project_id, fix_sha, release_sha, fix_at)
			SELECT * FROM unnest(?::uuid[], ?::text[], ?::text[], ?::timestamptz[]) ON CONFLICT DO NOTHING`,
			pgdialect.Array(projects), pgdialect.Array(fixes), pgdialect.Array(rels), pgdialect.Array(ats)).Exec(ctx); err != nil {
			return fmt.Errorf("fix check: ask: %w", err)
		}
		for project := range ask {
			res.Questions++
			if err := f.s.InsertJob(ctx, tx, domain.CheckAncestryArgs{ProjectID: project}); err != nil {
				return err
			}
		}
		return nil
	})
}

func windowOf(secs int64) time.Duration {
	if secs < 60 {
		return 24 * time.Hour
	}
	return time.Duration(secs) * time.Second
}

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

// judge reads the new events of the watched incidents and decides each
// release's: recurrence, before the fix, or not yet known.
func (f *Fixes) judge(ctx context.Context, fixes []fixRow, relBy map[relKey]relRow, contains func(uuid.UUID, string, relRow) string, res *CheckResult) error {
	byID := map[uuid.UUID]*fixRow{}
	ids := make([]uuid.UUID, 0, len(fixes))
	for i := range fixes {
		byID[fixes[i].ID] = &fixes[i]
		ids = append(ids, fixes[i].ID)
	}
	var evs []struct {
		Incident uuid.UUID `bun:"incident_id"`
		Release  string    `bun:"release"`
		N        int64     `bun:"n"`
		Last     time.Time `bun:"last"`
	}
	// Events since the watermark (or, the first time, since the fix was
	// merged or the incident closed in its release).
	if err := f.s.DB.NewRaw(`SELECT e.incident_id, COALESCE(e.payload::json->>'release', '') AS release, count(*) AS n, max(e.received_at) AS last
		FROM incidents i JOIN feed_events e ON e.incident_id = i.id
			AND e.received_at > COALESCE(i.fix_judged_at, i.fix_merged_at, '-infinity')
		WHERE i.id IN (?) AND i.last_seen > COALESCE(i.fix_judged_at, i.fix_merged_at, '-infinity')
		GROUP BY 1, 2 ORDER BY 1, 4`, bun.List(ids)).Scan(ctx, &evs); err != nil {
		return fmt.Errorf("fix check: events: %w", err)
	}
	// The releases the events name that are not candidates (older ones,
	// or seen from browsers only) are read too, once: they are judged by
	// their first event, never by a commit they claim.
	var missing [3][]string
	for _, e := range evs {
		r := byID[e.Incident]
		if _, ok := relBy[relKey{r.ProjectID, r.Environment, e.Release}]; !ok && e.Release != "" {
			missing[0], missing[1], missing[2] = append(missing[0], r.ProjectID.String()), append(missing[1], r.Environment), append(missing[2], e.Release)
		}
	}
	if len(missing[0]) > 0 {
		var more []relRow
		if err := f.s.DB.NewRaw(`SELECT r.project_id, r.environment, r.version, COALESCE(r.commit_sha, a.commit_sha) AS commit_sha,
				r.first_seen, r.last_seen, r.event_count, `+sourceSQL+` AS source
			FROM unnest(?::uuid[], ?::text[], ?::text[]) AS u(p, e, v)
			JOIN releases r ON r.project_id = u.p AND r.environment = u.e AND r.version = u.v AND r.first_seen IS NOT NULL
			LEFT JOIN releases a ON a.project_id = r.project_id AND a.environment = '' AND a.version = r.version`,
			pgdialect.Array(missing[0]), pgdialect.Array(missing[1]), pgdialect.Array(missing[2])).Scan(ctx, &more); err != nil {
			return fmt.Errorf("fix check: releases of events: %w", err)
		}
		all := make(map[relKey]relRow, len(relBy)+len(more))
		for k, v := range relBy {
			all[k] = v
		}
		for _, r := range more {
			all[relKey{r.ProjectID, r.Environment, r.Version}] = r
		}
		relBy = all
	}
	for i := 0; i < len(evs); {
		r := byID[evs[i].Incident]
		j := i
		for j < len(evs) && evs[j].Incident == evs[i].Incident {
			j++
		}
		if err := f.judgeOne(ctx, r, evs[i:j], relBy, contains, res); err != nil {
			return err
		}
		i = j
	}
	return nil
}

func (f *Fixes) judgeOne(ctx context.Context, r *fixRow, evs []struct {
	Incident uuid.UUID `bun:"incident_id"`
	Release  string    `bun:"release"`
	N        int64     `bun:"n"`
	Last     time.Time `bun:"last"`
}, relBy map[relKey]relRow, contains func(uuid.UUID, string, relRow) string, res *CheckResult) error {
	var judged time.Time
	for _, e := range evs {
		rel, seen := relBy[relKey{r.ProjectID, r.Environment, e.Release}]
		verdict := "old"
		switch {
		case r.Commit != "" && seen && rel.trusted() && rel.commit() != "":
			switch contains(r.ProjectID, r.Commit, rel) {
			case "yes":
				verdict = "recurred"
			case "?":
				verdict = "wait"
			}
		case r.Commit != "" && seen:
			// A release without a commit, or one seen from browsers only
			// (its commit is anyone's claim): ordered by first seen against
			// the fix's shipping (or its merge).
			ref := r.ShippedAt
			if ref == nil {
				ref = r.MergedAt
			}
			if ref != nil && !rel.FirstSeen.Before(*ref) {
				verdict = "recurred"
			}
		case r.Commit == "" && r.Closed != "":
			// Closed in the current release: older releases do not reopen.
			// A release seen from browsers only is no current release: it
			// guards nothing.
			if !seen || !r.ClosedTrusted || r.ClosedAt == nil || !rel.FirstSeen.Before(*r.ClosedAt) {
				verdict = "recurred"
			}
		case r.Commit == "":
			verdict = "recurred"
		}
		// An event without a known release on a fixed incident proves
		// nothing either way: it is counted as before the fix, never a guess.
		switch verdict {
		case "wait":
			return nil // judged up to here; the answer comes with the next pass
		case "recurred":
			reason := fmt.Sprintf("recurred in %s, which contains the fix from %s", e.Release, incident.FixRef(r.PRNumber, r.Commit))
			if r.Commit == "" {
				reason = fmt.Sprintf("recurred in %s, which is not older than %s, the release it was closed in", e.Release, r.Closed)
			}
			res.Recurred++
			return f.incidents.FixRecurred(ctx, r.ID, r.Commit, e.Release, reason, e.Last)
		}
		if e.Last.After(judged) {
			judged = e.Last
		}
		res.Judged++
		if err := f.incidents.FixJudged(ctx, r.ID, r.Commit, e.Release, e.N, judged); err != nil {
			return err
		}
	}
	return nil
}

// AncestryCheck answers one question in a project's mirror: does the
// release commit rel contain the fix commit fix ("yes", "no", "unknown")?
// jobs/ gives it git (jobs/sandbox.Git.Ancestry) with the mirror's place.
type AncestryCheck func(ctx context.Context, p *domain.Project, token, fix, rel string) (string, error)

// AnswerQuestions answers a project's open ancestry questions with check,
// stores the answers in the cache and asks for a fix check at once. A
// question whose check fails stays open (the job retries); "unknown" is an
// answer (docs/releases.md: fetched once, then unknown — never a guess).
func (f *Fixes) AnswerQuestions(ctx context.Context, projectID uuid.UUID, check AncestryCheck) (int, error) {
	var qs []struct {
		Fix string `bun:"fix_sha"`
		Rel string `bun:"release_sha"`
	}
	if err := f.s.DB.NewRaw(`SELECT fix_sha, release_sha FROM release_ancestry_questions WHERE project_id = ?
		ORDER BY fix_at, fix_sha, release_sha LIMIT ?`, projectID, MaxQuestions).Scan(ctx, &qs); err != nil {
		return 0, fmt.Errorf("ancestry: questions of %s: %w", projectID, err)
	}
	if len(qs) == 0 {
		return 0, nil
	}
	p := new(domain.Project)
	if err := domain.SelectLiveProjects(f.s.DB, p).Where("id = ?", projectID).Scan(ctx); err != nil {
		return 0, nil //nolint:nilerr // the project is gone: nothing to answer
	}
	token, err := f.token(p)
	if err != nil {
		return 0, err
	}
	for _, q := range qs {
		a, err := check(ctx, p, token, q.Fix, q.Rel)
		if err != nil {
			return 0, fmt.Errorf("ancestry: %s in %s: %w", short(q.Fix), short(q.Rel), err)
		}
		if err := f.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
			if _, err := tx.NewRaw(`INSERT INTO release_ancestry (project_id, fix_sha, release_sha, answer, checked_at) VALUES (?, ?, ?, ?, ?)
				ON CONFLICT (project_id, fix_sha, release_sha) DO UPDATE SET answer = EXCLUDED.answer, checked_at = EXCLUDED.checked_at`,
				projectID, q.Fix, q.Rel, a, f.s.Now()).Exec(ctx); err != nil {
				return err
			}
			_, err := tx.NewRaw(`DELETE FROM release_ancestry_questions WHERE project_id = ? AND fix_sha = ? AND release_sha = ?`, projectID, q.Fix, q.Rel).Exec(ctx)
			return err
		}); err != nil {
			return 0, fmt.Errorf("ancestry: store the answer: %w", err)
		}
	}
	return len(qs), f.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error { return f.s.InsertJob(ctx, tx, domain.FixCheckArgs{}) })
}
