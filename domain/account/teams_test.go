package account_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/account"
	"anvil/domain/project"
)

const pw = "correct horse battery"

// person adds email with role to the owner's organisation and returns their
// session cookie and principal.
func (b *testBundle) person(t *testing.T, email, role string) (string, *domain.Principal) {
	t.Helper()
	ctx := context.Background()
	if _, err := b.Accounts.AddMember(ctx, b.Owner, email, pw, role); err != nil {
		t.Fatal(err)
	}
	cookie, p, err := b.Accounts.Login(ctx, email, pw)
	if err != nil {
		t.Fatal(err)
	}
	return cookie, p
}

func wantKind(t *testing.T, err, kind error, code string) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("err = %v, want %v", err, kind)
	}
	var de *domain.Error
	if code != "" && (!errors.As(err, &de) || de.Code != code) {
		t.Fatalf("err = %v (%+v), want code %s", err, de, code)
	}
}

func (b *testBundle) audit(t *testing.T, q domain.AuditQuery) []domain.AuditEntry {
	t.Helper()
	pg, err := domain.NewAudit(b.Store).List(context.Background(), b.Owner, q)
	if err != nil {
		t.Fatal(err)
	}
	return pg.Entries
}

func TestLastOwnerCanBeNeitherDemotedNorRemovedNorLeave(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, admin := b.person(t, "admin@acme.test", domain.RoleAdmin)
	// Nobody changes their own role, not even the owner.
	wantKind(t, b.Accounts.ChangeRole(ctx, b.Owner, b.Owner.UserID, domain.RoleAdmin), domain.ErrForbidden, "forbidden")
	// An admin cannot touch an owner at all.
	wantKind(t, b.Accounts.ChangeRole(ctx, admin, b.Owner.UserID, domain.RoleMember), domain.ErrForbidden, "forbidden")
	wantKind(t, b.Accounts.RemoveMember(ctx, admin, b.Owner.UserID), domain.ErrForbidden, "forbidden")
	// The last owner cannot leave.
	wantKind(t, b.Accounts.RemoveMember(ctx, b.Owner, b.Owner.UserID), domain.ErrConflict, "last_owner")
	// With a second owner, the first may leave; then the second is the last.
	_, second := b.person(t, "second@acme.test", domain.RoleOwner)
	wantKind(t, b.Accounts.ChangeRole(ctx, second, second.UserID, domain.RoleMember), domain.ErrForbidden, "forbidden")
	if err := b.Accounts.ChangeRole(ctx, second, b.Owner.UserID, domain.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	b.Owner.Role = domain.RoleAdmin
	wantKind(t, b.Accounts.ChangeRole(ctx, b.Owner, second.UserID, domain.RoleMember), domain.ErrForbidden, "forbidden")
	wantKind(t, b.Accounts.RemoveMember(ctx, second, second.UserID), domain.ErrConflict, "last_owner")
	wantKind(t, b.Accounts.ChangeRole(ctx, second, uuid.New(), domain.RoleMember), domain.ErrNotFound, "")
	wantKind(t, b.Accounts.ChangeRole(ctx, second, admin.UserID, "superuser"), domain.ErrInvalid, "invalid_role")
}

func TestAdminManagesMembersAndViewersOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, admin := b.person(t, "admin@acme.test", domain.RoleAdmin)
	_, other := b.person(t, "other-admin@acme.test", domain.RoleAdmin)
	_, member := b.person(t, "member@acme.test", domain.RoleMember)
	_, viewer := b.person(t, "viewer@acme.test", domain.RoleViewer)

	if err := b.Accounts.ChangeRole(ctx, admin, member.UserID, domain.RoleViewer); err != nil {
		t.Fatal(err)
	}
	if err := b.Accounts.ChangeRole(ctx, admin, member.UserID, domain.RoleMember); err != nil {
		t.Fatal(err)
	}
	wantKind(t, b.Accounts.ChangeRole(ctx, admin, member.UserID, domain.RoleOwner), domain.ErrForbidden, "")
	wantKind(t, b.Accounts.ChangeRole(ctx, admin, member.UserID, domain.RoleAdmin), domain.ErrForbidden, "")
	wantKind(t, b.Accounts.ChangeRole(ctx, admin, other.UserID, domain.RoleMember), domain.ErrForbidden, "")
	wantKind(t, b.Accounts.RemoveMember(ctx, admin, other.UserID), domain.ErrForbidden, "")
	// Members and viewers manage nobody.
	wantKind(t, b.Accounts.ChangeRole(ctx, member, viewer.UserID, domain.RoleMember), domain.ErrForbidden, "")
	wantKind(t, b.Accounts.RemoveMember(ctx, member, viewer.UserID), domain.ErrForbidden, "")
	if _, _, err := b.Accounts.CreateInvitation(ctx, member, "x@acme.test", domain.RoleViewer); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("member invites: %v", err)
	}
	if _, _, err := b.Accounts.CreateInvitation(ctx, admin, "x@acme.test", domain.RoleAdmin); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("admin invites an admin: %v", err)
	}
	if err := b.Accounts.RemoveMember(ctx, admin, viewer.UserID); err != nil {
		t.Fatal(err)
	}
	// The owner manages admins.
	if err := b.Accounts.ChangeRole(ctx, b.Owner, other.UserID, domain.RoleMember); err != nil {
		t.Fatal(err)
	}
	ms, err := b.Accounts.ListMembers(ctx, viewerOrMember(member))
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]string{}
	for _, m := range ms {
		roles[m.Email] = m.Role
	}
	want := map[string]string{"owner@acme.test": "owner", "admin@acme.test": "admin", "other-admin@acme.test": "member", "member@acme.test": "member"}
	if len(roles) != len(want) {
		t.Fatalf("members = %v", roles)
	}
	for e, r := range want {
		if roles[e] != r {
			t.Fatalf("members = %v, want %v", roles, want)
		}
	}
	kinds := map[string]int{}
	for _, e := range b.audit(t, domain.AuditQuery{}) {
		kinds[e.Kind]++
	}
	if kinds[domain.AuditMemberRoleChanged] != 3 || kinds[domain.AuditMemberRemoved] != 1 || kinds[domain.AuditMemberAdded] != 4 {
		t.Fatalf("audit kinds = %v", kinds)
	}
	entries := b.audit(t, domain.AuditQuery{Actor: "ADMIN@acme.test", Kind: domain.AuditMemberRemoved})
	if len(entries) != 1 || entries[0].Target != "viewer@acme.test" || entries[0].Detail["role"] != "viewer" {
		t.Fatalf("filtered audit = %+v", entries)
	}
}

func viewerOrMember(p *domain.Principal) *domain.Principal { return p }

func TestRemovalEndsSessionsAndTokensAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	cookie, member := b.person(t, "member@acme.test", domain.RoleMember)
	tok, err := b.Accounts.CreateToken(ctx, member, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Accounts.Authenticate(ctx, tok); err != nil {
		t.Fatal(err)
	}
	// A role change applies at the next request.
	if err := b.Accounts.ChangeRole(ctx, b.Owner, member.UserID, domain.RoleViewer); err != nil {
		t.Fatal(err)
	}
	if p, err := b.Accounts.Session(ctx, cookie); err != nil || p.Role != domain.RoleViewer {
		t.Fatalf("after demotion: %v %+v", err, p)
	}
	if err := b.Accounts.RemoveMember(ctx, b.Owner, member.UserID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Accounts.Session(ctx, cookie); !errors.Is(err, domain.ErrUnauthorized) {
		t.Fatalf("session after removal: %v", err)
	}
	if _, err := b.Accounts.Authenticate(ctx, tok); !errors.Is(err, domain.ErrUnauthorized) {
		t.Fatalf("token after removal: %v", err)
	}
	// Re-adding the person does not bring the old token back.
	if _, err := b.Accounts.AddMember(ctx, b.Owner, "member@acme.test", pw, domain.RoleMember); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Accounts.Authenticate(ctx, tok); !errors.Is(err, domain.ErrUnauthorized) {
		t.Fatalf("token after re-adding: %v", err)
	}
	for _, e := range b.audit(t, domain.AuditQuery{}) {
		raw, _ := json.Marshal(e)
		if strings.Contains(string(raw), tok) || strings.Contains(string(raw), pw) {
			t.Fatalf("audit entry holds a secret: %s", raw)
		}
	}
}

func TestInvitationIsUsedOnceExpiresAndCanBeRevoked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, _, err := b.Accounts.CreateInvitation(ctx, b.Owner, "not an email", domain.RoleMember)
	wantKind(t, err, domain.ErrInvalid, "invalid_email")
	_, _, err = b.Accounts.CreateInvitation(ctx, b.Owner, "new@acme.test", "boss")
	wantKind(t, err, domain.ErrInvalid, "invalid_role")
	_, _, err = b.Accounts.CreateInvitation(ctx, b.Owner, "owner@acme.test", domain.RoleMember)
	wantKind(t, err, domain.ErrConflict, "already_member")

	inv, tok, err := b.Accounts.CreateInvitation(ctx, b.Owner, "new@acme.test", domain.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	var stored int
	if err := b.DB.Bun.NewRaw(`SELECT count(*) FROM invitations WHERE token_hash::text LIKE ?`, "%"+tok+"%").Scan(ctx, &stored); err != nil || stored != 0 {
		t.Fatalf("token stored in plaintext? %v %d", err, stored)
	}
	pending, err := b.Accounts.ListInvitations(ctx, b.Owner)
	if err != nil || len(pending) != 1 || pending[0].ID != inv.ID || pending[0].ExpiresAt.Sub(pending[0].CreatedAt) != account.InvitationTTL {
		t.Fatalf("pending = %+v, %v", pending, err)
	}
	sum, err := b.Accounts.Invitation(ctx, tok)
	if err != nil || sum.Email != "new@acme.test" || sum.UserExists {
		t.Fatalf("summary = %+v, %v", sum, err)
	}
	if _, err := b.Accounts.AcceptInvitationNew(ctx, tok, "New Person", "short"); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("short password: %v", err)
	}
	cookie, err := b.Accounts.AcceptInvitationNew(ctx, tok, "New Person", pw)
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.Accounts.Session(ctx, cookie)
	if err != nil || p.OrgID != b.Owner.OrgID || p.Role != domain.RoleMember {
		t.Fatalf("new member = %+v, %v", p, err)
	}
	// Used: the same generic refusal as for anything else.
	_, err = b.Accounts.AcceptInvitationNew(ctx, tok, "Again", pw)
	wantKind(t, err, domain.ErrNotFound, "invitation_invalid")
	_, err = b.Accounts.Invitation(ctx, tok)
	wantKind(t, err, domain.ErrNotFound, "invitation_invalid")

	// Revoked.
	_, tok2, err := b.Accounts.CreateInvitation(ctx, b.Owner, "second@acme.test", domain.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	pending, _ = b.Accounts.ListInvitations(ctx, b.Owner)
	if err := b.Accounts.RevokeInvitation(ctx, b.Owner, pending[0].ID); err != nil {
		t.Fatal(err)
	}
	wantKind(t, b.Accounts.RevokeInvitation(ctx, b.Owner, pending[0].ID), domain.ErrNotFound, "")
	_, err = b.Accounts.AcceptInvitationNew(ctx, tok2, "Second", pw)
	wantKind(t, err, domain.ErrNotFound, "invitation_invalid")

	// Expired.
	_, tok3, err := b.Accounts.CreateInvitation(ctx, b.Owner, "third@acme.test", domain.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	b.Clock.Advance(account.InvitationTTL + time.Second)
	_, err = b.Accounts.AcceptInvitationNew(ctx, tok3, "Third", pw)
	wantKind(t, err, domain.ErrNotFound, "invitation_invalid")
	if pending, _ := b.Accounts.ListInvitations(ctx, b.Owner); len(pending) != 0 {
		t.Fatalf("expired still pending: %+v", pending)
	}
	_, err = b.Accounts.Invitation(ctx, "anv_inv_nonsense")
	wantKind(t, err, domain.ErrNotFound, "invitation_invalid")

	kinds := []string{}
	for _, e := range b.audit(t, domain.AuditQuery{}) {
		if strings.HasPrefix(e.Kind, "invitation.") {
			kinds = append(kinds, e.Kind)
		}
	}
	if strings.Join(kinds, ",") != "invitation.created,invitation.revoked,invitation.created,invitation.used,invitation.created" {
		t.Fatalf("invitation audit (newest first) = %v", kinds)
	}
}

func TestInvitationForAnExistingUserJoinsAfterLogin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	// beta is another organisation whose owner is invited into acme.
	if _, err := b.Accounts.Bootstrap(ctx, "beta", "boss@beta.test", pw); err != nil {
		t.Fatal(err)
	}
	_, tok, err := b.Accounts.CreateInvitation(ctx, b.Owner, "boss@beta.test", domain.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := b.Accounts.Invitation(ctx, tok)
	if err != nil || !sum.UserExists {
		t.Fatalf("summary = %+v, %v", sum, err)
	}
	if _, err := b.Accounts.AcceptInvitationNew(ctx, tok, "Boss", pw); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("new account for an existing email: %v", err)
	}
	// Somebody else cannot use it.
	_, member := b.person(t, "member@acme.test", domain.RoleMember)
	wantKind(t, b.Accounts.AcceptInvitationAsUser(ctx, member, tok), domain.ErrForbidden, "")
	cookie, boss, err := b.Accounts.Login(ctx, "BOSS@beta.test", pw)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Accounts.AcceptInvitationAsUser(ctx, boss, tok); err != nil {
		t.Fatal(err)
	}
	p, err := b.Accounts.Session(ctx, cookie)
	if err != nil || p.OrgID != b.Owner.OrgID || p.Role != domain.RoleViewer {
		t.Fatalf("after joining: %+v %v", p, err)
	}
	orgs, err := b.Accounts.Organizations(ctx, p)
	if err != nil || len(orgs) != 2 {
		t.Fatalf("orgs = %+v %v", orgs, err)
	}
	// Switching back and forth; an organisation one does not belong to is a 404.
	for _, o := range orgs {
		if err := b.Accounts.SwitchOrganization(ctx, p, o.ID); err != nil {
			t.Fatal(err)
		}
		if q, _ := b.Accounts.Session(ctx, cookie); q.OrgID != o.ID || q.Role != o.Role {
			t.Fatalf("switched to %+v, session %+v", o, q)
		}
	}
	wantKind(t, b.Accounts.SwitchOrganization(ctx, p, uuid.New()), domain.ErrNotFound, "")
	// A new organisation of one's own.
	org, err := b.Accounts.CreateOrganization(ctx, p, "gamma", "Gamma")
	if err != nil {
		t.Fatal(err)
	}
	if q, _ := b.Accounts.Session(ctx, cookie); q.OrgID != org.ID || q.Role != domain.RoleOwner {
		t.Fatalf("after creating: %+v", q)
	}
	_, err = b.Accounts.CreateOrganization(ctx, p, "Not A Slug", "")
	wantKind(t, err, domain.ErrInvalid, "invalid_slug")
	_, err = b.Accounts.CreateOrganization(ctx, p, "gamma", "")
	wantKind(t, err, domain.ErrConflict, "org_exists")
}

func TestPasswordChangeEndsOtherSessions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c1, p1, err := b.Accounts.Login(ctx, "owner@acme.test", pw)
	if err != nil {
		t.Fatal(err)
	}
	c2, _, err := b.Accounts.Login(ctx, "owner@acme.test", pw)
	if err != nil {
		t.Fatal(err)
	}
	wantKind(t, b.Accounts.ChangePassword(ctx, p1, "wrong password", "a brand new password", true), domain.ErrInvalid, "wrong_password")
	wantKind(t, b.Accounts.ChangePassword(ctx, p1, pw, "short", true), domain.ErrInvalid, "invalid_password")
	if _, err := b.Accounts.Session(ctx, c2); err != nil {
		t.Fatalf("a refused change ended a session: %v", err)
	}
	ss, err := b.Accounts.Sessions(ctx, p1)
	if err != nil || len(ss) != 2 {
		t.Fatalf("sessions = %+v %v", ss, err)
	}
	if err := b.Accounts.ChangePassword(ctx, p1, pw, "a brand new password", false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Accounts.Session(ctx, c1); err != nil {
		t.Fatalf("own session ended: %v", err)
	}
	if _, err := b.Accounts.Session(ctx, c2); !errors.Is(err, domain.ErrUnauthorized) {
		t.Fatalf("other session survived: %v", err)
	}
	if _, _, err := b.Accounts.Login(ctx, "owner@acme.test", pw); !errors.Is(err, domain.ErrUnauthorized) {
		t.Fatalf("old password still works: %v", err)
	}
	c3, _, err := b.Accounts.Login(ctx, "owner@acme.test", "a brand new password")
	if err != nil {
		t.Fatal(err)
	}
	// Ending one's own session by its handle.
	ss, _ = b.Accounts.Sessions(ctx, p1)
	for _, s := range ss {
		if !s.Current {
			if err := b.Accounts.EndSession(ctx, p1, s.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := b.Accounts.Session(ctx, c3); !errors.Is(err, domain.ErrUnauthorized) {
		t.Fatalf("ended session survived: %v", err)
	}
	wantKind(t, b.Accounts.EndSession(ctx, p1, "nope"), domain.ErrNotFound, "")
	if e := b.audit(t, domain.AuditQuery{Kind: domain.AuditPasswordChanged}); len(e) != 1 {
		t.Fatalf("audit = %+v", e)
	}
}

func TestOperatorResetStopsTheOldPasswordAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	cookie, _, err := b.Accounts.Login(ctx, "owner@acme.test", pw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Accounts.CreatePasswordReset(ctx, "nobody@acme.test"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown email: %v", err)
	}
	reset, err := b.Accounts.CreatePasswordReset(ctx, "Owner@acme.test")
	if err != nil || reset.Expires.Sub(b.Clock.Now()) != account.PasswordResetTTL {
		t.Fatal(err, reset.Expires)
	}
	tok := reset.Token
	if _, err := b.Accounts.Session(ctx, cookie); !errors.Is(err, domain.ErrUnauthorized) {
		t.Fatalf("session survived a reset: %v", err)
	}
	if _, _, err := b.Accounts.Login(ctx, "owner@acme.test", pw); !errors.Is(err, domain.ErrUnauthorized) {
		t.Fatalf("old password after reset: %v", err)
	}
	if email, err := b.Accounts.PasswordResetEmail(ctx, tok); err != nil || email != "owner@acme.test" {
		t.Fatal(email, err)
	}
	if err := b.Accounts.ResetPassword(ctx, tok, "the new long password"); err != nil {
		t.Fatal(err)
	}
	wantKind(t, b.Accounts.ResetPassword(ctx, tok, "another long password"), domain.ErrNotFound, "reset_invalid")
	if _, _, err := b.Accounts.Login(ctx, "owner@acme.test", "the new long password"); err != nil {
		t.Fatal(err)
	}
	reset2, _ := b.Accounts.CreatePasswordReset(ctx, "owner@acme.test")
	b.Clock.Advance(account.PasswordResetTTL + time.Second)
	wantKind(t, b.Accounts.ResetPassword(ctx, reset2.Token, "another long password"), domain.ErrNotFound, "reset_invalid")
	e := b.audit(t, domain.AuditQuery{Kind: domain.AuditPasswordReset})
	if len(e) != 2 || !strings.Contains(e[0].ActorEmail, "operator") {
		t.Fatalf("reset audit = %+v", e)
	}
}

func TestRolesAreEnforcedPerAction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	proj := b.Project(t, "web")
	_, member := b.person(t, "member@acme.test", domain.RoleMember)
	_, viewer := b.person(t, "viewer@acme.test", domain.RoleViewer)
	// Members run; viewers do not.
	if _, err := b.Queue.AcceptManual(ctx, viewer, proj.ID, ""); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("viewer triggers: %v", err)
	}
	r, err := b.Queue.AcceptManual(ctx, member, proj.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Queue.RequestCancel(ctx, viewer, r.ID); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("viewer cancels: %v", err)
	}
	if _, err := b.Queue.RequestCancel(ctx, member, r.ID); err != nil {
		t.Fatal(err)
	}
	// Projects are the admins'.
	_, err = b.Projects.Create(ctx, member, project.ProjectInput{Slug: strp("x"), RepoURL: strp("https://git.example/x.git"),
		DefaultBranch: strp("main"), RunCommand: strp("true")})
	wantKind(t, err, domain.ErrForbidden, "forbidden")
	if !strings.Contains(err.Error(), "admin") {
		t.Fatalf("message does not name the role needed: %v", err)
	}
	e := b.audit(t, domain.AuditQuery{Kind: domain.AuditProjectCreated})
	if len(e) != 1 || e[0].Target != "web" || e[0].ActorEmail != "owner@acme.test" {
		t.Fatalf("project audit = %+v", e)
	}
	// The audit log is the admins' too.
	if _, err := domain.NewAudit(b.Store).List(ctx, member, domain.AuditQuery{}); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("member reads audit: %v", err)
	}
}

func TestAuditIsPaginated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for i := 0; i < 60; i++ {
		if _, err := b.Accounts.CreateToken(ctx, b.Owner, "t"); err != nil {
			t.Fatal(err)
		}
	}
	a := domain.NewAudit(b.Store)
	first, err := a.List(ctx, b.Owner, domain.AuditQuery{})
	if err != nil || len(first.Entries) != 50 || first.NextBefore == 0 {
		t.Fatalf("first page: %d entries, next %d, %v", len(first.Entries), first.NextBefore, err)
	}
	// 60 tokens after the organisation's creation, the first entry: 11.
	second, err := a.List(ctx, b.Owner, domain.AuditQuery{Before: first.NextBefore})
	if err != nil || len(second.Entries) != 11 || second.NextBefore != 0 || second.Entries[10].Kind != domain.AuditOrganizationCreated {
		t.Fatalf("second page: %d entries, next %d, %v", len(second.Entries), second.NextBefore, err)
	}
	if second.Entries[0].ID >= first.Entries[49].ID {
		t.Fatal("pages overlap")
	}
}

// TestPasswordResetsRevokeAPITokens: an operator's reset revokes every API
// token of the person (and only theirs), a password change does when asked,
// and each revocation is in the audit log with its reason.
func TestPasswordResetsRevokeAPITokens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, p1, err := b.Accounts.Login(ctx, "owner@acme.test", pw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Accounts.AddMember(ctx, b.Owner, "member@acme.test", pw, domain.RoleMember); err != nil {
		t.Fatal(err)
	}
	_, pm, err := b.Accounts.Login(ctx, "member@acme.test", pw)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := b.Accounts.CreateToken(ctx, pm, "member's")
	if err != nil {
		t.Fatal(err)
	}
	mine := make([]string, 2)
	for i := range mine {
		if mine[i], err = b.Accounts.CreateToken(ctx, p1, fmt.Sprintf("cli %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	live := func(tok string) bool {
		_, err := b.Accounts.Authenticate(ctx, tok)
		if err != nil && !errors.Is(err, domain.ErrUnauthorized) {
			t.Fatal(err)
		}
		return err == nil
	}

	// A change without the box leaves them; with it, they stop.
	if err := b.Accounts.ChangePassword(ctx, p1, pw, "a brand new password", false); err != nil {
		t.Fatal(err)
	}
	if !live(mine[0]) || !live(mine[1]) {
		t.Fatal("a plain password change revoked the tokens")
	}
	if err := b.Accounts.ChangePassword(ctx, p1, "a brand new password", "another new password", true); err != nil {
		t.Fatal(err)
	}
	if live(mine[0]) || live(mine[1]) || !live(theirs) {
		t.Fatalf("after a change with revocation: mine %v %v, the member's %v", live(mine[0]), live(mine[1]), live(theirs))
	}

	// An operator's reset revokes every live token (the change above took
	// the bootstrap's with the two).
	again, err := b.Accounts.CreateToken(ctx, p1, "again")
	if err != nil {
		t.Fatal(err)
	}
	reset, err := b.Accounts.CreatePasswordReset(ctx, "owner@acme.test")
	if err != nil {
		t.Fatal(err)
	}
	if reset.TokensRevoked != 1 || live(again) || !live(theirs) {
		t.Fatalf("after the reset: %d revoked, new token live %v, the member's live %v", reset.TokensRevoked, live(again), live(theirs))
	}

	reasons := map[string]int{}
	for _, e := range b.audit(t, domain.AuditQuery{Kind: domain.AuditTokenRevoked}) {
		reasons[fmt.Sprint(e.Detail["reason"])]++
		if e.Detail["reason"] == "password_reset" && !strings.Contains(e.ActorEmail, "operator") {
			t.Errorf("a reset's revocation is not the operator's: %+v", e)
		}
	}
	if reasons["password_change"] != 3 || reasons["password_reset"] != 1 {
		t.Fatalf("token.revoked audit entries by reason: %v", reasons)
	}
}
