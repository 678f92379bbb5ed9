package forge

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names used for verification. Go canonicalizes header keys, so the
// spelling here only matters for readability.
const (
	headerGitHubSignature  = "X-Hub-Signature-256"
	headerGiteaSignature   = "X-Gitea-Signature"
	headerForgejoSignature = "X-Forgejo-Signature"
	headerGitLabToken      = "X-Gitlab-Token"
	headerWebhookID        = "Webhook-Id"
	headerWebhookTimestamp = "Webhook-Timestamp"
	headerWebhookSignature = "Webhook-Signature"

	signingTokenPrefix = "whsec_"
	githubSigPrefix    = "sha256="
)

// SignatureTolerance is how far a Standard Webhooks timestamp may be from
// the receiver's clock. It bounds how long a captured delivery can be
// replayed, while tolerating ordinary clock skew and queueing at GitLab.
const SignatureTolerance = 5 * time.Minute

// Secrets is the verification material of one webhook, decrypted in memory
// for the duration of one request only.
type Secrets struct {
	// Secret is the webhook secret: the HMAC key for GitHub and Gitea, the
	// expected X-Gitlab-Token value for GitLab.
	Secret []byte
	// SigningToken is GitLab's optional Standard Webhooks signing token,
	// "whsec_<base64 of the key>". When it is set, every GitLab delivery
	// must carry a valid webhook-signature: X-Gitlab-Token is a bearer
	// secret that travels with every request, whereas the signature also
	// binds the body and a timestamp, so the token alone is not enough.
	SigningToken string
}

// Verify authenticates a delivery from its raw body and headers, in constant
// time with respect to the secret, before anything parses the body.
//
// Every failure wraps [ErrUnverified] with a short reason that never contains
// the secret, the presented signature or the body. now is the receiver's
// clock; it is only consulted for GitLab's signed timestamps.
//
// An empty secret never verifies: an HMAC under an empty key is something
// anyone can compute, so a misconfigured row must fail closed.
func Verify(p Provider, h http.Header, body []byte, s Secrets, now time.Time) error {
	switch p {
	case GitHub:
		return verifyHexHMAC(h, headerGitHubSignature, githubSigPrefix, body, s.Secret)
	case Gitea:
		// Forgejo sends both its own header and Gitea's; prefer Gitea's and
		// fall back only when it is absent, so a delivery cannot choose the
		// weaker of two disagreeing headers.
		name := headerGiteaSignature
		if len(h.Values(headerGiteaSignature)) == 0 {
			name = headerForgejoSignature
		}
		return verifyHexHMAC(h, name, "", body, s.Secret)
	case GitLab:
		return verifyGitLab(h, body, s, now)
	default:
		return fmt.Errorf("%w: %w", ErrUnverified, ErrUnknownProvider)
	}
}

func unverified(reason string) error {
	return fmt.Errorf("%w: %s", ErrUnverified, reason)
}

// singleHeader returns the only value of a header. Two values are refused
// rather than guessed between: a forge sends one, so more means a proxy or an
// attacker is involved.
func singleHeader(h http.Header, name string) (string, error) {
	vs := h.Values(name)
	switch {
	case len(vs) == 0 || (len(vs) == 1 && vs[0] == ""):
		return "", unverified("missing " + name)
	case len(vs) > 1:
		return "", unverified("repeated " + name)
	}
	return vs[0], nil
}

// verifyHexHMAC checks a header carrying prefix + hex(HMAC-SHA256(secret,
// body)). The hex is decoded before comparing so upper- and lower-case
// digits both verify, and hmac.Equal compares the decoded bytes in constant
// time.
func verifyHexHMAC(h http.Header, name, prefix string, body, secret []byte) error {
	if len(secret) == 0 {
		return unverified("no secret configured")
	}
	v, err := singleHeader(h, name)
	if err != nil {
		return err
	}
	if prefix != "" {
		// Only the SHA-256 scheme is accepted: there is deliberately no
		// fallback to GitHub's legacy SHA-1 X-Hub-Signature header.
		if len(v) < len(prefix) || !strings.EqualFold(v[:len(prefix)], prefix) {
			return unverified(name + " has an unsupported scheme")
		}
		v = v[len(prefix):]
	}
	got, err := hex.DecodeString(v)
	if err != nil || len(got) != sha256.Size {
		return unverified(name + " is not a hex SHA-256 HMAC")
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return unverified(name + " does not match")
	}
	return nil
}

// verifyGitLab checks X-Gitlab-Token against the secret and, when a signing
// token is configured, the Standard Webhooks signature as well. Each
// configured credential must verify; at least one must be configured.
func verifyGitLab(h http.Header, body []byte, s Secrets, now time.Time) error {
	if len(s.Secret) == 0 && s.SigningToken == "" {
		return unverified("no secret configured")
	}
	if len(s.Secret) > 0 {
		tok, err := singleHeader(h, headerGitLabToken)
		if err != nil {
			return err
		}
		// Compare fixed-length digests: ConstantTimeCompare returns early
		// on a length mismatch, which would leak the secret's length.
		want := sha256.Sum256(s.Secret)
		got := sha256.Sum256([]byte(tok))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			return unverified(headerGitLabToken + " does not match")
		}
	}
	if s.SigningToken != "" {
		return verifyStandardWebhook(h, body, s.SigningToken, now)
	}
	return nil
}

// verifyStandardWebhook implements the Standard Webhooks scheme GitLab uses
// for signing tokens: webhook-signature holds space-separated "v1,<base64>"
// entries (several during a key rollover), each an HMAC-SHA256 under the
// decoded token of "{webhook-id}.{webhook-timestamp}.{body}". The timestamp is
// signed, so checking its age bounds replay of captured deliveries.
func verifyStandardWebhook(h http.Header, body []byte, token string, now time.Time) error {
	key, err := decodeSigningToken(token)
	if err != nil {
		return unverified("signing token is misconfigured")
	}
	id, err := singleHeader(h, headerWebhookID)
	if err != nil {
		return err
	}
	ts, err := singleHeader(h, headerWebhookTimestamp)
	if err != nil {
		return err
	}
	sigs, err := singleHeader(h, headerWebhookSignature)
	if err != nil {
		return err
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return unverified(headerWebhookTimestamp + " is not unix seconds")
	}
	// Compare in seconds rather than with time.Duration, which would
	// saturate (and so misjudge) for absurd timestamps.
	if d := now.Unix() - sec; d > int64(SignatureTolerance/time.Second) || d < -int64(SignatureTolerance/time.Second) {
		return unverified(headerWebhookTimestamp + " is outside the tolerance")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	want := mac.Sum(nil)
	for _, entry := range strings.Fields(sigs) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue // other schemes (e.g. asymmetric v1a) are not ours to check
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			continue
		}
		if hmac.Equal(got, want) {
			return nil
		}
	}
	return unverified(headerWebhookSignature + " has no matching v1 signature")
}

// decodeSigningToken extracts the HMAC key from "whsec_<base64>".
func decodeSigningToken(token string) ([]byte, error) {
	b64, ok := strings.CutPrefix(token, signingTokenPrefix)
	if !ok {
		return nil, fmt.Errorf("missing %q prefix", signingTokenPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) == 0 {
		return nil, fmt.Errorf("not base64")
	}
	return key, nil
}
