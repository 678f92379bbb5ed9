package domain

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// RotateSecrets re-encrypts every stored secret that is not sealed under the
// current key (provider tokens, webhook secrets), returning how many changed.
func (s *Store) RotateSecrets(ctx context.Context) (int, error) {
	n := 0
	for _, t := range sealedColumns {
		var rows []struct {
			ID  string `bun:"id"`
			Enc string `bun:"enc"`
			AAD string `bun:"aad"`
		}
		q := fmt.Sprintf(`SELECT %s AS id, %s AS enc, %s AS aad FROM %s WHERE %s <> ''`, t.id, t.col, t.aad, t.table, t.col)
		if err := s.DB.NewRaw(q).Scan(ctx, &rows); err != nil {
			return n, fmt.Errorf("rotate %s: %w", t.table, err)
		}
		for _, r := range rows {
			if !s.Keys.NeedsRotation(r.Enc) {
				continue
			}
			plain, err := s.Keys.Open(r.Enc, []byte(r.AAD))
			if err != nil {
				return n, fmt.Errorf("rotate %s %s: %w", t.table, r.ID, err)
			}
			enc, err := s.Keys.Seal(plain, []byte(r.AAD))
			if err != nil {
				return n, err
			}
			q := fmt.Sprintf(`UPDATE %s SET %s = ? WHERE %s = ? AND %s = ?`, t.table, t.col, t.id, t.col)
			if _, err := s.DB.NewRaw(q, enc, r.ID, r.Enc).Exec(ctx); err != nil {
				return n, fmt.Errorf("rotate %s %s: %w", t.table, r.ID, err)
			}
			n++
		}
	}
	return n, nil
}

// SealedKeyIDs counts the stored sealed secrets by the id of the key that
// sealed them ("v1.<keyid>.<data>"): `anvil admin check` tells an operator
// whose key cannot open the database's secrets (a restore under another key,
// a rotation whose previous key was dropped too early).
func SealedKeyIDs(ctx context.Context, idb bun.IDB) (map[string]int, error) {
	ids := map[string]int{}
	for _, t := range sealedColumns {
		var rows []struct {
			ID string `bun:"id"`
			N  int    `bun:"n"`
		}
		q := fmt.Sprintf(`SELECT split_part(%s, '.', 2) AS id, count(*) AS n FROM %s WHERE %s <> '' GROUP BY 1`, t.col, t.table, t.col)
		if err := idb.NewRaw(q).Scan(ctx, &rows); err != nil {
			return nil, fmt.Errorf("sealed keys of %s: %w", t.table, err)
		}
		for _, r := range rows {
			ids[r.ID] += r.N
		}
	}
	return ids, nil
}

// sealedColumns lists every column that holds a sealed secret, with the SQL
// expression of its additional authenticated data, of the organisation it
// belongs to, and what forgetting it means: a value that may be absent is
// cleared, a row that is nothing without its secret is deleted.
var sealedColumns = []struct {
	table, id, col, aad, org, what string
	deleteRow                      bool
}{
	{"projects", "id::text", "provider_token_enc", "'project:' || id || ':provider_token'",
		"org_id", "provider token", false},
	// Webhook secrets; the AAD matches secretAAD and signingTokenAAD. A
	// webhook without its secret cannot verify a delivery: it goes, and is
	// created again with a new secret.
	{"project_webhooks", "project_id::text || ':' || provider", "secret_enc", "'webhook:' || project_id || ':' || provider || ':secret'",
		"(SELECT org_id FROM " + AllProjects + " p WHERE p.id = project_webhooks.project_id)", "webhook", true},
	{"project_webhooks", "project_id::text || ':' || provider", "signing_token_enc", "'webhook:' || project_id || ':' || provider || ':signing_token'",
		"(SELECT org_id FROM " + AllProjects + " p WHERE p.id = project_webhooks.project_id)", "webhook signing token", false},
	// Run secrets; the AAD matches runsecret's aad.
	{"run_secrets", "project_id::text || ':' || name", "sealed", "'run_secret:' || project_id || ':' || name",
		"(SELECT org_id FROM " + AllProjects + " p WHERE p.id = run_secrets.project_id)", "run secret", true},
	// Browser connections' public tokens; the AAD matches feed's tokenAAD.
	// The connection keeps working (its hash stays); only showing the token
	// again is lost.
	{"feed_connections", "id::text", "token_enc", "'feed_connection:' || id || ':token'",
		"org_id", "browser connection token", false},
	// Alert destinations' URL and signing secret; the AAD matches alert's
	// aad. A destination without its URL (or whose receiver checks a lost
	// secret) cannot deliver: it goes, with its deliveries.
	{"alert_destinations", "id::text", "url_enc", "'alert_destination:' || id || ':url'",
		"org_id", "alert destination", true},
	{"alert_destinations", "id::text", "secret_enc", "'alert_destination:' || id || ':secret'",
		"org_id", "alert destination", true},
}

// ErrKeyHeld refuses to forget the secrets of a key anvil holds: they open.
var ErrKeyHeld = errors.New("that key is ANVIL_SECRET_KEY or ANVIL_SECRET_KEY_PREVIOUS: its secrets open, there is nothing to forget")

// ErrBadKeyID is a key id that is not 8 hexadecimal characters.
var ErrBadKeyID = errors.New("a key id is 8 hexadecimal characters, as `anvil serve` and `anvil admin check` print them")

var keyIDPattern = regexp.MustCompile(`^[0-9a-f]{8}$`)

// ForgetSecrets erases every stored secret sealed under keyID, a key the
// operator no longer holds (docs/install.md, "A lost key"): provider tokens
// and browser tokens are cleared, webhooks, run secrets and alert
// destinations that are nothing without theirs are deleted. One audit entry
// per organisation says what went, in the same transaction. It returns the
// count of each kind erased.
func (s *Store) ForgetSecrets(ctx context.Context, keyID string) (map[string]int, error) {
	if !keyIDPattern.MatchString(keyID) {
		return nil, ErrBadKeyID
	}
	if s.Keys.Holds(keyID) {
		return nil, ErrKeyHeld
	}
	total := map[string]int{}
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		perOrg := map[uuid.UUID]map[string]int{}
		for _, t := range sealedColumns {
			var rows []struct {
				ID  string    `bun:"id"`
				Org uuid.UUID `bun:"org"`
			}
			q := fmt.Sprintf(`SELECT %s AS id, %s AS org FROM %s WHERE %s <> '' AND split_part(%s, '.', 2) = ? FOR UPDATE`,
				t.id, t.org, t.table, t.col, t.col)
			if err := tx.NewRaw(q, keyID).Scan(ctx, &rows); err != nil {
				return fmt.Errorf("forget %s: %w", t.table, err)
			}
			for _, r := range rows {
				q := fmt.Sprintf(`UPDATE %s SET %s = '' WHERE %s = ?`, t.table, t.col, t.id)
				if t.deleteRow {
					q = fmt.Sprintf(`DELETE FROM %s WHERE %s = ?`, t.table, t.id)
				}
				res, err := tx.NewRaw(q, r.ID).Exec(ctx)
				if err != nil {
					return fmt.Errorf("forget %s %s: %w", t.table, r.ID, err)
				}
				if n, _ := res.RowsAffected(); n == 0 {
					continue // deleted already, for its other secret
				}
				if perOrg[r.Org] == nil {
					perOrg[r.Org] = map[string]int{}
				}
				perOrg[r.Org][t.what]++
				total[t.what]++
			}
		}
		for org, counts := range perOrg {
			if err := RecordAuditIn(ctx, tx, org, nil, OperatorActor, AuditSecretsForgotten, keyID,
				map[string]any{"key_id": keyID, "erased": counts}); err != nil {
				return err
			}
		}
		return nil
	})
	return total, err
}
