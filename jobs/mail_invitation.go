package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"

	"anvil/domain/account"
	"anvil/domain/alert"
)

// MailInvitationWorker mails one invitation's link (docs/mail.md).
type MailInvitationWorker struct {
	river.WorkerDefaults[account.MailInvitationArgs]
	accounts *account.Accounts
}

// Timeout bounds one attempt (the mailer bounds each SMTP step at 15 s).
func (w *MailInvitationWorker) Timeout(*river.Job[account.MailInvitationArgs]) time.Duration {
	return 60 * time.Second
}

// NextRetry backs off as alert deliveries do, 5 s to 30 min.
func (w *MailInvitationWorker) NextRetry(j *river.Job[account.MailInvitationArgs]) time.Time {
	return time.Now().Add(alert.Backoff(j.Attempt))
}

// Work makes one attempt; a refusal cancels the job.
func (w *MailInvitationWorker) Work(ctx context.Context, j *river.Job[account.MailInvitationArgs]) error {
	err := w.accounts.SendInvitationMail(ctx, j.Args, j.CreatedAt)
	if errors.Is(err, account.ErrMailPermanent) {
		return river.JobCancel(err)
	}
	return err
}
