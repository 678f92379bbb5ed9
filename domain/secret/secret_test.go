package secret

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func mustKeyring(t *testing.T, cur, prev []byte) *Keyring {
	t.Helper()
	k, err := NewKeyring(cur, prev)
	if err != nil {
		t.Fatalf("NewKeyring: %v", err)
	}
	return k
}

func TestSealOpenRoundTrip(t *testing.T) {
	t.Parallel()
	k := mustKeyring(t, testKey(1), nil)
	tests := []struct {
		name      string
		plaintext []byte
		aad       []byte
	}{
		{"webhook secret", []byte("3f0c1b2a9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a"), []byte("webhook:p1:github")},
		{"empty plaintext", []byte{}, []byte("webhook:p1:gitlab")},
		{"nil aad", []byte("x"), nil},
		{"binary", []byte{0, 1, 2, 0xff, '.', '.'}, []byte("row")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sealed, err := k.Seal(tt.plaintext, tt.aad)
			if err != nil {
				t.Fatalf("Seal: %v", err)
			}
			if want := "v1." + k.CurrentID() + "."; !strings.HasPrefix(sealed, want) {
				t.Fatalf("Seal = %q, want prefix %q", sealed, want)
			}
			got, err := k.Open(sealed, tt.aad)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if !bytes.Equal(got, tt.plaintext) {
				t.Fatalf("Open = %q, want %q", got, tt.plaintext)
			}
			if k.NeedsRotation(sealed) {
				t.Fatalf("NeedsRotation true for a value sealed under the current key")
			}
		})
	}
}

func TestOpenFailures(t *testing.T) {
	t.Parallel()
	k := mustKeyring(t, testKey(1), nil)
	plaintext := []byte("correct horse battery staple")
	aad := []byte("webhook:p1:github")
	sealed, err := k.Seal(plaintext, aad)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	other := mustKeyring(t, testKey(9), nil)
	foreign, err := other.Seal(plaintext, aad)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	parts := strings.Split(sealed, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(parts[2])
	flip := func(i int) string {
		b := bytes.Clone(raw)
		b[i] ^= 1
		return parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(b)
	}

	tests := []struct {
		name   string
		sealed string
		aad    []byte
		want   error
	}{
		{"wrong aad", sealed, []byte("webhook:p2:github"), ErrCorrupt},
		{"missing aad", sealed, nil, ErrCorrupt},
		{"tampered nonce", flip(0), aad, ErrCorrupt},
		{"tampered ciphertext", flip(14), aad, ErrCorrupt},
		{"tampered tag", flip(len(raw) - 1), aad, ErrCorrupt},
		{"truncated", parts[0] + "." + parts[1] + "." + parts[2][:10], aad, ErrCorrupt},
		{"not base64url", parts[0] + "." + parts[1] + ".***", aad, ErrCorrupt},
		{"padded base64", sealed + "=", aad, ErrCorrupt},
		{"unknown version", "v2." + parts[1] + "." + parts[2], aad, ErrCorrupt},
		{"too few parts", "v1." + parts[2], aad, ErrCorrupt},
		{"too many parts", sealed + ".x", aad, ErrCorrupt},
		{"malformed key id", "v1.XYZ." + parts[2], aad, ErrCorrupt},
		{"empty", "", aad, ErrCorrupt},
		{"unknown key id", foreign, aad, ErrUnknownKey},
		{"key id swapped to current", "v1." + k.CurrentID() + "." + strings.Split(foreign, ".")[2], aad, ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := k.Open(tt.sealed, tt.aad)
			if !errors.Is(err, tt.want) || got != nil {
				t.Fatalf("Open = %q, %v; want nil, %v", got, err, tt.want)
			}
			if strings.Contains(err.Error(), string(plaintext)) {
				t.Fatalf("error %q contains the plaintext", err)
			}
		})
	}
}

func TestRotation(t *testing.T) {
	t.Parallel()
	oldKey, newKey := testKey(1), testKey(2)
	before := mustKeyring(t, oldKey, nil)
	aad := []byte("webhook:p1:gitea")
	sealedOld, err := before.Seal([]byte("s1"), aad)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}

	during := mustKeyring(t, newKey, oldKey)
	if during.CurrentID() == before.CurrentID() {
		t.Fatalf("distinct keys share id %s", during.CurrentID())
	}
	got, err := during.Open(sealedOld, aad)
	if err != nil || string(got) != "s1" {
		t.Fatalf("previous key: Open = %q, %v", got, err)
	}
	if !during.NeedsRotation(sealedOld) {
		t.Fatalf("NeedsRotation false for a value under the previous key")
	}
	resealed, err := during.Seal(got, aad)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	if during.NeedsRotation(resealed) {
		t.Fatalf("NeedsRotation true after re-sealing")
	}

	after := mustKeyring(t, newKey, nil)
	if _, err := after.Open(sealedOld, aad); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("Open after previous key dropped: %v, want ErrUnknownKey", err)
	}
	if !after.NeedsRotation(sealedOld) || !after.NeedsRotation("garbage") {
		t.Fatalf("NeedsRotation false for a value not under the current key")
	}
	if got, err := after.Open(resealed, aad); err != nil || string(got) != "s1" {
		t.Fatalf("Open re-sealed = %q, %v", got, err)
	}
}

func TestNewKeyring(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		cur, prev []byte
		ok        bool
	}{
		{"current only", testKey(1), nil, true},
		{"empty previous", testKey(1), []byte{}, true},
		{"with previous", testKey(1), testKey(2), true},
		{"previous equals current", testKey(1), testKey(1), true},
		{"short current", testKey(1)[:16], nil, false},
		{"nil current", nil, nil, false},
		{"short previous", testKey(1), testKey(2)[:31], false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k, err := NewKeyring(tt.cur, tt.prev)
			if (err == nil) != tt.ok {
				t.Fatalf("NewKeyring: %v, want ok=%t", err, tt.ok)
			}
			if !tt.ok && !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("NewKeyring: %v, want ErrInvalidKey", err)
			}
			if tt.ok && len(k.CurrentID()) != 8 {
				t.Fatalf("CurrentID = %q, want 8 hex chars", k.CurrentID())
			}
		})
	}
}

func TestKeyringCopiesKey(t *testing.T) {
	t.Parallel()
	raw := testKey(3)
	k := mustKeyring(t, raw, nil)
	sealed, err := k.Seal([]byte("x"), nil)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	clear(raw) // the caller wipes its copy
	if got, err := k.Open(sealed, nil); err != nil || string(got) != "x" {
		t.Fatalf("Open after caller wiped its key: %q, %v", got, err)
	}
}

func TestKeyID(t *testing.T) {
	t.Parallel()
	// Pinned so key ids stored in existing rows stay valid: first 8 hex of
	// SHA-256("anvil-key-id" || 32 zero bytes).
	k := mustKeyring(t, make([]byte, KeySize), nil)
	if got, want := k.CurrentID(), keyID(make([]byte, KeySize)); got != want || len(got) != 8 {
		t.Fatalf("CurrentID = %q, want %q", got, want)
	}
	if got := k.CurrentID(); got != pinnedZeroKeyID {
		t.Fatalf("CurrentID(zero key) = %q, want %q", got, pinnedZeroKeyID)
	}
}

func TestParseKey(t *testing.T) {
	t.Parallel()
	raw := []byte("0123456789abcdef0123456789ABCDEF")
	withURLChars := bytes.Repeat([]byte{0xfb, 0xff}, 16) // encodes to '+', '/' or '-', '_'
	tests := []struct {
		name    string
		in      string
		want    []byte
		errPart string
	}{
		{"std padded", base64.StdEncoding.EncodeToString(raw), raw, ""},
		{"std raw", base64.RawStdEncoding.EncodeToString(raw), raw, ""},
		{"url padded", base64.URLEncoding.EncodeToString(withURLChars), withURLChars, ""},
		{"url raw", base64.RawURLEncoding.EncodeToString(withURLChars), withURLChars, ""},
		{"std with url-unsafe chars", base64.StdEncoding.EncodeToString(withURLChars), withURLChars, ""},
		{"trailing newline", base64.StdEncoding.EncodeToString(raw) + "\n", raw, ""},
		{"too short", base64.StdEncoding.EncodeToString(raw[:16]), nil, "decodes to 16 bytes"},
		{"too long", base64.StdEncoding.EncodeToString(append(raw, 'x')), nil, "decodes to 33 bytes"},
		{"not base64", "this is not base64 at all!!", nil, "not valid base64"},
		{"hex is not base64 of 32 bytes", strings.Repeat("ab", 32), nil, "decodes to 48 bytes"},
		{"empty", "", nil, "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseKey(tt.in)
			if tt.errPart == "" {
				if err != nil || !bytes.Equal(got, tt.want) {
					t.Fatalf("ParseKey = %x, %v; want %x", got, err, tt.want)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("ParseKey: %v, want ErrInvalidKey", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, "must be 32 bytes, base64-encoded") || !strings.Contains(msg, tt.errPart) {
				t.Fatalf("ParseKey error %q: want %q and the 32-byte hint", msg, tt.errPart)
			}
			if tt.in != "" && strings.Contains(msg, strings.TrimSpace(tt.in)) {
				t.Fatalf("ParseKey error %q echoes the value", msg)
			}
		})
	}
}

func TestCiphertextHidesPlaintext(t *testing.T) {
	t.Parallel()
	k := mustKeyring(t, testKey(4), nil)
	plaintext := []byte("SUPERSECRETVALUE-SUPERSECRETVALUE")
	a, err := k.Seal(plaintext, []byte("row"))
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	b, err := k.Seal(plaintext, []byte("row"))
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	if a == b {
		t.Fatalf("two Seals of the same plaintext are identical")
	}
	rawA, _ := base64.RawURLEncoding.DecodeString(strings.Split(a, ".")[2])
	rawB, _ := base64.RawURLEncoding.DecodeString(strings.Split(b, ".")[2])
	if bytes.Equal(rawA[:12], rawB[:12]) {
		t.Fatalf("nonce reused: %x", rawA[:12])
	}
	for _, s := range []string{a, b} {
		if strings.Contains(s, string(plaintext[:8])) || bytes.Contains([]byte(s), []byte(base64.RawURLEncoding.EncodeToString(plaintext)[:8])) {
			t.Fatalf("sealed value %q contains the plaintext", s)
		}
	}
	if bytes.Contains(rawA, plaintext[:8]) {
		t.Fatalf("ciphertext contains the plaintext")
	}
}

func TestMAC(t *testing.T) {
	t.Parallel()
	k := mustKeyring(t, testKey(5), nil)
	k2 := mustKeyring(t, testKey(6), testKey(5))
	data := []byte("session-id-123")
	tests := []struct {
		name  string
		a, b  []byte
		equal bool
	}{
		{"deterministic", k.MAC("session", data), k.MAC("session", data), true},
		{"purpose separates", k.MAC("session", data), k.MAC("csrf", data), false},
		{"data separates", k.MAC("session", data), k.MAC("session", []byte("session-id-124")), false},
		{"current key only", k.MAC("session", data), k2.MAC("session", data), false},
		{"not a plain HMAC under the key", k.MAC("session", data), plainHMAC(testKey(5), data), false},
	}
	for _, tt := range tests {
		if len(tt.a) != 32 || hmac.Equal(tt.a, tt.b) != tt.equal {
			t.Fatalf("%s: MAC equal = %t, want %t", tt.name, hmac.Equal(tt.a, tt.b), tt.equal)
		}
	}
}

func TestStringHidesKeys(t *testing.T) {
	t.Parallel()
	cur, prev := testKey('A'), testKey('B')
	k := mustKeyring(t, cur, prev)
	for _, s := range []string{k.String(), k.GoString()} {
		if strings.Contains(s, string(cur[:8])) || strings.Contains(s, string(prev[:8])) || !strings.Contains(s, k.CurrentID()) {
			t.Fatalf("String() = %q", s)
		}
	}
}

// pinnedZeroKeyID is the key id of the all-zero key, computed independently
// (printf 'anvil-key-id' + 32 NUL bytes | sha256sum | cut -c1-8).
const pinnedZeroKeyID = "cc71a53a"

func plainHMAC(key, data []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(data)
	return m.Sum(nil)
}
