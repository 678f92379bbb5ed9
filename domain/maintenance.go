package domain

import (
	"context"
	"fmt"

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
// expression of its additional authenticated data.
var sealedColumns = []struct{ table, id, col, aad string }{
	{"projects", "id::text", "provider_token_enc", "'project:' || id || ':provider_token'"},
	// Webhook secrets; the AAD matches secretAAD and signingTokenAAD.
	{"project_webhooks", "project_id::text || ':' || provider", "secret_enc", "'webhook:' || project_id || ':' || provider || ':secret'"},
	{"project_webhooks", "project_id::text || ':' || provider", "signing_token_enc", "'webhook:' || project_id || ':' || provider || ':signing_token'"},
	// Run secrets; the AAD matches runsecret's aad.
	{"run_secrets", "project_id::text || ':' || name", "sealed", "'run_secret:' || project_id || ':' || name"},
	// Browser connections' public tokens; the AAD matches feed's tokenAAD.
	{"feed_connections", "id::text", "token_enc", "'feed_connection:' || id || ':token'"},
}
