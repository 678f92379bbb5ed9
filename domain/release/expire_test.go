package release_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"anvil/domain"
	"anvil/domain/release"
)

// Releases and the ancestry cache age with the project's events: what is
// older than the cutoff goes, in batches, except the release an incident
// was closed in, the one a fix being verified shipped in, and the answers
// and questions of fixes still watched.
func TestExpireReleasesAndAncestry(t *testing.T) {
	t.Parallel()
	b := setup(t, "observe")
	ctx := context.Background()
	old := b.Clock.Now().Add(-100 * 24 * time.Hour)
	cutoff := b.Clock.Now().Add(-90 * 24 * time.Hour)
	inc := b.Send(t, "Cart")
	watched := "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	if _, err := b.DB.Bun.NewRaw(`UPDATE incidents SET fix_commit_sha = ?, fix_release = 'shipped', closed_release = 'closed-in' WHERE id = ?`,
		watched, inc.ID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := b.DB.Bun.NewRaw(q, args...).Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	exec(`INSERT INTO releases (project_id, environment, version, first_seen, last_seen, event_count)
		SELECT ?0, 'production', 'old-' || g, ?1, ?1, 1 FROM generate_series(1, 2500) g`, b.Proj.ID, old)
	exec(`INSERT INTO releases (project_id, environment, version, first_seen, last_seen, event_count) VALUES
		(?0, 'production', 'recent', now(), now(), 1), (?0, 'production', 'shipped', ?1, ?1, 1), (?0, 'production', 'closed-in', ?1, ?1, 1)`,
		b.Proj.ID, old)
	exec(`INSERT INTO releases (project_id, environment, version, declared_at, declared_by) VALUES (?0, '', 'declared-long-ago', ?1, 'api')`, b.Proj.ID, old)
	exec(`INSERT INTO release_ancestry (project_id, fix_sha, release_sha, answer, checked_at) VALUES
		(?0, ?1, 'r1', 'yes', ?2), (?0, 'bbbbbbb', 'r1', 'no', ?2), (?0, 'bbbbbbb', 'r2', 'no', now())`, b.Proj.ID, watched, old)
	exec(`INSERT INTO release_ancestry_questions (project_id, fix_sha, release_sha, fix_at) VALUES
		(?0, ?1, 'r3', ?2), (?0, 'ccccccc', 'r3', ?2), (?0, 'ccccccc', 'r4', now())`, b.Proj.ID, watched, old)

	if err := b.Releases.Expire(ctx, b.Proj.ID, cutoff); err != nil {
		t.Fatal(err)
	}
	var versions []string
	if err := b.DB.Bun.NewRaw(`SELECT version FROM releases WHERE project_id = ? ORDER BY version`, b.Proj.ID).Scan(ctx, &versions); err != nil {
		t.Fatal(err)
	}
	if len(versions) != 3 || versions[0] != "closed-in" || versions[1] != "recent" || versions[2] != "shipped" {
		t.Fatalf("releases kept: %v", versions)
	}
	var answers, questions []string
	if err := b.DB.Bun.NewRaw(`SELECT fix_sha || '/' || release_sha FROM release_ancestry WHERE project_id = ? ORDER BY 1`, b.Proj.ID).Scan(ctx, &answers); err != nil {
		t.Fatal(err)
	}
	if err := b.DB.Bun.NewRaw(`SELECT fix_sha || '/' || release_sha FROM release_ancestry_questions WHERE project_id = ? ORDER BY 1`, b.Proj.ID).Scan(ctx, &questions); err != nil {
		t.Fatal(err)
	}
	if len(answers) != 2 || answers[0] != watched+"/r1" || answers[1] != "bbbbbbb/r2" {
		t.Fatalf("answers kept: %v", answers)
	}
	if len(questions) != 2 || questions[0] != watched+"/r3" || questions[1] != "ccccccc/r4" {
		t.Fatalf("questions kept: %v", questions)
	}
}

// A pass considers an environment's latest MaxCandidates trusted
// releases only, asks about them in one batch, and a check_ancestry run
// answers the oldest fix's questions first.
func TestCandidatesCappedAndQuestionsOldestFixFirst(t *testing.T) {
	t.Parallel()
	b := setup(t, "observe")
	ctx := context.Background()
	fx := release.NewFixes(b.Store, b.Incidents)
	older, newer := b.Send(t, "Cart"), b.Send(t, "Checkout")
	now := b.Clock.Now()
	oldFix, newFix := strings.Repeat("1", 39)+"a", strings.Repeat("2", 39)+"b"
	for _, f := range []struct {
		id  any
		sha string
		at  time.Time
	}{{older.ID, oldFix, now.Add(-2 * time.Hour)}, {newer.ID, newFix, now.Add(-time.Hour)}} {
		if _, err := b.DB.Bun.NewRaw(`UPDATE incidents SET fix_commit_sha = ?, fix_source = 'push', fix_merged_at = ? WHERE id = ?`, f.sha, f.at, f.id).Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// 80 releases named by commits, seen from the server; 30 more seen
	// from browsers only, the newest of all.
	if _, err := b.DB.Bun.NewRaw(`INSERT INTO releases (project_id, environment, version, first_seen, last_seen, event_count, seen_server, seen_browser,
			server_first_seen, server_event_count, browser_first_seen, browser_event_count)
		SELECT ?0, 'production', 'shop@1.' || g || '+' || lpad(to_hex(g), 7, 'c'), ?1::timestamptz + g * interval '1 second',
			?1::timestamptz + g * interval '1 second', 1, g <= 80, g > 80,
			CASE WHEN g <= 80 THEN ?1::timestamptz + g * interval '1 second' END, (g <= 80)::int,
			CASE WHEN g > 80 THEN ?1::timestamptz + g * interval '1 second' END, (g > 80)::int
		FROM generate_series(1, 110) g`, b.Proj.ID, now.Add(-time.Hour)).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := fx.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var n, browser int
	if err := b.DB.Bun.NewRaw(`SELECT count(*), count(*) FILTER (WHERE release_sha > lpad(to_hex(80), 7, 'c'))
		FROM release_ancestry_questions WHERE project_id = ?`, b.Proj.ID).Scan(ctx, &n, &browser); err != nil {
		t.Fatal(err)
	}
	if n != 2*release.MaxCandidates || browser != 0 || res.Questions != 1 {
		t.Fatalf("%d questions (%d about browser releases), %d projects asked; want %d", n, browser, res.Questions, 2*release.MaxCandidates)
	}
	var asked []string
	if _, err := fx.AnswerQuestions(ctx, b.Proj.ID, func(ctx context.Context, p *domain.Project, token, fix, rel string) (string, error) {
		asked = append(asked, fix)
		return "no", nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, f := range asked {
		want := oldFix
		if i >= release.MaxCandidates {
			want = newFix
		}
		if f != want {
			t.Fatalf("question %d about %s, want the older fix's first", i, f)
		}
	}
}
