package alert

import (
	"anvil/domain/incident"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"anvil/domain"
)

// PerMinute is the default of Service.PerMinute.
const PerMinute = 20

// Outcome is what became of one attempt, for the worker to tell River.
type Outcome struct {
	Done       bool          // delivered, folded, or nothing to deliver
	Stop       error         // a permanent failure: no more attempts
	Retry      error         // a transient failure: try again after back-off
	RetryAfter time.Duration // a 429's Retry-After (0: River's back-off)
}

// Backoff is the wait before attempt n+1: 5 s doubling, at most 30 min.
func Backoff(attempt int) time.Duration {
	d := 5 * time.Second
	for i := 1; i < attempt && d < 30*time.Minute; i++ {
		d *= 2
	}
	return min(d, 30*time.Minute)
}

type dest struct {
	ID          uuid.UUID
	OrgID       uuid.UUID
	Name        string
	Kind        string
	URLEnc      string
	SecretEnc   string
	OrgSlug     string
	OrgName     string
	ProjectID   *uuid.UUID
	ProjectSlug string
	ProjectName string
	// Incident is the alert's incident, read with the destination (nil:
	// none asked for, or gone).
	Incident *incident.Incident
}

// deliverySQL reads a destination with its organisation and, when the
// alert has them, its project and incident (of the same organisation);
// with $5 it also takes the alert's place in the destination's clock
// minute — sent is then the count with it, NULL when the minute was full.
// One statement, constant text with $n arguments: each connection
// prepares it once, however many alerts it delivers. The place is taken
// under the minute row's lock, so concurrent workers (of any process)
// count one after the other, for the length of this statement; and
// without waiting for the WAL flush (see asyncCommit).
const deliverySQL = `WITH c AS (
		INSERT INTO alert_minutes (destination_id, minute, sent)
		SELECT d.id, $4, 1 FROM alert_destinations d, ` + asyncCommit + ` WHERE d.id = $1 AND $5
		ON CONFLICT (destination_id, minute) DO UPDATE SET sent = alert_minutes.sent + 1 WHERE alert_minutes.sent < $6
		RETURNING sent)
	SELECT d.org_id, d.name, d.kind, d.url_enc, d.secret_enc, o.slug, o.name,
	p.id, COALESCE(p.slug, ''), COALESCE(p.name, ''),
	i.id, COALESCE(i.title, ''), COALESCE(i.exception_type, ''), COALESCE(i.environment, ''), COALESCE(i.event_count, 0),
	i.first_seen, i.last_seen, COALESCE(i.status, ''), COALESCE(i.pr_url, ''), COALESCE(i.needs_human_reason, ''),
	(SELECT sent FROM c), COALESCE(i.number, 0)
	FROM alert_destinations d JOIN organizations o ON o.id = d.org_id
	LEFT JOIN ` + domain.AllProjects + ` p ON p.id = $2 AND p.org_id = d.org_id
	LEFT JOIN incidents i ON i.id = $3 AND i.org_id = d.org_id
	WHERE d.id = $1`

// asyncCommit is a one-row FROM item that turns synchronous_commit off
// for the statement's own (implicit) transaction: the count and the log of
// a delivery do not wait for the WAL flush, which cost more than the rest
// of a delivery's statements together. A Postgres crash may lose the last
// fraction of a second of them — a few log lines, a few counts — never a
// delivery: the jobs are River's, committed as usual
// (docs/contracts/alerts.md, "Delivery log").
const asyncCommit = `(SELECT set_config('synchronous_commit', 'off', true)) AS async_commit`

// row is what pgx's and database/sql's single-row queries have in common.
type row interface{ Scan(dest ...any) error }

// queryRow runs a constant $n query on the pgx pool (no database/sql
// connection wrapped around each statement), or on database/sql when the
// store has no pool.
func (a *Service) queryRow(ctx context.Context, q string, args ...any) row {
	if a.s.Pool != nil {
		return a.s.Pool.QueryRow(ctx, q, args...)
	}
	return a.s.DB.DB.QueryRowContext(ctx, q, args...)
}

// exec is queryRow for statements without rows.
func (a *Service) exec(ctx context.Context, q string, args ...any) error {
	var err error
	if a.s.Pool != nil {
		_, err = a.s.Pool.Exec(ctx, q, args...)
	} else {
		_, err = a.s.DB.DB.ExecContext(ctx, q, args...)
	}
	return err
}

func noRows(err error) bool { return errors.Is(err, sql.ErrNoRows) || errors.Is(err, pgx.ErrNoRows) }

// readDest reads destination id for an alert of projectID and incidentID
// (uuid.Nil: none); found is false when the destination is gone. With
// count, it counts the alert in the destination's minute; full reports
// the minute full (the alert is not counted then).
func (a *Service) readDest(ctx context.Context, id, projectID, incidentID uuid.UUID, count bool) (d dest, found, full bool, err error) {
	var (
		projID, incID       pgtype.UUID
		firstSeen, lastSeen pgtype.Timestamptz
		sent                pgtype.Int4
		in                  incident.Incident
	)
	minute := a.Now().UTC().Truncate(time.Minute)
	err = a.queryRow(ctx, deliverySQL, pgUUID(id), pgUUID(projectID), pgUUID(incidentID), minute, count, a.PerMinute).Scan(
		&d.OrgID, &d.Name, &d.Kind, &d.URLEnc, &d.SecretEnc, &d.OrgSlug, &d.OrgName, &projID, &d.ProjectSlug, &d.ProjectName,
		&incID, &in.Title, &in.ExceptionType, &in.Environment, &in.EventCount, &firstSeen, &lastSeen, &in.Status, &in.PRURL,
		&in.NeedsHumanReason, &sent, &in.Number)
	if noRows(err) {
		return d, false, false, nil
	}
	if err != nil {
		return d, false, false, fmt.Errorf("alerts: read destination: %w", err)
	}
	d.ID = id
	if projID.Valid {
		p := uuid.UUID(projID.Bytes)
		d.ProjectID = &p
	}
	if incID.Valid {
		in.ID, in.FirstSeen, in.LastSeen = uuid.UUID(incID.Bytes), firstSeen.Time, lastSeen.Time
		d.Incident = &in
	}
	if count && sent.Valid && sent.Int32 == 1 {
		// A new minute: the older ones are done with.
		if err := a.exec(ctx, `DELETE FROM alert_minutes WHERE destination_id = $1 AND minute < $2`, pgUUID(id), minute); err != nil {
			a.s.Log.Warn("alerts: forget old minutes", "destination", id, "error", err)
		}
	}
	return d, true, count && !sent.Valid, nil
}

func pgUUID(id uuid.UUID) pgtype.UUID { return pgtype.UUID{Bytes: id, Valid: true} }

// Deliver makes one attempt at one alert: created is when the alert was
// enqueued (retries end 24 h later), attempt counts from 1.
//
// An attempt costs two statements besides River's: the destination with
// what the message shows, counting a first attempt of a real alert in the
// destination's minute; and the attempt's line in the log, writing the
// destination's health only when it changed (docs/contracts/alerts.md).
func (a *Service) Deliver(ctx context.Context, args DeliverArgs, attempt int, created time.Time) Outcome {
	d, found, full, err := a.readDest(ctx, args.DestinationID, args.ProjectID, args.IncidentID, attempt == 1 && args.Alert != KindTest)
	if err != nil {
		return Outcome{Retry: err}
	}
	if !found || d.OrgID != args.OrgID {
		return Outcome{Done: true} // deleted meanwhile
	}
	body, text, err := a.message(ctx, args, d)
	if errors.Is(err, errGone) {
		return Outcome{Done: true}
	}
	if err != nil {
		return Outcome{Retry: err}
	}
	if full {
		if err := a.fold(ctx, d, args); err != nil {
			return Outcome{Retry: err}
		}
		return Outcome{Done: true}
	}
	if d.Kind == KindEmail {
		return a.deliverMail(ctx, d, args, attempt, body, created)
	}
	payload := body
	if d.Kind == KindSlack {
		payload, _ = json.Marshal(map[string]string{"text": text})
	}
	return a.send(ctx, d, args.MessageID, args.Alert, attempt, payload, created)
}

// fold logs an alert beyond its destination's minute folded and enqueues
// the minute's digest.
func (a *Service) fold(ctx context.Context, d dest, args DeliverArgs) error {
	now := a.Now()
	err := a.s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewRaw(`INSERT INTO alert_deliveries (destination_id, message_id, kind, status, created_at)
			VALUES (?, ?, ?, 'folded', ?)`, d.ID, args.MessageID, args.Alert, now).Exec(ctx); err != nil {
			return err
		}
		return a.s.EnqueueJobsTx(ctx, tx, []river.InsertManyParams{{Args: DigestArgs{DestinationID: d.ID},
			InsertOpts: &river.InsertOpts{ScheduledAt: now.UTC().Truncate(time.Minute).Add(time.Minute)}}})
	})
	if err != nil {
		return fmt.Errorf("alerts: fold: %w", err)
	}
	return nil
}

// Digest sends "and N more" for the alerts folded for a destination.
//
// The folded rows become 'digested' only once the digest is delivered: a
// 5xx, a timeout or a 429 leaves them folded, and River's retry of this job
// counts and sends them again (docs/contracts/alerts.md, "Delivery"). They
// are claimed with FOR UPDATE SKIP LOCKED in a transaction that lasts the
// attempt (at most the client's 10 s), so that the next minute's digest for
// the same destination, running meanwhile, neither counts them too nor
// waits for them. Should the commit fail after a delivery, the retry sends
// the digest again: at least once, never lost.
func (a *Service) Digest(ctx context.Context, destinationID uuid.UUID, attempt int, created time.Time) Outcome {
	d, found, _, err := a.readDest(ctx, destinationID, uuid.Nil, uuid.Nil, false)
	if err != nil {
		return Outcome{Retry: err}
	}
	if !found {
		return Outcome{Done: true}
	}
	// One message id for every attempt of this job, as for alerts (the
	// receiver's webhook-id deduplicates a digest that arrived twice).
	msg := "msg_" + uuid.NewSHA1(d.ID, []byte("digest "+created.UTC().Format(time.RFC3339Nano))).String()
	var o Outcome
	errNotSent := errors.New("alerts: digest not delivered")
	err = a.s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var ids []int64
		if err := tx.NewRaw(`SELECT id FROM alert_deliveries WHERE destination_id = ? AND status = 'folded'
			ORDER BY id FOR UPDATE SKIP LOCKED`, d.ID).Scan(ctx, &ids); err != nil {
			return err
		}
		n := len(ids)
		if n == 0 {
			o = Outcome{Done: true}
			return nil
		}
		text := fmt.Sprintf("anvil: and %d more alerts in the last minute (folded to keep the channel readable)", n)
		body, _ := json.Marshal(map[string]any{"type": "digest", "id": msg, "timestamp": a.Now(), "data": map[string]any{"folded": n, "text": text}})
		if d.Kind == KindSlack {
			body, _ = json.Marshal(map[string]string{"text": text})
		}
		if d.Kind == KindEmail {
			o = a.sendMail(ctx, d, msg, "digest", attempt, digestMail(a.PublicURL, d, n), created)
		} else {
			o = a.send(ctx, d, msg, "digest", attempt, body, created)
		}
		if !o.Done {
			return errNotSent // the rows stay folded for the next attempt
		}
		_, err := tx.NewRaw(`UPDATE alert_deliveries SET status = 'digested' WHERE id IN (?)`, bun.List(ids)).Exec(ctx)
		return err
	})
	if err != nil && !errors.Is(err, errNotSent) {
		return Outcome{Retry: fmt.Errorf("alerts: digest: %w", err)}
	}
	return o
}

// Sign is the Standard Webhooks signature of body: v1,<base64 HMAC-SHA256
// of "id.timestamp.body" under the secret's bytes>.
func Sign(secret, msgID string, ts time.Time, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return "", fmt.Errorf("alerts: secret is not base64: %w", err)
	}
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%d.", msgID, ts.Unix())
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)), nil
}

// send posts payload and logs the attempt with its answer.
func (a *Service) send(ctx context.Context, d dest, msgID, kind string, attempt int, payload []byte, created time.Time) Outcome {
	at := a.Now()
	logIt := func(code, lat int, msg string, o Outcome) Outcome {
		return a.finishLog(ctx, d, logLine{msgID: msgID, kind: kind, attempt: attempt, at: at, code: code, lat: lat, msg: msg}, o, created)
	}
	// The URL is sealed at rest (its path is often the credential: Slack's
	// /services/T…/B…/secret): no error of an attempt may carry it, neither
	// into the delivery log nor into what River keeps of the job
	// (river_job.errors) and logs. Every Outcome below holds a fixed text.
	url, err := a.s.Keys.Open(d.URLEnc, aad(d.ID, "url"))
	if err != nil {
		return logIt(0, 0, "cannot decrypt the destination's url", Outcome{Stop: errors.New("alerts: cannot decrypt the destination's url")})
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, string(url), bytes.NewReader(payload))
	if err != nil {
		// url.Parse's error quotes the URL whole.
		return logIt(0, 0, "the destination's url cannot be used", Outcome{Stop: errors.New("alerts: the destination's url cannot be used")})
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "anvil-alerts/1")
	if d.Kind == KindWebhook {
		sec, err := a.s.Keys.Open(d.SecretEnc, aad(d.ID, "secret"))
		if err != nil {
			return logIt(0, 0, "cannot decrypt the destination's secret", Outcome{Stop: errors.New("alerts: cannot decrypt the destination's secret")})
		}
		sig, err := Sign(string(sec), msgID, at, payload)
		if err != nil {
			return logIt(0, 0, err.Error(), Outcome{Stop: err})
		}
		req.Header.Set("webhook-id", msgID)
		req.Header.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
		req.Header.Set("webhook-signature", sig)
	}
	began := time.Now()
	resp, err := a.HTTP.Do(req)
	lat := int(time.Since(began).Milliseconds())
	if err != nil {
		if errors.Is(err, ErrPrivateDestination) {
			// The address the name resolves to now is private: the
			// operator has not allowed it, and retrying will not help.
			// err is a *url.Error naming the URL: keep the sentinel only.
			return logIt(0, lat, "refused: the destination resolves to a private address", Outcome{Stop: ErrPrivateDestination})
		}
		// The error names the URL, whose path may be a secret: say only what failed.
		why := "network error"
		var ue interface{ Timeout() bool }
		if errors.As(err, &ue) && ue.Timeout() {
			why = "timed out"
		}
		return logIt(0, lat, why, Outcome{Retry: errors.New(why)})
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		return logIt(code, lat, "", Outcome{Done: true})
	case code == http.StatusTooManyRequests:
		o := Outcome{Retry: fmt.Errorf("HTTP %d", code), RetryAfter: retryAfter(resp.Header.Get("Retry-After"), a.Now())}
		return logIt(code, lat, fmt.Sprintf("HTTP %d (rate limited)", code), o)
	case code >= 500:
		return logIt(code, lat, fmt.Sprintf("HTTP %d", code), Outcome{Retry: fmt.Errorf("HTTP %d", code)})
	case code >= 300 && code < 400:
		return logIt(code, lat, fmt.Sprintf("HTTP %d: redirects are not followed; not retried", code), Outcome{Stop: fmt.Errorf("HTTP %d", code)})
	default:
		return logIt(code, lat, fmt.Sprintf("HTTP %d: not retried", code), Outcome{Stop: fmt.Errorf("HTTP %d", code)})
	}
}

// retryAfter reads a Retry-After header: seconds or an HTTP date, at most
// an hour.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	var d time.Duration
	if s, err := strconv.Atoi(strings.TrimSpace(h)); err == nil {
		d = time.Duration(s) * time.Second
	} else if t, err := http.ParseTime(h); err == nil {
		d = t.Sub(now)
	}
	return max(min(d, time.Hour), time.Second)
}

// logLine is one attempt as the delivery log keeps it.
type logLine struct {
	msgID, kind string
	attempt     int
	at          time.Time
	code, lat   int
	msg         string
	answer      string // an SMTP server's reply to an accepted e-mail
}

// The attempt's line in the log and, in the same statement, the
// destination's health — written only when it changes (or the last
// success is a minute old), so that concurrent deliveries to one
// destination do not queue on its row.
const (
	logDeliveredSQL = `WITH l AS (INSERT INTO alert_deliveries (destination_id, message_id, kind, status, status_code, latency_ms, error, attempt, created_at)
		SELECT $1, $2, $3, 'delivered', $4, $5, $6, $7, $8 FROM ` + asyncCommit + `)
		UPDATE alert_destinations SET failing_since = NULL, last_success = $9
		WHERE id = $1 AND (failing_since IS NOT NULL OR last_success IS NULL OR last_success < $10)`
	logAnsweredSQL = `WITH l AS (INSERT INTO alert_deliveries (destination_id, message_id, kind, status, status_code, latency_ms, error, attempt, created_at, answer)
		SELECT $1, $2, $3, 'delivered', $4, $5, $6, $7, $8, $11 FROM ` + asyncCommit + `)
		UPDATE alert_destinations SET failing_since = NULL, last_success = $9
		WHERE id = $1 AND (failing_since IS NOT NULL OR last_success IS NULL OR last_success < $10)`
	logFailedSQL = `WITH l AS (INSERT INTO alert_deliveries (destination_id, message_id, kind, status, status_code, latency_ms, error, attempt, created_at)
		SELECT $1, $2, $3, 'failed', $4, $5, $6, $7, $8 FROM ` + asyncCommit + `)
		UPDATE alert_destinations SET failing_since = $9 WHERE id = $1 AND failing_since IS NULL`
)

// finishLog records the attempt's answer and the destination's health.
// A retry past 24 h after the alert was caused stops instead.
func (a *Service) finishLog(ctx context.Context, d dest, l logLine, o Outcome, created time.Time) Outcome {
	now := a.Now()
	if o.Retry != nil && now.Sub(created) >= RetryFor {
		o = Outcome{Stop: fmt.Errorf("%w; retried for 24 h, giving up", o.Retry)}
		l.msg += "; retried for 24 h, giving up"
	}
	var codeP, latP *int
	if l.code != 0 {
		codeP = &l.code
	}
	if l.lat != 0 || l.code != 0 {
		latP = &l.lat
	}
	q, args := logFailedSQL, []any{pgUUID(d.ID), l.msgID, l.kind, codeP, latP, l.msg, l.attempt, l.at, now}
	if o.Done {
		q, args = logDeliveredSQL, append(args, now.Add(-time.Minute))
		if l.answer != "" {
			q, args = logAnsweredSQL, append(args, l.answer)
		}
	}
	if err := a.exec(ctx, q, args...); err != nil {
		a.s.Log.Warn("alerts: log delivery", "destination", d.ID, "error", err)
	}
	return o
}

var errGone = errors.New("alerts: the alert's object is gone")
