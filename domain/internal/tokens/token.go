// Package tokens makes and checks the bearer tokens of the domain:
// personal API tokens, feed connection tokens, card tokens, invitations.
package tokens

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"math/big"
	"strings"
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// RandomBase62 returns n characters drawn uniformly from base62.
func RandomBase62(n int) string {
	var b strings.Builder
	b.Grow(n)
	max := big.NewInt(int64(len(base62)))
	for i := 0; i < n; i++ {
		v, err := rand.Int(rand.Reader, max)
		if err != nil {
			panic("domain: crypto/rand failed: " + err.Error())
		}
		b.WriteByte(base62[v.Int64()])
	}
	return b.String()
}

// Token prefixes. A token is its prefix plus 32 base62 characters; it is
// stored as its first 16 characters (the lookup key) plus a SHA-256 hash.
const (
	PersonalTokenPrefix = "anv_pat_"
	ServerTokenPrefix   = "anv_srv_"
	// PublicTokenPrefix is a browser connection's token: public by nature
	// (it ships in every page), admitted only from its listed origins.
	PublicTokenPrefix = "anv_pub_"
	RandomLen         = 32
	LookupLen         = 16
)

// New makes a token with the given prefix and returns it with its
// lookup key and hash.
func New(prefix string) (token, lookup string, hash []byte) {
	token = prefix + RandomBase62(RandomLen)
	sum := sha256.Sum256([]byte(token))
	return token, token[:LookupLen], sum[:]
}

// Split checks a presented token's shape and returns its lookup key and
// hash; ok is false for anything that cannot be one of ours.
func Split(prefix, token string) (lookup string, hash []byte, ok bool) {
	if len(token) != len(prefix)+RandomLen || !strings.HasPrefix(token, prefix) {
		return "", nil, false
	}
	for _, c := range token[len(prefix):] {
		if !strings.ContainsRune(base62, c) {
			return "", nil, false
		}
	}
	sum := sha256.Sum256([]byte(token))
	return token[:LookupLen], sum[:], true
}

// HashEqual compares two hashes in constant time.
func HashEqual(a, b []byte) bool { return subtle.ConstantTimeCompare(a, b) == 1 }
