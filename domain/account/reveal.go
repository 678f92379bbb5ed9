package account

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"anvil/domain"
	"anvil/domain/internal/dbutil"
)

// RevealTTL is how long a secret waits for the page that shows it. The
// redirect after a form is followed at once; a reveal nobody read in this
// time is purged with the expired sessions.
const RevealTTL = 10 * time.Minute

func revealAAD(sessionID []byte, slot string) []byte {
	return []byte("reveal:" + hex.EncodeToString(sessionID) + ":" + slot)
}

// StashReveal keeps v (a small struct of plaintext secrets) for the next
// page of this browser session that asks for slot: the one-time flash that
// lets a form answer with a redirect and still show its secret once. It is
// sealed under the operator key; a second stash in the same slot replaces
// the first. A principal without a session (an API token) has no next page,
// so nothing is kept.
func (a *Accounts) StashReveal(ctx context.Context, p *domain.Principal, slot string, v any) error {
	if p == nil || len(p.SessionID) == 0 {
		return nil
	}
	plain, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("reveal: encode: %w", err)
	}
	sealed, err := a.s.Keys.Seal(plain, revealAAD(p.SessionID, slot))
	if err != nil {
		return fmt.Errorf("reveal: seal: %w", err)
	}
	_, err = a.s.DB.NewRaw(`INSERT INTO session_reveals (session_id, slot, sealed, expires_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (session_id, slot) DO UPDATE SET sealed = EXCLUDED.sealed, expires_at = EXCLUDED.expires_at`,
		p.SessionID, slot, sealed, a.s.Now().Add(RevealTTL)).Exec(ctx)
	if err != nil {
		return fmt.Errorf("reveal: stash: %w", err)
	}
	return nil
}

// TakeReveal consumes what StashReveal kept for this session and slot into
// v: the row is deleted by the same statement that reads it, so of two
// concurrent reads (a double reload) exactly one shows the secret. It
// reports false when there is nothing (already shown, expired, another
// session's, or sealed under a key that is gone).
func (a *Accounts) TakeReveal(ctx context.Context, p *domain.Principal, slot string, v any) (bool, error) {
	if p == nil || len(p.SessionID) == 0 {
		return false, nil
	}
	var sealed []string
	err := a.s.DB.NewRaw(`DELETE FROM session_reveals WHERE session_id = ? AND slot = ? AND expires_at > ? RETURNING sealed`,
		p.SessionID, slot, a.s.Now()).Scan(ctx, &sealed)
	if err != nil && !dbutil.IsNoRows(err) {
		return false, fmt.Errorf("reveal: take: %w", err)
	}
	if len(sealed) == 0 {
		return false, nil
	}
	plain, err := a.s.Keys.Open(sealed[0], revealAAD(p.SessionID, slot))
	if err != nil {
		return false, nil // the key it was sealed under is gone: nothing to show
	}
	if err := json.Unmarshal(plain, v); err != nil {
		return false, fmt.Errorf("reveal: decode: %w", err)
	}
	return true, nil
}
