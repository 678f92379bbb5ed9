package alert

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
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
	"github.com/riverqueue/river"
	"github.com/uptrace/bun"
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
	ID          uuid.UUID  `bun:"id"`
	OrgID       uuid.UUID  `bun:"org_id"`
	Name        string     `bun:"name"`
	Kind        string     `bun:"kind"`
	URLEnc      string     `bun:"url_enc"`
	SecretEnc   string     `bun:"secret_enc"`
	OrgSlug     string     `bun:"org_slug"`
	OrgName     string     `bun:"org_name"`
	ProjectID   *uuid.UUID `bun:"project_id"`
	ProjectSlug string     `bun:"project_slug"`
	ProjectName string     `bun:"project_name"`
}

// destSQL reads a destination with its organisation and, when the alert
// has one, its project (of the same organisation), in one query.
const destSQL = `SELECT d.id, d.org_id, d.name, d.kind, d.url_enc, d.secret_enc, o.slug AS org_slug, o.name AS org_name,
	p.id AS project_id, COALESCE(p.slug, '') AS project_slug, COALESCE(p.name, '') AS project_name
	FROM alert_destinations d JOIN organizations o ON o.id = d.org_id
	LEFT JOIN projects p ON p.id = ? AND p.org_id = d.org_id
	WHERE d.id = ?`

// Deliver makes one attempt at one alert: created is when the alert was
// enqueued (retries end 24 h later), attempt counts from 1.
func (a *Service) Deliver(ctx context.Context, args DeliverArgs, attempt int, created time.Time) Outcome {
	var ds []dest
	if err := a.s.DB.NewRaw(destSQL, args.ProjectID, args.DestinationID).Scan(ctx, &ds); err != nil {
		return Outcome{Retry: fmt.Errorf("read destination: %w", err)}
	}
	if len(ds) == 0 || ds[0].OrgID != args.OrgID {
		return Outcome{Done: true} // deleted meanwhile
	}
	d := ds[0]
	body, text, err := a.message(ctx, args, d)
	if errors.Is(err, errGone) {
		return Outcome{Done: true}
	}
	if err != nil {
		return Outcome{Retry: err}
	}
	logID, folded, err := a.reserve(ctx, d, args, attempt)
	if err != nil {
		return Outcome{Retry: err}
	}
	if folded {
		return Outcome{Done: true}
	}
	payload := body
	if d.Kind == KindSlack {
		payload, _ = json.Marshal(map[string]string{"text": text})
	}
	return a.send(ctx, d, logID, args.MessageID, payload, created)
}

// reserve takes a place in the destination's minute (under its row lock,
// so concurrent workers count each other) and logs the attempt as
// sending; beyond PerMinute it logs the alert folded and enqueues the
// minute's digest instead.
func (a *Service) reserve(ctx context.Context, d dest, args DeliverArgs, attempt int) (int64, bool, error) {
	var id int64
	if attempt > 1 || args.Alert == KindTest {
		err := a.s.DB.NewRaw(insertSendingSQL, d.ID, args.MessageID, args.Alert, attempt, a.Now()).Scan(ctx, &id)
		if err != nil {
			return 0, false, fmt.Errorf("alerts: log delivery: %w", err)
		}
		return id, false, nil
	}
	// Far below the bound, one statement counts and logs: concurrent
	// workers can overshoot the count by at most their number, well within
	// the margin. Near the bound, the destination's row lock makes them
	// count one after the other.
	var res struct {
		ID int64 `bun:"id"`
		N  int   `bun:"n"`
	}
	if err := a.s.DB.NewRaw(`WITH c AS (SELECT count(DISTINCT message_id) AS n FROM alert_deliveries WHERE destination_id = ?
			AND created_at > ? AND status IN ('sending', 'delivered', 'failed', 'digested')),
		ins AS (INSERT INTO alert_deliveries (destination_id, message_id, kind, status, attempt, created_at)
			SELECT ?, ?, ?, 'sending', 1, ? FROM c WHERE c.n + ? < ? RETURNING id)
		SELECT COALESCE((SELECT id FROM ins), 0) AS id, (SELECT n FROM c) AS n`,
		d.ID, a.Now().Add(-time.Minute), d.ID, args.MessageID, args.Alert, a.Now(), reserveMargin, a.PerMinute).Scan(ctx, &res); err != nil {
		return 0, false, fmt.Errorf("alerts: log delivery: %w", err)
	}
	if res.ID != 0 {
		return res.ID, false, nil
	}
	folded := false
	err := a.s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewRaw(`SELECT 1 FROM alert_destinations WHERE id = ? FOR UPDATE`, d.ID).Exec(ctx); err != nil {
			return err
		}
		var n int
		if err := tx.NewRaw(`SELECT count(DISTINCT message_id) FROM alert_deliveries WHERE destination_id = ? AND created_at > ?
			AND status IN ('sending', 'delivered', 'failed', 'digested')`, d.ID, a.Now().Add(-time.Minute)).Scan(ctx, &n); err != nil {
			return err
		}
		if n >= a.PerMinute {
			folded = true
			if _, err := tx.NewRaw(`INSERT INTO alert_deliveries (destination_id, message_id, kind, status, created_at)
				VALUES (?, ?, ?, 'folded', ?)`, d.ID, args.MessageID, args.Alert, a.Now()).Exec(ctx); err != nil {
				return err
			}
			return a.s.EnqueueJobsTx(ctx, tx, []river.InsertManyParams{{Args: DigestArgs{DestinationID: d.ID},
				InsertOpts: &river.InsertOpts{ScheduledAt: a.Now().Add(time.Minute)}}})
		}
		return tx.NewRaw(insertSendingSQL, d.ID, args.MessageID, args.Alert, attempt, a.Now()).Scan(ctx, &id)
	})
	if err != nil {
		return 0, false, fmt.Errorf("alerts: log delivery: %w", err)
	}
	return id, folded, nil
}

// reserveMargin is how far below the bound a delivery logs itself without
// taking the destination's lock.
const reserveMargin = 50

const insertSendingSQL = `INSERT INTO alert_deliveries (destination_id, message_id, kind, status, attempt, created_at)
	VALUES (?, ?, ?, 'sending', ?, ?) RETURNING id`

// Digest sends "and N more" for the alerts folded for a destination.
func (a *Service) Digest(ctx context.Context, destinationID uuid.UUID, attempt int, created time.Time) Outcome {
	var ds []dest
	if err := a.s.DB.NewRaw(destSQL, uuid.Nil, destinationID).Scan(ctx, &ds); err != nil {
		return Outcome{Retry: err}
	}
	if len(ds) == 0 {
		return Outcome{Done: true}
	}
	d := ds[0]
	var n int
	var logID int64
	msg := "msg_" + uuid.NewString()
	err := a.s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		res, err := tx.NewRaw(`UPDATE alert_deliveries SET status = 'digested' WHERE destination_id = ? AND status = 'folded'`, d.ID).Exec(ctx)
		if err != nil {
			return err
		}
		m, _ := res.RowsAffected()
		n = int(m)
		if n == 0 {
			return nil
		}
		return tx.NewRaw(`INSERT INTO alert_deliveries (destination_id, message_id, kind, status, attempt, created_at, error)
			VALUES (?, ?, 'digest', 'sending', ?, ?, '') RETURNING id`, d.ID, msg, attempt, a.Now()).Scan(ctx, &logID)
	})
	if err != nil {
		return Outcome{Retry: fmt.Errorf("alerts: digest: %w", err)}
	}
	if n == 0 {
		return Outcome{Done: true}
	}
	text := fmt.Sprintf("anvil: and %d more alerts in the last minute (folded to keep the channel readable)", n)
	body, _ := json.Marshal(map[string]any{"type": "digest", "id": msg, "timestamp": a.Now(), "data": map[string]any{"folded": n, "text": text}})
	if d.Kind == KindSlack {
		body, _ = json.Marshal(map[string]string{"text": text})
	}
	return a.send(ctx, d, logID, msg, body, created)
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

// send posts payload and logs the answer on the log row.
func (a *Service) send(ctx context.Context, d dest, logID int64, msgID string, payload []byte, created time.Time) Outcome {
	url, err := a.s.Keys.Open(d.URLEnc, aad(d.ID, "url"))
	if err != nil {
		return a.finishLog(ctx, d, logID, 0, 0, "cannot decrypt the destination's url", Outcome{Stop: err}, created)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, string(url), bytes.NewReader(payload))
	if err != nil {
		return a.finishLog(ctx, d, logID, 0, 0, err.Error(), Outcome{Stop: err}, created)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "anvil-alerts/1")
	if d.Kind == KindWebhook {
		sec, err := a.s.Keys.Open(d.SecretEnc, aad(d.ID, "secret"))
		if err != nil {
			return a.finishLog(ctx, d, logID, 0, 0, "cannot decrypt the destination's secret", Outcome{Stop: err}, created)
		}
		now := a.Now()
		sig, err := Sign(string(sec), msgID, now, payload)
		if err != nil {
			return a.finishLog(ctx, d, logID, 0, 0, err.Error(), Outcome{Stop: err}, created)
		}
		req.Header.Set("webhook-id", msgID)
		req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
		req.Header.Set("webhook-signature", sig)
	}
	began := time.Now()
	resp, err := a.HTTP.Do(req)
	lat := int(time.Since(began).Milliseconds())
	if err != nil {
		// The error names the URL, whose path may be a secret: say only what failed.
		why := "network error"
		var ue interface{ Timeout() bool }
		if errors.As(err, &ue) && ue.Timeout() {
			why = "timed out"
		}
		return a.finishLog(ctx, d, logID, 0, lat, why, Outcome{Retry: errors.New(why)}, created)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		return a.finishLog(ctx, d, logID, code, lat, "", Outcome{Done: true}, created)
	case code == http.StatusTooManyRequests:
		o := Outcome{Retry: fmt.Errorf("HTTP %d", code), RetryAfter: retryAfter(resp.Header.Get("Retry-After"), a.Now())}
		return a.finishLog(ctx, d, logID, code, lat, fmt.Sprintf("HTTP %d (rate limited)", code), o, created)
	case code >= 500:
		return a.finishLog(ctx, d, logID, code, lat, fmt.Sprintf("HTTP %d", code), Outcome{Retry: fmt.Errorf("HTTP %d", code)}, created)
	default:
		return a.finishLog(ctx, d, logID, code, lat, fmt.Sprintf("HTTP %d: not retried", code), Outcome{Stop: fmt.Errorf("HTTP %d", code)}, created)
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

// finishLog records the attempt's answer and the destination's health.
// A retry past 24 h after the alert was caused stops instead.
func (a *Service) finishLog(ctx context.Context, d dest, logID int64, code, lat int, msg string, o Outcome, created time.Time) Outcome {
	if o.Retry != nil && a.Now().Sub(created) >= RetryFor {
		o = Outcome{Stop: fmt.Errorf("%w; retried for 24 h, giving up", o.Retry)}
		msg += "; retried for 24 h, giving up"
	}
	status := "delivered"
	if !o.Done {
		status = "failed"
	}
	var codeP, latP *int
	if code != 0 {
		codeP = &code
	}
	if lat != 0 || code != 0 {
		latP = &lat
	}
	health := `UPDATE alert_destinations SET failing_since = COALESCE(failing_since, ?) WHERE id = ?`
	if o.Done {
		health = `UPDATE alert_destinations SET failing_since = NULL, last_success = ? WHERE id = ?`
	}
	if _, err := a.s.DB.NewRaw(`WITH l AS (UPDATE alert_deliveries SET status = ?, status_code = ?, latency_ms = ?, error = ? WHERE id = ?)
		`+health, status, codeP, latP, msg, logID, a.Now(), d.ID).Exec(ctx); err != nil {
		a.s.Log.Warn("alerts: log delivery", "destination", d.ID, "error", err)
	}
	return o
}

var errGone = errors.New("alerts: the alert's object is gone")
