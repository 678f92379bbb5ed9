// Package secret seals small secrets (webhook secrets, signing tokens) for
// storage at rest with AES-256-GCM under the operator's key, and derives
// MAC keys from that key for session and CSRF signing.
//
// The operator supplies the key in ANVIL_SECRET_KEY and, during a key
// rotation, the old key in ANVIL_SECRET_KEY_PREVIOUS. Every sealed value
// names the key that sealed it, so values sealed under the previous key keep
// opening while a background job re-seals them ([Keyring.NeedsRotation]),
// and a value sealed under a key the operator no longer supplies fails with
// a clear [ErrUnknownKey] instead of a generic decryption error.
package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// KeySize is the length of an operator key: AES-256.
const KeySize = 32

// version prefixes every sealed value so the format can evolve without
// guessing what an old row contains.
const version = "v1"

// keyIDLabel separates key ids from any other hash of the key, so a key id
// can be shown in logs without being usable for anything else.
const keyIDLabel = "anvil-key-id"

// Errors. None of them ever carries plaintext or key material.
var (
	// ErrInvalidKey means an operator key is not 32 bytes of base64.
	ErrInvalidKey = errors.New("secret: invalid key")
	// ErrUnknownKey means a value was sealed under a key that is neither
	// the current nor the previous one.
	ErrUnknownKey = errors.New("secret: sealed under an unknown key")
	// ErrCorrupt means a sealed value is malformed, was tampered with, or
	// belongs to a different row (its associated data does not match).
	ErrCorrupt = errors.New("secret: sealed value is corrupt")
)

// ParseKey decodes an operator key given as base64, accepting the standard
// and URL alphabets with or without padding, because operators generate keys
// with whatever tool is at hand (openssl rand -base64 32, head -c32 | base64
// -w0, …). Surrounding whitespace, such as a trailing newline from a file, is
// ignored. The error never echoes the value: it is a secret.
func ParseKey(b64 string) ([]byte, error) {
	s := strings.TrimSpace(b64)
	if s == "" {
		return nil, fmt.Errorf("%w: key is empty: must be 32 bytes, base64-encoded", ErrInvalidKey)
	}
	for _, enc := range []*base64.Encoding{
		base64.StdEncoding, base64.RawStdEncoding,
		base64.URLEncoding, base64.RawURLEncoding,
	} {
		key, err := enc.DecodeString(s)
		if err != nil {
			continue
		}
		if len(key) != KeySize {
			return nil, fmt.Errorf("%w: key decodes to %d bytes: must be 32 bytes, base64-encoded", ErrInvalidKey, len(key))
		}
		return key, nil
	}
	return nil, fmt.Errorf("%w: key is not valid base64: must be 32 bytes, base64-encoded", ErrInvalidKey)
}

// key is one operator key with its id and ready-to-use cipher.
type key struct {
	id   string
	raw  []byte
	aead cipher.AEAD
}

func newKey(raw []byte) (*key, error) {
	if len(raw) != KeySize {
		return nil, fmt.Errorf("%w: key is %d bytes: must be 32 bytes, base64-encoded", ErrInvalidKey, len(raw))
	}
	raw = append([]byte(nil), raw...) // the caller may reuse its slice
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	return &key{id: keyID(raw), raw: raw, aead: aead}, nil
}

// keyID is the first 8 hex characters of SHA-256("anvil-key-id" || key):
// enough to tell the operator's few keys apart, too short and too
// domain-separated to help anyone attack the key.
func keyID(raw []byte) string {
	h := sha256.New()
	h.Write([]byte(keyIDLabel))
	h.Write(raw)
	return hex.EncodeToString(h.Sum(nil))[:8]
}

// Keyring holds the operator's current key and, during a rotation, the
// previous one. It is safe for concurrent use. Its zero value is not usable;
// build one with [NewKeyring].
type Keyring struct {
	current  *key
	previous *key // nil when no previous key is configured
}

// NewKeyring builds a keyring from raw 32-byte keys (see [ParseKey]).
// previous may be nil or empty. A previous key equal to the current one is
// ignored, so an operator who has not yet cleared ANVIL_SECRET_KEY_PREVIOUS
// after a rotation is not punished.
func NewKeyring(current []byte, previous []byte) (*Keyring, error) {
	cur, err := newKey(current)
	if err != nil {
		return nil, fmt.Errorf("current key: %w", err)
	}
	k := &Keyring{current: cur}
	if len(previous) == 0 {
		return k, nil
	}
	prev, err := newKey(previous)
	if err != nil {
		return nil, fmt.Errorf("previous key: %w", err)
	}
	if prev.id == cur.id {
		if hmac.Equal(prev.raw, cur.raw) {
			return k, nil
		}
		// 32-bit ids make this astronomically unlikely, but two keys with
		// one id would make Open pick the wrong one.
		return nil, fmt.Errorf("%w: current and previous keys share key id %s; generate a new key", ErrInvalidKey, cur.id)
	}
	k.previous = prev
	return k, nil
}

// CurrentID returns the id of the key new values are sealed under, for logs
// and the operator's status page.
func (k *Keyring) CurrentID() string { return k.current.id }

// PreviousID returns the id of ANVIL_SECRET_KEY_PREVIOUS, or "" without one.
func (k *Keyring) PreviousID() string {
	if k.previous == nil {
		return ""
	}
	return k.previous.id
}

// Holds tells whether the keyring opens values sealed under key id.
func (k *Keyring) Holds(id string) bool { return k.lookup(id) != nil }

// String describes the keyring by key ids only, so that printing a keyring
// (or a struct holding one) can never leak key material.
func (k *Keyring) String() string {
	if k.previous == nil {
		return fmt.Sprintf("secret.Keyring{current: %s}", k.current.id)
	}
	return fmt.Sprintf("secret.Keyring{current: %s, previous: %s}", k.current.id, k.previous.id)
}

// GoString makes %#v as safe as %v.
func (k *Keyring) GoString() string { return k.String() }

// Seal encrypts plaintext under the current key and returns
// "v1.<keyid>.<base64url(nonce|ciphertext)>".
//
// aad binds the value to where it is stored (e.g.
// "webhook:<project>:<provider>"): the same aad must be given to Open, so a
// sealed value copied into another row does not decrypt there. Nonces are 12
// random bytes, safe for far more values than anvil will ever seal under one
// key.
func (k *Keyring) Seal(plaintext []byte, aad []byte) (string, error) {
	aead := k.current.aead
	buf := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("secret: generating nonce: %w", err)
	}
	buf = aead.Seal(buf, buf[:aead.NonceSize()], plaintext, aad)
	return version + "." + k.current.id + "." + base64.RawURLEncoding.EncodeToString(buf), nil
}

// Open decrypts a value produced by Seal under the current or the previous
// key, with the same aad. It fails with [ErrUnknownKey] when the value names
// a key the keyring does not hold, and [ErrCorrupt] when it is malformed,
// tampered with, or sealed for another aad.
func (k *Keyring) Open(sealed string, aad []byte) ([]byte, error) {
	id, data, err := split(sealed)
	if err != nil {
		return nil, err
	}
	key := k.lookup(id)
	if key == nil {
		// The id is a public fingerprint; naming it tells the operator which
		// old key to bring back.
		return nil, fmt.Errorf("%w: key id %s is neither the current nor the previous key", ErrUnknownKey, id)
	}
	raw, err := base64.RawURLEncoding.DecodeString(data)
	if err != nil {
		return nil, fmt.Errorf("%w: payload is not base64url", ErrCorrupt)
	}
	ns := key.aead.NonceSize()
	if len(raw) < ns+key.aead.Overhead() {
		return nil, fmt.Errorf("%w: payload is too short", ErrCorrupt)
	}
	plaintext, err := key.aead.Open(nil, raw[:ns], raw[ns:], aad)
	if err != nil {
		return nil, fmt.Errorf("%w: authentication failed (tampered, or sealed for another row)", ErrCorrupt)
	}
	return plaintext, nil
}

// NeedsRotation reports whether a sealed value should be re-sealed under
// the current key: true when it names any other key. A value that cannot be
// parsed also reports true, so a rotation job that opens every flagged row
// surfaces corrupt rows instead of silently skipping them.
func (k *Keyring) NeedsRotation(sealed string) bool {
	id, _, err := split(sealed)
	return err != nil || id != k.current.id
}

// MAC returns HMAC-SHA256(HMAC-SHA256(current key, "anvil:"+purpose), data).
//
// Deriving a key per purpose keeps the encryption key out of every other
// use and makes a MAC minted for one purpose (say, a session cookie)
// worthless for another (a CSRF token). It uses the current key only, so
// rotating the operator key also invalidates sessions. Compare MACs with
// [hmac.Equal].
func (k *Keyring) MAC(purpose string, data []byte) []byte {
	d := hmac.New(sha256.New, k.current.raw)
	d.Write([]byte("anvil:" + purpose))
	m := hmac.New(sha256.New, d.Sum(nil))
	m.Write(data)
	return m.Sum(nil)
}

func (k *Keyring) lookup(id string) *key {
	switch {
	case id == k.current.id:
		return k.current
	case k.previous != nil && id == k.previous.id:
		return k.previous
	}
	return nil
}

// split parses "v1.<keyid>.<data>" without judging the data.
func split(sealed string) (id, data string, err error) {
	parts := strings.Split(sealed, ".")
	if len(parts) != 3 {
		return "", "", fmt.Errorf("%w: not in v1.<keyid>.<data> form", ErrCorrupt)
	}
	if parts[0] != version {
		return "", "", fmt.Errorf("%w: unsupported format version", ErrCorrupt)
	}
	if _, err := hex.DecodeString(parts[1]); err != nil || len(parts[1]) != 8 || strings.ToLower(parts[1]) != parts[1] {
		return "", "", fmt.Errorf("%w: malformed key id", ErrCorrupt)
	}
	return parts[1], parts[2], nil
}
