package alert

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/incident"
	"anvil/domain/run"
)

// Message is the generic webhook's JSON body (docs/contracts/alerts.md).
// It carries what the cockpit shows of an incident or a run — the scrubbed
// title and counts, never an event's payload, a token or a client address.
type Message struct {
	Type      string    `json:"type"`
	ID        string    `json:"id"`
	Timestamp time.Time `json:"timestamp"`
	Data      Data      `json:"data"`
}

// Data is the message's subject.
type Data struct {
	Summary      string        `json:"summary"`
	Organisation Ref           `json:"organisation"`
	Project      *Ref          `json:"project,omitempty"`
	URL          string        `json:"url"`
	Incident     *IncidentData `json:"incident,omitempty"`
	Run          *RunData      `json:"run,omitempty"`
}

// Ref names an organisation or a project.
type Ref struct {
	ID   uuid.UUID `json:"id"`
	Slug string    `json:"slug"`
	Name string    `json:"name"`
}

// IncidentData is an incident in a message.
type IncidentData struct {
	ID uuid.UUID `json:"id"`
	// ShortID is the incident's short id as the cockpit shows it (SHOP-12).
	ShortID     string    `json:"short_id,omitempty"`
	Title       string    `json:"title"`
	Type        string    `json:"type"`
	Environment string    `json:"environment"`
	EventCount  int64     `json:"event_count"`
	FirstSeen   time.Time `json:"first_seen"`
	LastSeen    time.Time `json:"last_seen"`
	Status      string    `json:"status"`
	PRURL       string    `json:"pr_url,omitempty"`
	Reason      string    `json:"needs_human_reason,omitempty"`
}

// RunData is a run in a message.
type RunData struct {
	ID              uuid.UUID `json:"id"`
	Status          string    `json:"status"`
	Branch          string    `json:"branch"`
	SHA             string    `json:"sha,omitempty"`
	Trigger         string    `json:"trigger"`
	DurationSeconds *float64  `json:"duration_seconds,omitempty"`
	FailureReason   string    `json:"failure_reason,omitempty"`
}

var summaries = map[string]string{
	domain.AlertIncidentNew:       "New incident",
	domain.AlertIncidentRegressed: "Regression: a closed incident is back",
	domain.AlertIncidentApproval:  "Incident waiting for approval",
	domain.AlertRepairPROpened:    "Repair pull request opened",
	domain.AlertRepairNeedsHuman:  "Repair needs a human",
	domain.AlertRunFailed:         "Default branch failed",
	domain.AlertRunRecovered:      "Default branch recovered",
	domain.AlertFixFailed:         "Fix failed: the incident recurred in a release that contains its fix",
	KindTest:                      "Test alert",
}

// slackEscape makes s plain text in a Slack message: Slack reads <…> as a
// mention or a link (<!channel> pings a whole channel, <https://x|text>
// shows a disguised link) and &…; as an entity, and asks senders to escape
// exactly these three characters
// (https://api.slack.com/reference/surfaces/formatting#escaping). Every
// value anvil puts into the chat text goes through it: titles and reasons
// come from production input, names and branches from members.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace

// message builds the webhook body and the chat text of args, from the
// rows as they are now.
func (a *Service) message(ctx context.Context, args DeliverArgs, d dest) ([]byte, string, error) {
	m := Message{Type: args.Alert, ID: args.MessageID, Timestamp: a.Now(), Data: Data{Summary: summaries[args.Alert]}}
	orgs := []Ref{{ID: d.OrgID, Slug: d.OrgSlug, Name: d.OrgName}}
	m.Data.Organisation = orgs[0]
	base := strings.TrimRight(a.PublicURL, "/")
	m.Data.URL = base + "/settings/alerts"
	if args.ProjectID != uuid.Nil {
		if d.ProjectID == nil {
			return nil, "", errGone
		}
		m.Data.Project = &Ref{ID: *d.ProjectID, Slug: d.ProjectSlug, Name: d.ProjectName}
	}
	var lines []string
	switch {
	case args.IncidentID != uuid.Nil:
		if d.Incident == nil {
			return nil, "", errGone
		}
		i := d.Incident
		m.Data.Incident = &IncidentData{ID: i.ID, ShortID: incident.ShortID(d.ProjectSlug, i.Number), Title: i.Title, Type: i.ExceptionType, Environment: i.Environment, EventCount: i.EventCount,
			FirstSeen: i.FirstSeen, LastSeen: i.LastSeen, Status: i.Status, PRURL: i.PRURL, Reason: i.NeedsHumanReason}
		m.Data.URL = base + "/incidents/" + i.ID.String()
		head := "*" + m.Data.Summary + "*"
		if short := m.Data.Incident.ShortID; short != "" {
			head += " " + short
		}
		lines = append(lines, fmt.Sprintf("%s in %s (%s): %s", head, slackEscape(m.Data.Project.Name), slackEscape(i.Environment), slackEscape(i.Title)),
			fmt.Sprintf("%d events, first seen %s, last seen %s", i.EventCount, i.FirstSeen.Format(time.RFC3339), i.LastSeen.Format(time.RFC3339)))
		if i.PRURL != "" {
			lines = append(lines, "Pull request: "+slackEscape(i.PRURL))
		}
		if i.NeedsHumanReason != "" {
			lines = append(lines, "Why: "+slackEscape(i.NeedsHumanReason))
		}
	case args.RunID != uuid.Nil:
		var rs []run.Run
		if err := a.s.DB.NewSelect().Model(&rs).Where("id = ?", args.RunID).Scan(ctx); err != nil {
			return nil, "", fmt.Errorf("alerts: read run: %w", err)
		}
		if len(rs) == 0 {
			return nil, "", errGone
		}
		r := rs[0]
		rd := &RunData{ID: r.ID, Status: r.State, Branch: r.Branch, Trigger: r.Trigger}
		if r.CommitSHA != nil {
			rd.SHA = *r.CommitSHA
		}
		if r.FailureReason != nil {
			rd.FailureReason = *r.FailureReason
		}
		if r.StartedAt != nil && r.FinishedAt != nil {
			s := r.FinishedAt.Sub(*r.StartedAt).Seconds()
			rd.DurationSeconds = &s
		}
		m.Data.Run = rd
		m.Data.URL = base + "/runs/" + r.ID.String()
		line := fmt.Sprintf("*%s* in %s: run on %s", m.Data.Summary, slackEscape(m.Data.Project.Name), slackEscape(r.Branch))
		if rd.SHA != "" {
			line += " at " + slackEscape(rd.SHA[:min(12, len(rd.SHA))])
		}
		line += " " + slackEscape(r.State)
		if rd.FailureReason != "" {
			line += " (" + slackEscape(rd.FailureReason) + ")"
		}
		lines = append(lines, line)
	default:
		lines = append(lines, fmt.Sprintf("*%s* from anvil for %s: this destination works.", m.Data.Summary, slackEscape(orgs[0].Name)))
	}
	lines = append(lines, slackEscape(m.Data.URL))
	body, err := json.Marshal(m)
	if err != nil {
		return nil, "", fmt.Errorf("alerts: encode: %w", err)
	}
	return body, strings.Join(lines, "\n"), nil
}
