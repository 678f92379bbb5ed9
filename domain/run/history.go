package run

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun/dialect/pgdialect"

	"anvil/domain"
	"anvil/domain/project"
)

// HistoryPage is the most runs one page of a project's run history holds.
const HistoryPage = 50

// HistoryFilter narrows a project's run history. The values are as a client
// sent them (query parameters): History validates each and names the one it
// refuses (docs/contracts/private-api.md, "Run history").
type HistoryFilter struct {
	Status  string // a public status ("queued", "running", "failed" …)
	Branch  string // exact branch name
	Trigger string // manual, webhook, repair, pull_request
	Before  string // a run number: only runs numbered below it (the cursor)
	Limit   int    // 1..HistoryPage (0: HistoryPage)
}

// HistoryRun is one run of the history: the run's view with who or what
// started it and why it ended, in words.
type HistoryRun struct {
	RunView
	// Actor is who or what started the run: a member's email, "a push"
	// (with its provider), "a repair", "a former member".
	Actor string `json:"actor"`
	// Duration is finished − started in whole seconds, null until both.
	DurationSeconds *int64 `json:"duration_seconds"`
	// Reason says why it ended ("" while it runs or when it passed; a
	// repair that passed with its change kept as a patch: PatchReadyWords).
	Reason string `json:"reason"`
	// PatchReady: a repair run whose outcome is a patch to download or apply.
	PatchReady bool `json:"patch_ready,omitempty"`
}

// History is one page of runs, newest first, and the cursor of the next
// page (0 when this is the last).
type History struct {
	Runs       []HistoryRun
	NextBefore int64
}

var publicStatuses = []string{StatusQueued, StatusStarting, StatusRunning, StatusCancelRequested, StatusCanceling,
	StatusPassed, StatusFailed, StatusCanceled}

var historyTriggers = []string{TriggerManual, TriggerWebhook, TriggerRepair, TriggerPullRequest}

// Validate checks every filter and returns all refusals at once, each
// naming its parameter.
func (f *HistoryFilter) Validate() (before int64, err error) {
	var fe domain.FieldErrors
	if f.Status != "" && !contains(publicStatuses, f.Status) {
		fe.Add("status", "invalid_filter", "must be one of %s", strings.Join(publicStatuses, ", "))
	}
	if f.Trigger != "" && !contains(historyTriggers, f.Trigger) {
		fe.Add("trigger", "invalid_filter", "must be one of %s", strings.Join(historyTriggers, ", "))
	}
	if f.Branch != "" && (!domain.ValidBranch(f.Branch) || strings.Contains(f.Branch, "..") || strings.HasPrefix(f.Branch, "-")) {
		fe.Add("branch", "invalid_filter", "is not a valid branch name")
	}
	if f.Before != "" {
		n, perr := strconv.ParseInt(f.Before, 10, 64)
		if perr != nil || n < 1 {
			fe.Add("before", "invalid_filter", "must be a run number (a positive integer)")
		}
		before = n
	}
	if f.Limit < 0 || f.Limit > HistoryPage {
		fe.Add("limit", "invalid_filter", "must be between 1 and %d", HistoryPage)
	}
	return before, fe.Err()
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// History lists a project's runs newest first (by number, which acceptance
// assigns densely in queue order), a page at a time: the cursor is the
// last run's number. It reads project_runs, the authoritative rows, so a
// run shows the moment it is accepted and its status is never a step
// behind (the read model lags by a reconciliation).
func (q *Queue) History(ctx context.Context, orgID, projectID uuid.UUID, f HistoryFilter) (History, error) {
	before, err := f.Validate()
	if err != nil {
		return History{}, err
	}
	p, err := project.NewProjects(q.s).Get(ctx, orgID, projectID)
	if err != nil {
		return History{}, err
	}
	limit := f.Limit
	if limit == 0 {
		limit = HistoryPage
	}
	var rows []Run
	sel := q.s.DB.NewSelect().Model(&rows).Where("run.project_id = ? AND run.org_id = ?", p.ID, orgID)
	if f.Status == StatusQueued {
		sel = sel.Where("run.state IN (?, ?)", StatePending, StateExecutable)
	} else if f.Status != "" {
		sel = sel.Where("run.state = ?", f.Status)
	}
	if f.Branch != "" {
		sel = sel.Where("run.branch = ?", f.Branch)
	}
	if f.Trigger != "" {
		sel = sel.Where("run.trigger = ?", f.Trigger)
	}
	if before > 0 {
		sel = sel.Where("run.number < ?", before)
	}
	// One more than the page tells whether another page follows.
	if err := sel.OrderExpr("run.number DESC").Limit(int64(limit) + 1).Scan(ctx); err != nil {
		return History{}, fmt.Errorf("run history of %s: %w", p.ID, err)
	}
	var h History
	if len(rows) > limit {
		rows = rows[:limit]
		h.NextBefore = rows[limit-1].Number
	}
	emails, err := q.emailsOf(ctx, orgID, rows)
	if err != nil {
		return History{}, err
	}
	var repairs []uuid.UUID
	for _, r := range rows {
		if r.Trigger == TriggerRepair && r.State == StatePassed {
			repairs = append(repairs, r.ID)
		}
	}
	ready, err := (&Logs{s: q.s}).ReadyPatches(ctx, repairs)
	if err != nil {
		return History{}, err
	}
	h.Runs = make([]HistoryRun, 0, len(rows))
	for i := range rows {
		r := &rows[i]
		hr := HistoryRun{RunView: r.View(), Actor: actorOf(r, emails),
			Reason: WhyEnded(r, "", p.RunTimeout(), q.HeartbeatTimeout())}
		if ready[r.ID] {
			hr.Reason, hr.PatchReady = PatchReadyWords, true
		}
		if r.StartedAt != nil && r.FinishedAt != nil {
			d := int64(r.FinishedAt.Sub(*r.StartedAt).Round(time.Second) / time.Second)
			hr.DurationSeconds = &d
		}
		h.Runs = append(h.Runs, hr)
	}
	return h, nil
}

// emailsOf reads the emails of the members who started rows' runs. Only
// the organisation's present members are named: someone who has left it
// keeps an account (and perhaps other organisations) but is "a former
// member" here, and their address is no longer this organisation's to show.
func (q *Queue) emailsOf(ctx context.Context, orgID uuid.UUID, rows []Run) (map[uuid.UUID]string, error) {
	var ids []uuid.UUID
	for _, r := range rows {
		if r.TriggeredBy != nil {
			ids = append(ids, *r.TriggeredBy)
		}
	}
	out := map[uuid.UUID]string{}
	if len(ids) == 0 {
		return out, nil
	}
	var users []struct {
		ID    uuid.UUID `bun:"id,type:uuid"`
		Email string    `bun:"email"`
	}
	if err := q.s.DB.NewRaw(`SELECT u.id, u.email FROM users u
		JOIN memberships m ON m.user_id = u.id AND m.org_id = ? WHERE u.id = ANY(?)`, orgID, pgdialect.Array(ids)).Scan(ctx, &users); err != nil {
		return nil, fmt.Errorf("run history: who started: %w", err)
	}
	for _, u := range users {
		out[u.ID] = u.Email
	}
	return out, nil
}

// actorOf says who or what started r.
func actorOf(r *Run, emails map[uuid.UUID]string) string {
	switch r.Trigger {
	case TriggerWebhook:
		if r.Provider != nil && *r.Provider != "" {
			return "a " + *r.Provider + " push"
		}
		return "a push"
	case TriggerPullRequest:
		return "a pull request"
	case TriggerRepair:
		return "a repair"
	}
	if r.TriggeredBy != nil && emails[*r.TriggeredBy] != "" {
		return emails[*r.TriggeredBy]
	}
	return "a former member"
}
