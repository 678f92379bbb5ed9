package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"strings"
	"time"

	"anvil/domain/incident"
	"anvil/domain/mail"
)

// E-mail destinations (docs/mail.md) receive what a webhook receives, as a
// message a person reads: the subject names the alert and, for an
// incident, its short id and title; the body says the same in plain text
// and HTML, with the link to the incident or run. Like the Slack text, it
// carries what the cockpit shows — never an event's payload.

// mailReadSQL reads what an e-mail needs beyond the webhook's body: the
// destination's recipients and the incident's number (its short id).
const mailReadSQL = `SELECT array_to_string(d.recipients, E'\n'), COALESCE((SELECT i.number FROM incidents i WHERE i.id = $2 AND i.org_id = d.org_id), 0)
	FROM alert_destinations d WHERE d.id = $1`

// deliverMail sends one alert to an e-mail destination; body is the
// webhook's JSON of the alert (one source for what every kind says).
func (a *Service) deliverMail(ctx context.Context, d dest, args DeliverArgs, attempt int, body []byte, created time.Time) Outcome {
	var m Message
	if err := json.Unmarshal(body, &m); err != nil {
		return Outcome{Stop: fmt.Errorf("alerts: read message: %w", err)}
	}
	var to string
	var number int64
	if err := a.queryRow(ctx, mailReadSQL, pgUUID(d.ID), pgUUID(args.IncidentID)).Scan(&to, &number); err != nil {
		if noRows(err) {
			return Outcome{Done: true}
		}
		return Outcome{Retry: fmt.Errorf("alerts: read recipients: %w", err)}
	}
	short := ""
	if m.Data.Project != nil {
		short = incident.ShortID(m.Data.Project.Slug, number)
	}
	msg := alertMail(m, short, d)
	msg.To = strings.Split(to, "\n")
	return a.sendMail(ctx, d, args.MessageID, args.Alert, attempt, msg, created)
}

// sendMail makes one attempt at msg and logs it with the server's answer:
// a 5xx refusal stops, a 4xx or no answer (refused connection, timeout)
// is retried with the webhooks' back-off.
func (a *Service) sendMail(ctx context.Context, d dest, msgID, kind string, attempt int, msg mail.Message, created time.Time) Outcome {
	at := a.Now()
	if len(msg.To) == 0 {
		var to string
		if err := a.queryRow(ctx, `SELECT array_to_string(recipients, E'\n') FROM alert_destinations WHERE id = $1`, pgUUID(d.ID)).Scan(&to); err != nil {
			if noRows(err) {
				return Outcome{Done: true}
			}
			return Outcome{Retry: fmt.Errorf("alerts: read recipients: %w", err)}
		}
		msg.To = strings.Split(to, "\n")
	}
	l := logLine{msgID: msgID, kind: kind, attempt: attempt, at: at}
	if a.Mail == nil {
		l.msg = "this server sends no e-mail (ANVIL_SMTP_URL is not set); not retried"
		return a.finishLog(ctx, d, l, Outcome{Stop: mail.ErrNotConfigured}, created)
	}
	began := time.Now()
	reply, err := a.Mail.Send(ctx, msg)
	l.lat = max(int(time.Since(began).Milliseconds()), 1)
	if err != nil {
		var me *mail.Error
		if !errors.As(err, &me) {
			me = &mail.Error{Text: "cannot send", Temporary: true}
		}
		l.code, l.msg = me.Code, me.Text
		if !me.Temporary {
			l.msg += "; not retried"
			return a.finishLog(ctx, d, l, Outcome{Stop: errors.New(me.Error())}, created)
		}
		return a.finishLog(ctx, d, l, Outcome{Retry: errors.New(me.Error())}, created)
	}
	l.code, l.answer = reply.Code, reply.Text
	return a.finishLog(ctx, d, l, Outcome{Done: true}, created)
}

// mailView is what the plain text and the HTML of an alert show.
type mailView struct {
	Summary string
	Heading string // the incident's short id and title, or the run's line
	Lines   []string
	URL     string
	Footer  string
}

// alertMail composes the e-mail of an alert from its webhook message.
func alertMail(m Message, short string, d dest) mail.Message {
	v := mailView{Summary: m.Data.Summary, URL: m.Data.URL,
		Footer: fmt.Sprintf("Sent by anvil to the alert destination %q of %s.", d.Name, m.Data.Organisation.Name)}
	subject := "[anvil] " + m.Data.Summary
	switch {
	case m.Data.Incident != nil:
		i := m.Data.Incident
		v.Heading = strings.TrimSpace(short + " " + i.Title)
		subject += ": " + v.Heading
		where := m.Data.Project.Name
		if i.Environment != "" {
			where += " (" + i.Environment + ")"
		}
		v.Lines = append(v.Lines, "Project: "+where,
			fmt.Sprintf("%d events, first seen %s, last seen %s", i.EventCount, i.FirstSeen.UTC().Format(time.RFC1123), i.LastSeen.UTC().Format(time.RFC1123)))
		if i.PRURL != "" {
			v.Lines = append(v.Lines, "Pull request: "+i.PRURL)
		}
		if i.Reason != "" {
			v.Lines = append(v.Lines, "Why: "+i.Reason)
		}
	case m.Data.Run != nil:
		r := m.Data.Run
		v.Heading = m.Data.Project.Name + ": run on " + r.Branch
		if r.SHA != "" {
			v.Heading += " at " + r.SHA[:min(12, len(r.SHA))]
		}
		subject += ": " + v.Heading
		v.Lines = append(v.Lines, "Status: "+r.Status)
		if r.FailureReason != "" {
			v.Lines = append(v.Lines, "Why: "+r.FailureReason)
		}
	default:
		v.Heading = "This destination works."
		subject += " for " + m.Data.Organisation.Name
		v.Lines = append(v.Lines, "anvil will send the alerts of "+m.Data.Organisation.Name+" to these addresses.")
	}
	return renderMail(subject, v)
}

// digestMail is the "and N more" of a destination's folded minute.
func digestMail(publicURL string, d dest, n int) mail.Message {
	v := mailView{Summary: "Alerts folded", Heading: fmt.Sprintf("and %d more alerts in the last minute", n),
		Lines: []string{"They were folded into this one message to keep the inbox readable; the cockpit shows them all."},
		URL:   strings.TrimRight(publicURL, "/") + "/incidents", Footer: fmt.Sprintf("Sent by anvil to the alert destination %q of %s.", d.Name, d.OrgName)}
	return renderMail(fmt.Sprintf("[anvil] and %d more alerts", n), v)
}

var mailHTML = template.Must(template.New("mail").Parse(`<!doctype html>
<html><body style="font-family:system-ui,sans-serif;color:#0f172a;max-width:40rem">
<p style="color:#475569;margin:0">{{.Summary}}</p>
<h1 style="font-size:1.15rem;margin:.25rem 0 1rem">{{.Heading}}</h1>
{{range .Lines}}<p style="margin:.25rem 0">{{.}}</p>
{{end}}<p style="margin:1.25rem 0"><a href="{{.URL}}" style="background:#0f172a;color:#fff;padding:.5rem .9rem;border-radius:.375rem;text-decoration:none">Open in anvil</a></p>
<p style="color:#64748b;font-size:.8rem">{{.Footer}}<br>{{.URL}}</p>
</body></html>
`))

func renderMail(subject string, v mailView) mail.Message {
	var text strings.Builder
	text.WriteString(v.Summary + "\n" + v.Heading + "\n\n")
	for _, l := range v.Lines {
		text.WriteString(l + "\n")
	}
	text.WriteString("\nOpen it in anvil: " + v.URL + "\n\n-- \n" + v.Footer + "\n")
	var html bytes.Buffer
	if err := mailHTML.Execute(&html, v); err != nil {
		html.Reset() // plain text alone rather than half a page
	}
	return mail.Message{Subject: subject, Text: text.String(), HTML: html.String()}
}
