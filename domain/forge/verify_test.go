package forge

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hmacHex is the reference implementation the forges use.
func hmacHex(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// standardSig signs like GitLab's signing token (Standard Webhooks).
func standardSig(t testing.TB, token, id, ts string, body []byte) string {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(token, "whsec_"))
	if err != nil {
		t.Fatalf("bad test token: %v", err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestVerifyGitHubDocumentedVector(t *testing.T) {
	t.Parallel()
	// https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
	h := header("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
	s := Secrets{Secret: []byte("It's a Secret to Everybody")}
	if err := Verify(GitHub, h, []byte("Hello, World!"), s, time.Now()); err != nil {
		t.Fatalf("documented vector did not verify: %v", err)
	}
}

func TestVerifyHexHMAC(t *testing.T) {
	t.Parallel()
	secret := []byte("s3cret")
	body := []byte(`{"ref":"refs/heads/main"}`)
	good := hmacHex(secret, body)
	other := hmacHex([]byte("other"), body) // right length, wrong key

	tests := []struct {
		name     string
		provider Provider
		h        http.Header
		body     []byte
		secret   []byte
		ok       bool
	}{
		{"github ok", GitHub, header("X-Hub-Signature-256", "sha256="+good), body, secret, true},
		{"github upper-case hex", GitHub, header("X-Hub-Signature-256", "sha256="+strings.ToUpper(good)), body, secret, true},
		{"github tampered body", GitHub, header("X-Hub-Signature-256", "sha256="+good), append([]byte(" "), body...), secret, false},
		{"github wrong sig right length", GitHub, header("X-Hub-Signature-256", "sha256="+other), body, secret, false},
		{"github missing header", GitHub, header(), body, secret, false},
		{"github empty header", GitHub, header("X-Hub-Signature-256", ""), body, secret, false},
		{"github repeated header", GitHub, header("X-Hub-Signature-256", "sha256="+good, "X-Hub-Signature-256", "sha256="+good), body, secret, false},
		{"github no prefix", GitHub, header("X-Hub-Signature-256", good), body, secret, false},
		{"github sha1 scheme", GitHub, header("X-Hub-Signature-256", "sha1="+good[:40]), body, secret, false},
		{"github sha1 header only", GitHub, header("X-Hub-Signature", "sha1="+good[:40]), body, secret, false},
		{"github truncated", GitHub, header("X-Hub-Signature-256", "sha256="+good[:62]), body, secret, false},
		{"github not hex", GitHub, header("X-Hub-Signature-256", "sha256="+strings.Repeat("zz", 32)), body, secret, false},
		{"github empty secret", GitHub, header("X-Hub-Signature-256", "sha256="+hmacHex(nil, body)), body, nil, false},
		{"gitea ok", Gitea, header("X-Gitea-Signature", good), body, secret, true},
		{"gitea upper-case hex", Gitea, header("X-Gitea-Signature", strings.ToUpper(good)), body, secret, true},
		{"gitea with sha256 prefix", Gitea, header("X-Gitea-Signature", "sha256="+good), body, secret, false},
		{"gitea wrong sig", Gitea, header("X-Gitea-Signature", other), body, secret, false},
		{"gitea tampered body", Gitea, header("X-Gitea-Signature", good), []byte("{}"), secret, false},
		{"gitea missing", Gitea, header(), body, secret, false},
		{"forgejo header only", Gitea, header("X-Forgejo-Signature", good), body, secret, true},
		{"forgejo and gitea both", Gitea, header("X-Gitea-Signature", good, "X-Forgejo-Signature", good), body, secret, true},
		{"gitea wrong forgejo right", Gitea, header("X-Gitea-Signature", other, "X-Forgejo-Signature", good), body, secret, false},
		{"gitea ignores github header", Gitea, header("X-Hub-Signature-256", "sha256="+good), body, secret, false},
		{"unknown provider", Provider("bitbucket"), header("X-Hub-Signature-256", "sha256="+good), body, secret, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Verify(tt.provider, tt.h, tt.body, Secrets{Secret: tt.secret}, time.Now())
			if tt.ok && err != nil {
				t.Fatalf("Verify: %v, want nil", err)
			}
			if !tt.ok && !errors.Is(err, ErrUnverified) {
				t.Fatalf("Verify: %v, want ErrUnverified", err)
			}
			if err != nil && strings.Contains(strings.ToLower(err.Error()), good[:16]) {
				t.Fatalf("error %q leaks the signature", err)
			}
		})
	}
}

func TestVerifyGitLab(t *testing.T) {
	t.Parallel()
	secret := []byte("gitlab-secret-token")
	token := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	otherToken := "whsec_" + base64.StdEncoding.EncodeToString([]byte("fedcba9876543210fedcba9876543210"))
	body := []byte(`{"object_kind":"push"}`)
	now := time.Unix(1_760_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	id := "msg_2mN8yq1vLq5nZy6cR8bBKs3kWfE"
	sig := standardSig(t, token, id, ts, body)
	signed := func(extra ...string) http.Header {
		return header(append([]string{"X-Gitlab-Token", string(secret), "webhook-id", id, "webhook-timestamp", ts}, extra...)...)
	}

	tests := []struct {
		name string
		h    http.Header
		body []byte
		s    Secrets
		now  time.Time
		ok   bool
	}{
		{"token right", header("X-Gitlab-Token", string(secret)), body, Secrets{Secret: secret}, now, true},
		{"token wrong", header("X-Gitlab-Token", "gitlab-secret-tokeN"), body, Secrets{Secret: secret}, now, false},
		{"token prefix", header("X-Gitlab-Token", "gitlab-secret"), body, Secrets{Secret: secret}, now, false},
		{"token longer", header("X-Gitlab-Token", string(secret)+"x"), body, Secrets{Secret: secret}, now, false},
		{"token missing", header(), body, Secrets{Secret: secret}, now, false},
		{"token empty", header("X-Gitlab-Token", ""), body, Secrets{Secret: secret}, now, false},
		{"nothing configured", header("X-Gitlab-Token", ""), body, Secrets{}, now, false},
		{"signed ok", signed("webhook-signature", sig), body, Secrets{Secret: secret, SigningToken: token}, now, true},
		{"signed ok without secret token", header("webhook-id", id, "webhook-timestamp", ts, "webhook-signature", sig), body, Secrets{SigningToken: token}, now, true},
		{"token alone not enough", header("X-Gitlab-Token", string(secret)), body, Secrets{Secret: secret, SigningToken: token}, now, false},
		{"signature but wrong token", header("X-Gitlab-Token", "nope", "webhook-id", id, "webhook-timestamp", ts, "webhook-signature", sig), body, Secrets{Secret: secret, SigningToken: token}, now, false},
		{"signed by other key", signed("webhook-signature", standardSig(t, otherToken, id, ts, body)), body, Secrets{Secret: secret, SigningToken: token}, now, false},
		{"signed tampered body", signed("webhook-signature", sig), []byte(`{"object_kind":"tag_push"}`), Secrets{Secret: secret, SigningToken: token}, now, false},
		{"signed other id", header("X-Gitlab-Token", string(secret), "webhook-id", "msg_other", "webhook-timestamp", ts, "webhook-signature", sig), body, Secrets{Secret: secret, SigningToken: token}, now, false},
		{"stale timestamp", signed("webhook-signature", sig), body, Secrets{Secret: secret, SigningToken: token}, now.Add(5*time.Minute + time.Second), false},
		{"future timestamp", signed("webhook-signature", sig), body, Secrets{Secret: secret, SigningToken: token}, now.Add(-5*time.Minute - time.Second), false},
		{"edge of tolerance", signed("webhook-signature", sig), body, Secrets{Secret: secret, SigningToken: token}, now.Add(5 * time.Minute), true},
		{"multiple signatures one valid", signed("webhook-signature", "v1,AAAA "+standardSig(t, otherToken, id, ts, body)+"  "+sig), body, Secrets{Secret: secret, SigningToken: token}, now, true},
		{"multiple signatures none valid", signed("webhook-signature", "v1,AAAA "+standardSig(t, otherToken, id, ts, body)), body, Secrets{Secret: secret, SigningToken: token}, now, false},
		{"wrong version", signed("webhook-signature", "v1a,"+strings.TrimPrefix(sig, "v1,")), body, Secrets{Secret: secret, SigningToken: token}, now, false},
		{"signature not base64", signed("webhook-signature", "v1,!!!"), body, Secrets{Secret: secret, SigningToken: token}, now, false},
		{"signature missing", signed(), body, Secrets{Secret: secret, SigningToken: token}, now, false},
		{"timestamp missing", header("X-Gitlab-Token", string(secret), "webhook-id", id, "webhook-signature", sig), body, Secrets{Secret: secret, SigningToken: token}, now, false},
		{"timestamp not a number", header("X-Gitlab-Token", string(secret), "webhook-id", id, "webhook-timestamp", ts+"x", "webhook-signature", sig), body, Secrets{Secret: secret, SigningToken: token}, now, false},
		{"id missing", header("X-Gitlab-Token", string(secret), "webhook-timestamp", ts, "webhook-signature", sig), body, Secrets{Secret: secret, SigningToken: token}, now, false},
		{"misconfigured token", signed("webhook-signature", sig), body, Secrets{Secret: secret, SigningToken: "not-a-token"}, now, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Verify(GitLab, tt.h, tt.body, tt.s, tt.now)
			if tt.ok && err != nil {
				t.Fatalf("Verify: %v, want nil", err)
			}
			if !tt.ok && !errors.Is(err, ErrUnverified) {
				t.Fatalf("Verify: %v, want ErrUnverified", err)
			}
			if err != nil && (strings.Contains(err.Error(), string(secret)) || strings.Contains(err.Error(), token)) {
				t.Fatalf("error %q leaks secret material", err)
			}
		})
	}
}

func TestVerifyUnknownProviderIsBothErrors(t *testing.T) {
	t.Parallel()
	err := Verify(Provider("gogs"), http.Header{}, nil, Secrets{Secret: []byte("x")}, time.Now())
	if !errors.Is(err, ErrUnverified) || !errors.Is(err, ErrUnknownProvider) {
		t.Fatalf("Verify: %v, want ErrUnverified and ErrUnknownProvider", err)
	}
}

func TestGenerate(t *testing.T) {
	t.Parallel()
	a, b := GenerateSecret(), GenerateSecret()
	if len(a) != 64 || a == b {
		t.Fatalf("GenerateSecret: %q, %q: want two distinct 64-char secrets", a, b)
	}
	if _, err := hex.DecodeString(a); err != nil || strings.ToLower(a) != a {
		t.Fatalf("GenerateSecret: %q is not lowercase hex", a)
	}
	tok := GenerateSigningToken()
	key, err := decodeSigningToken(tok)
	if err != nil || len(key) != 32 || !strings.HasPrefix(tok, "whsec_") {
		t.Fatalf("GenerateSigningToken: %q: want whsec_ + base64 of 32 bytes", tok)
	}
	if GenerateSigningToken() == tok {
		t.Fatalf("GenerateSigningToken returned the same token twice")
	}
	// A generated token round-trips through Verify.
	body := []byte("{}")
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	h := header("webhook-id", "msg_1", "webhook-timestamp", ts, "webhook-signature", standardSig(t, tok, "msg_1", ts, body))
	if err := Verify(GitLab, h, body, Secrets{SigningToken: tok}, time.Now()); err != nil {
		t.Fatalf("Verify with generated token: %v", err)
	}
}

func TestParseProvider(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want Provider
		err  bool
	}{
		{"github", GitHub, false},
		{"gitlab", GitLab, false},
		{"gitea", Gitea, false},
		{"GitHub", "", true},
		{"forgejo", "", true},
		{"", "", true},
	}
	for _, tt := range tests {
		got, err := ParseProvider(tt.in)
		if got != tt.want || (err != nil) != tt.err {
			t.Fatalf("ParseProvider(%q) = %q, %v", tt.in, got, err)
		}
		if tt.err && !errors.Is(err, ErrUnknownProvider) {
			t.Fatalf("ParseProvider(%q) error %v, want ErrUnknownProvider", tt.in, err)
		}
	}
}
