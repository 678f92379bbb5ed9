package account

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"anvil/domain/internal/dbutil"
	"anvil/domain/mail"
)

// Invitations and password resets are mailed when the operator configured
// SMTP (docs/mail.md); the link is still shown to whoever made it, so mail
// is a convenience, never the only way in.
//
// An invitation's mail is a River job enqueued in the invitation's own
// transaction (never an invitation without its mail, nor a mail of an
// invitation that was rolled back), retried with back-off for a day. Its
// token crosses the job table sealed under the keyring: river_job keeps
// its args, and a readable token there would be a way into the
// organisation for anyone who reads the table.

// MailInvitationArgs mails one invitation.
type MailInvitationArgs struct {
	InvitationID uuid.UUID `json:"invitation_id" river:"unique"`
	TokenEnc     string    `json:"token_enc"`
}

// Kind is River's job kind.
func (MailInvitationArgs) Kind() string { return "mail_invitation" }

// MailRetryFor is how long an invitation's mail is retried.
const MailRetryFor = 24 * time.Hour

// InsertOpts makes one job per invitation, with enough attempts for the
// back-off to reach the end of the day.
func (MailInvitationArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 60, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

func invitationMailAAD(id uuid.UUID) []byte { return []byte("invitation_mail:" + id.String()) }

// enqueueInvitationMail is called in the invitation's transaction.
func (a *Accounts) enqueueInvitationMail(ctx context.Context, tx bun.Tx, id uuid.UUID, token string) error {
	enc, err := a.s.Keys.Seal([]byte(token), invitationMailAAD(id))
	if err != nil {
		return fmt.Errorf("invitation: seal for mail: %w", err)
	}
	if _, err := tx.NewRaw(`UPDATE invitations SET mail_status = 'sending' WHERE id = ?`, id).Exec(ctx); err != nil {
		return fmt.Errorf("invitation: mail status: %w", err)
	}
	return a.s.EnqueueJobsTx(ctx, tx, []river.InsertManyParams{{Args: MailInvitationArgs{InvitationID: id, TokenEnc: enc}}})
}

// ErrMailPermanent wraps a mail the server refused for good (5xx): the
// job stops.
var ErrMailPermanent = errors.New("mail refused")

// SendInvitationMail makes one attempt at an invitation's mail: nothing
// when the invitation was used, revoked or has expired meanwhile; an
// error wrapping ErrMailPermanent for a refusal, any other error to try
// again. created is when the job was made: past MailRetryFor, a
// temporary failure is the last.
func (a *Accounts) SendInvitationMail(ctx context.Context, args MailInvitationArgs, created time.Time) error {
	var row struct {
		Email     string     `bun:"email"`
		Role      string     `bun:"role"`
		OrgName   string     `bun:"org_name"`
		Inviter   string     `bun:"inviter"`
		ExpiresAt time.Time  `bun:"expires_at"`
		UsedAt    *time.Time `bun:"used_at"`
		RevokedAt *time.Time `bun:"revoked_at"`
	}
	err := a.s.DB.NewRaw(`SELECT i.email, i.role, o.name AS org_name, COALESCE(u.email, '') AS inviter, i.expires_at, i.used_at, i.revoked_at
		FROM invitations i JOIN organizations o ON o.id = i.org_id LEFT JOIN users u ON u.id = i.invited_by
		WHERE i.id = ?`, args.InvitationID).Scan(ctx, &row)
	if dbutil.IsNoRows(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("invitation mail: read: %w", err)
	}
	if row.UsedAt != nil || row.RevokedAt != nil || !row.ExpiresAt.After(a.s.Now()) {
		return a.mailStatus(ctx, args.InvitationID, "")
	}
	if a.Mail == nil {
		return a.mailStatus(ctx, args.InvitationID, "not sent: this server sends no e-mail")
	}
	tok, err := a.s.Keys.Open(args.TokenEnc, invitationMailAAD(args.InvitationID))
	if err != nil {
		_ = a.mailStatus(ctx, args.InvitationID, "not sent: the link cannot be read")
		return fmt.Errorf("%w: invitation mail: cannot open the token", ErrMailPermanent)
	}
	link := strings.TrimRight(a.PublicURL, "/") + "/invite/" + string(tok)
	by := row.Inviter
	if by == "" {
		by = "A member"
	}
	text := fmt.Sprintf("%s invites you to join %s on anvil as %s.\n\nAccept the invitation:\n%s\n\nThe link works once, until %s. If you did not expect it, ignore this message.\n",
		by, row.OrgName, row.Role, link, row.ExpiresAt.UTC().Format(time.RFC1123))
	html := fmt.Sprintf(`<!doctype html><html><body style="font-family:system-ui,sans-serif;color:#0f172a;max-width:40rem">
<p>%s invites you to join <b>%s</b> on anvil as %s.</p>
<p style="margin:1.25rem 0"><a href="%s" style="background:#0f172a;color:#fff;padding:.5rem .9rem;border-radius:.375rem;text-decoration:none">Accept the invitation</a></p>
<p style="color:#64748b;font-size:.8rem">The link works once, until %s. If you did not expect it, ignore this message.<br>%s</p>
</body></html>`, esc(by), esc(row.OrgName), esc(row.Role), esc(link), esc(row.ExpiresAt.UTC().Format(time.RFC1123)), esc(link))
	_, err = a.Mail.Send(ctx, mail.Message{To: []string{row.Email}, Subject: "[anvil] Join " + row.OrgName + " on anvil", Text: text, HTML: html})
	if err == nil {
		return a.mailStatus(ctx, args.InvitationID, "sent")
	}
	var me *mail.Error
	if errors.As(err, &me) && !me.Temporary {
		_ = a.mailStatus(ctx, args.InvitationID, "refused: "+me.Text)
		return fmt.Errorf("%w: %s", ErrMailPermanent, me.Error())
	}
	if a.s.Now().Sub(created) >= MailRetryFor {
		_ = a.mailStatus(ctx, args.InvitationID, "not sent: "+err.Error()+"; retried for 24 h, giving up")
		return fmt.Errorf("%w: %w; retried for 24 h", ErrMailPermanent, err)
	}
	_ = a.mailStatus(ctx, args.InvitationID, "retrying: "+err.Error())
	return err
}

func (a *Accounts) mailStatus(ctx context.Context, id uuid.UUID, status string) error {
	if _, err := a.s.DB.NewRaw(`UPDATE invitations SET mail_status = ? WHERE id = ?`, status, id).Exec(ctx); err != nil {
		return fmt.Errorf("invitation: mail status: %w", err)
	}
	return nil
}

// MailPasswordReset mails a reset link to its person; the operator who
// made it is told the server's answer (and prints the link anyway).
func (a *Accounts) MailPasswordReset(ctx context.Context, email, link string, expires time.Time) (mail.Reply, error) {
	text := fmt.Sprintf("An operator of anvil reset the password of %s: the old password no longer works, and every session and API token of yours has ended.\n\nSet a new password:\n%s\n\nThe link works once, until %s.\n",
		email, link, expires.UTC().Format(time.RFC1123))
	html := fmt.Sprintf(`<!doctype html><html><body style="font-family:system-ui,sans-serif;color:#0f172a;max-width:40rem">
<p>An operator of anvil reset the password of %s: the old password no longer works, and every session and API token of yours has ended.</p>
<p style="margin:1.25rem 0"><a href="%s" style="background:#0f172a;color:#fff;padding:.5rem .9rem;border-radius:.375rem;text-decoration:none">Set a new password</a></p>
<p style="color:#64748b;font-size:.8rem">The link works once, until %s.<br>%s</p>
</body></html>`, esc(email), esc(link), esc(expires.UTC().Format(time.RFC1123)), esc(link))
	return a.Mail.Send(ctx, mail.Message{To: []string{email}, Subject: "[anvil] Set a new password", Text: text, HTML: html})
}

var esc = template.HTMLEscapeString
