package account_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/account"
)

// TestPurgeUser removes a person: memberships, sessions, tokens, pending
// invitations they sent, while the audit trail keeps their entries under a
// pseudonym; the last owner of an organisation is refused.
func TestPurgeUser(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.Accounts.AddMember(ctx, b.Owner, "ada@acme.test", "correct horse battery", domain.RoleOwner); err != nil {
		t.Fatal(err)
	}
	_, ada, err := b.Accounts.Login(ctx, "ada@acme.test", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := b.Accounts.CreateToken(ctx, ada, "ci")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Accounts.CreateInvitation(ctx, ada, "bob@acme.test", domain.RoleMember); err != nil {
		t.Fatal(err)
	}
	// Ada alone owns an organisation of her own: she cannot be purged.
	if _, err := b.Accounts.CreateOrganization(ctx, ada, "ada-labs", "Ada Labs"); err != nil {
		t.Fatal(err)
	}
	_, err = b.Accounts.PurgeUser(ctx, "ADA@acme.test")
	if errCode(err) != "last_owner" || !strings.Contains(err.Error(), "ada-labs") {
		t.Fatalf("purge of a last owner: %v", err)
	}
	if _, err := b.Accounts.Authenticate(ctx, tok); err != nil {
		t.Fatalf("a refused purge changed something: %v", err)
	}
	var labs uuid.UUID
	if err := b.DB.Bun.NewRaw(`SELECT id FROM organizations WHERE slug = 'ada-labs'`).Scan(ctx, &labs); err != nil {
		t.Fatal(err)
	}
	if _, err := b.DB.Bun.NewRaw(`INSERT INTO memberships (org_id, user_id, role) VALUES (?, ?, 'owner')`, labs, b.Owner.UserID).Exec(ctx); err != nil {
		t.Fatal(err)
	}

	rep, err := b.Accounts.PurgeUser(ctx, "ADA@acme.test")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Pseudonym != account.Pseudonym(ada.UserID) || !strings.HasPrefix(rep.Pseudonym, "user-") ||
		len(rep.Organizations) != 2 || rep.Sessions != 1 || rep.APITokens != 1 || rep.Invitations != 1 || rep.AuditEntries == 0 {
		t.Errorf("report %+v", rep)
	}
	if _, err := b.Accounts.Authenticate(ctx, tok); !errors.Is(err, domain.ErrUnauthorized) {
		t.Errorf("the purged person's token: %v", err)
	}
	var left int
	if err := b.DB.Bun.NewRaw(`SELECT count(*) FROM audit_log a WHERE a::text ILIKE '%ada@acme.test%'`).Scan(ctx, &left); err != nil || left != 0 {
		t.Errorf("%d audit entries still name her (%v)", left, err)
	}
	var actors []string
	if err := b.DB.Bun.NewRaw(`SELECT DISTINCT actor_email FROM audit_log WHERE actor_id = ?`, ada.UserID).Scan(ctx, &actors); err != nil {
		t.Fatal(err)
	}
	if len(actors) != 1 || actors[0] != rep.Pseudonym {
		t.Errorf("her entries' actor: %v", actors)
	}
	for _, table := range []string{"users", "memberships", "sessions", "api_tokens"} {
		var n int
		if err := b.DB.SQL.QueryRowContext(ctx, fmt.Sprintf(`SELECT count(*) FROM %s t WHERE t::text ~ $1`, table), ada.UserID.String()).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s: %d rows of her (%v)", table, n, err)
		}
	}
	if _, err := b.Accounts.PurgeUser(ctx, "ada@acme.test"); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("purge twice: %v", err)
	}
}
