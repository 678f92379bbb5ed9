package account_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"anvil/domain"
	"anvil/domain/account"
)

// A reveal is taken once, by its own session and slot only, within
// RevealTTL; it is stored sealed, and goes with its session.
func TestRevealIsOneTime(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	login := func() *domain.Principal {
		t.Helper()
		_, p, err := tb.Accounts.Login(ctx, "owner@acme.test", "correct horse battery")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := login(), login()
	type secret struct{ Token string }
	if err := tb.Accounts.StashReveal(ctx, a, "api-token", secret{"anv_pat_plaintext_value"}); err != nil {
		t.Fatal(err)
	}
	var sealed string
	if err := tb.Store.DB.NewRaw(`SELECT sealed FROM session_reveals`).Scan(ctx, &sealed); err != nil || strings.Contains(sealed, "plaintext") {
		t.Fatalf("stored %q (%v)", sealed, err)
	}
	var got secret
	if ok, err := tb.Accounts.TakeReveal(ctx, b, "api-token", &got); ok || err != nil {
		t.Fatalf("another session took it: %v %v", ok, err)
	}
	if ok, _ := tb.Accounts.TakeReveal(ctx, a, "webhook", &got); ok {
		t.Fatal("another slot took it")
	}
	if ok, err := tb.Accounts.TakeReveal(ctx, a, "api-token", &got); !ok || err != nil || got.Token != "anv_pat_plaintext_value" {
		t.Fatalf("first take: %v %v %q", ok, err, got.Token)
	}
	if ok, _ := tb.Accounts.TakeReveal(ctx, a, "api-token", &got); ok {
		t.Fatal("taken twice")
	}
	// Expired: not shown, and purged.
	_ = tb.Accounts.StashReveal(ctx, a, "api-token", secret{"late"})
	tb.Clock.Advance(account.RevealTTL + time.Second)
	if ok, _ := tb.Accounts.TakeReveal(ctx, a, "api-token", &got); ok {
		t.Fatal("an expired reveal was shown")
	}
	if _, err := tb.Accounts.PurgeExpiredSessions(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tb.Store.DB.NewRaw(`SELECT count(*) FROM session_reveals`).Scan(ctx, &n); err != nil || n != 0 {
		t.Fatalf("%d reveals after the purge (%v)", n, err)
	}
}
