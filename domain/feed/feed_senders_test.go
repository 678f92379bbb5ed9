package feed_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"anvil/domain"
	"anvil/domain/feed"
	"anvil/domain/project"
)

// A token's answer is remembered for a second: a change made elsewhere (here
// in SQL, as another process would) shows after that second, a change made
// through this process's Feed at once, and only the whole token ever meets
// the remembered answer.
func TestSenderCache(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	feed := newFeed(t, tb.Store)
	p, err := tb.Projects.Create(ctx, tb.Owner, project.ProjectInput{Slug: strp("shop"), RepoURL: strp("https://git.example/shop.git"),
		DefaultBranch: strp("main"), RunCommand: strp("make test"), RepairCommand: strp("./fix.sh")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := feed.PutBinding(ctx, tb.Owner, p.ID, "production", domain.PolicyObserve); err != nil {
		t.Fatal(err)
	}
	c, tok, err := feed.CreateConnection(ctx, tb.Owner, p.ID, "api")
	if err != nil {
		t.Fatal(err)
	}
	policy := func() string {
		t.Helper()
		snd, err := feed.Authenticate(ctx, tok)
		if err != nil {
			t.Fatalf("authenticate: %v", err)
		}
		pol, _ := snd.PolicyFor("production")
		return pol
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := tb.DB.Bun.ExecContext(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	if got := policy(); got != domain.PolicyObserve {
		t.Fatalf("policy %q", got)
	}

	// Elsewhere: the binding changes, then the connection is revoked.
	exec(`UPDATE feed_bindings SET repair_policy = 'auto' WHERE project_id = ?`, p.ID)
	if got := policy(); got != domain.PolicyObserve {
		t.Fatalf("within the second: policy %q", got)
	}
	tb.Clock.Advance(time.Second)
	if got := policy(); got != domain.PolicyAuto {
		t.Fatalf("after the second: policy %q", got)
	}
	exec(`UPDATE feed_connections SET revoked_at = now() WHERE id = ?`, c.ID)
	if _, err := feed.Authenticate(ctx, tok); err != nil {
		t.Fatalf("within the second of a revocation elsewhere: %v", err)
	}
	// The prefix with another secret never meets the remembered answer.
	wrong := tok[:16] + strings.Repeat("x", len(tok)-16)
	if _, err := feed.Authenticate(ctx, wrong); !errors.Is(err, domain.ErrUnauthorized) {
		t.Fatalf("wrong secret: %v", err)
	}
	tb.Clock.Advance(time.Second)
	if _, err := feed.Authenticate(ctx, tok); !errors.Is(err, domain.ErrUnauthorized) {
		t.Fatalf("after the second: %v", err)
	}
	// Revoked is remembered too, and undoing it elsewhere shows a second later.
	exec(`UPDATE feed_connections SET revoked_at = NULL WHERE id = ?`, c.ID)
	if _, err := feed.Authenticate(ctx, tok); !errors.Is(err, domain.ErrUnauthorized) {
		t.Fatalf("revoked, within the second: %v", err)
	}
	tb.Clock.Advance(time.Second)

	// Here: a binding change and a revocation take effect at once.
	if got := policy(); got != domain.PolicyAuto {
		t.Fatalf("policy %q", got)
	}
	if _, err := feed.PutBinding(ctx, tb.Owner, p.ID, "production", domain.PolicyApprove); err != nil {
		t.Fatal(err)
	}
	if got := policy(); got != domain.PolicyApprove {
		t.Fatalf("after PutBinding: policy %q", got)
	}
	if err := feed.DeleteBinding(ctx, tb.Owner, p.ID, "production"); err != nil {
		t.Fatal(err)
	}
	if _, ok := mustAuth(t, feed, tok).PolicyFor("production"); ok {
		t.Fatal("after DeleteBinding: still bound")
	}
	if _, err := feed.RevokeConnection(ctx, tb.Owner, c.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := feed.Authenticate(ctx, tok); !errors.Is(err, domain.ErrUnauthorized) {
		t.Fatalf("after RevokeConnection: %v", err)
	}
}

func mustAuth(t *testing.T, feed *feed.Feed, tok string) *feed.FeedSender {
	t.Helper()
	snd, err := feed.Authenticate(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	return snd
}
