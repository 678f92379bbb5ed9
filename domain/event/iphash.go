package event

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// IPHash returns the per-day pseudonym of docs/contracts/feed.md for a client address:
//
//	dailySalt = hex(sha256(at.UTC().Format("2006-01-02") + connectionID))
//	IPHash    = hex(sha256(clientAddr + dailySalt))
//
// Both concatenations are plain byte concatenations with no separator, and
// hex is lower-case; the salt enters the second hash as its 64-character hex
// form. Two events from one machine on one day through one connection get the
// same value; the link breaks at midnight UTC and never crosses connections
// (and so never organisations). It is a pseudonym, not a secret: nothing in
// the salt is confidential, so anyone who can guess an address can confirm
// it. What it buys is that the raw address is never stored.
//
// clientAddr is hashed exactly as given; the caller passes the bare address
// (docs/contracts/feed.md, "Client address": the right-most untrusted
// X-Forwarded-For hop, else the socket's host without its port)
// in one canonical spelling, or the same machine would get two pseudonyms.
func IPHash(clientAddr string, at time.Time, connectionID string) string {
	salt := sha256.Sum256([]byte(at.UTC().Format("2006-01-02") + connectionID))
	sum := sha256.Sum256([]byte(clientAddr + hex.EncodeToString(salt[:])))
	return hex.EncodeToString(sum[:])
}
