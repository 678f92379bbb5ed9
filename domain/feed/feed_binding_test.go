package feed_test

import (
	"context"
	"errors"
	"testing"

	"anvil/domain"
	"anvil/domain/feed"
	"anvil/domain/project"
)

// A policy that starts repair runs is refused on a project with no repair
// command, whether the binding is new or changed, and nothing changes; the
// add form's AddBinding never replaces an existing binding's policy.
func TestBindingRules(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	feed := feed.NewFeed(tb.Store)
	bare := tb.Project(t, "bare")
	for _, pol := range []string{domain.PolicyApprove, domain.PolicyAuto} {
		_, err := feed.PutBinding(ctx, tb.Owner, bare.ID, "production", pol)
		var de *domain.Error
		if !errors.As(err, &de) || de.Code != "repair_command_required" || !errors.Is(err, domain.ErrInvalid) {
			t.Fatalf("put %s without a repair command: %v", pol, err)
		}
		if _, err := feed.AddBinding(ctx, tb.Owner, bare.ID, "production", pol); !errors.As(err, &de) || de.Code != "repair_command_required" {
			t.Fatalf("add %s without a repair command: %v", pol, err)
		}
	}
	if bs, _ := feed.ListBindings(ctx, tb.Owner, bare.ID); len(bs) != 0 {
		t.Fatalf("refused bindings were stored: %v", bs)
	}
	if _, err := feed.PutBinding(ctx, tb.Owner, bare.ID, "production", domain.PolicyObserve); err != nil {
		t.Fatalf("observe needs no repair command: %v", err)
	}
	if _, err := feed.PutBinding(ctx, tb.Owner, bare.ID, "production", domain.PolicyAuto); err == nil {
		t.Fatal("an existing binding was changed to auto without a repair command")
	}

	fixable, err := tb.Projects.Create(ctx, tb.Owner, project.ProjectInput{Slug: strp("fixable"), RepoURL: strp("https://git.example/fixable.git"),
		DefaultBranch: strp("main"), RunCommand: strp("make test"), RepairCommand: strp("./fix.sh")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := feed.AddBinding(ctx, tb.Owner, fixable.ID, "production", domain.PolicyApprove); err != nil {
		t.Fatalf("add approve: %v", err)
	}
	_, err = feed.AddBinding(ctx, tb.Owner, fixable.ID, "PRODUCTION", domain.PolicyObserve)
	var de *domain.Error
	if !errors.As(err, &de) || de.Code != "binding_exists" || !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("add over an existing binding: %v", err)
	}
	bs, _ := feed.ListBindings(ctx, tb.Owner, fixable.ID)
	if len(bs) != 1 || bs[0].RepairPolicy != domain.PolicyApprove {
		t.Fatalf("the existing binding changed: %v", bs)
	}
	if _, err := feed.PutBinding(ctx, tb.Owner, fixable.ID, "production", domain.PolicyAuto); err != nil {
		t.Fatalf("change in place: %v", err)
	}
}
