package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"anvil/domain"
)

// foreignKeyError is a database whose secrets were sealed under a key this
// process does not hold. Starting on it would run with every stored secret
// unreadable (repairs and deliveries failing with an internal error), so
// serve, worker and dev refuse (docs/install.md, "A lost key").
type foreignKeyError struct {
	unknown map[string]int // key id → stored secrets sealed under it
	current string
	prev    string
	hint    string // what `anvil dev` adds: make clean-demo
}

func (e *foreignKeyError) Error() string {
	ids := make([]string, 0, len(e.unknown))
	n := 0
	for id, c := range e.unknown {
		ids = append(ids, id)
		n += c
	}
	sort.Strings(ids)
	held := "ANVIL_SECRET_KEY is key id " + e.current
	if e.prev != "" {
		held += ", ANVIL_SECRET_KEY_PREVIOUS is key id " + e.prev
	} else {
		held += ", ANVIL_SECRET_KEY_PREVIOUS is not set"
	}
	var forget []string
	for _, id := range ids {
		forget = append(forget, "`anvil admin forget-secrets --key-id "+id+" --yes`")
	}
	msg := fmt.Sprintf("refusing to start: this database holds %d secret(s) sealed under key id %s, a key this anvil does not hold (%s). "+
		"Start with that key as ANVIL_SECRET_KEY, or as ANVIL_SECRET_KEY_PREVIOUS and then run `anvil admin rotate-key`; "+
		"if that key is lost for good, %s erases those secrets (audited) and anvil starts again — see docs/install.md, \"A lost key\"",
		n, strings.Join(ids, ", "), held, strings.Join(forget, " then "))
	if e.hint != "" {
		msg += ". " + e.hint
	}
	return msg
}

// checkSealedKeys refuses a database with secrets this process cannot open.
func checkSealedKeys(ctx context.Context, a *app, hint string) error {
	ids, err := domain.SealedKeyIDs(ctx, a.db.Bun)
	if err != nil {
		return err
	}
	unknown := map[string]int{}
	for id, n := range ids {
		if !a.keys.Holds(id) {
			unknown[id] = n
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	return &foreignKeyError{unknown: unknown, current: a.keys.CurrentID(), prev: a.keys.PreviousID(), hint: hint}
}
