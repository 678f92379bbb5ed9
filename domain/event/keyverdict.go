package event

import (
	"hash/maphash"
	"strings"
	"sync/atomic"
)

// What the scrubber decides about a key of tags or of a bag — whether it
// names a secret, and its own scrubbed spelling — depends on the key alone,
// and the keys of an error's events repeat with every event (docs/feed.md,
// "The write path and its costs"). keyVerdicts remembers the last verdict
// of each of a few hundred slots, so a storm's keys are judged once rather
// than per event: a slot is one atomic pointer, a miss judges the key and
// takes the slot, and keys no one repeats only take turns in slots.
// FuzzKeyVerdict holds the remembered verdicts to the judgement itself.

// keyVerdict is the scrubber's verdict on key.
type keyVerdict struct {
	key      string
	secret   bool   // isSecretKey(key)
	scrubbed string // scrubText(key)
}

const (
	keyVerdictSlots = 512
	// maxRememberedKey bounds what a slot holds: longer keys, rare, are
	// judged every time.
	maxRememberedKey = 64
)

var (
	keyVerdicts    [keyVerdictSlots]atomic.Pointer[keyVerdict]
	keyVerdictSeed = maphash.MakeSeed()
)

// verdictOn is the scrubber's verdict on key, remembered or judged now.
func verdictOn(key string) (secret bool, scrubbed string) {
	if len(key) > maxRememberedKey {
		return isSecretKey(key), scrubText(key)
	}
	slot := &keyVerdicts[maphash.String(keyVerdictSeed, key)%keyVerdictSlots]
	if v := slot.Load(); v != nil && v.key == key {
		return v.secret, v.scrubbed
	}
	// The key may share a request body's memory; the slot outlives it.
	k := strings.Clone(key)
	v := &keyVerdict{key: k, secret: isSecretKey(k), scrubbed: scrubText(k)}
	slot.Store(v)
	return v.secret, v.scrubbed
}
