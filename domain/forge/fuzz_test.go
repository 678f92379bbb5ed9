package forge

import (
	"crypto/hmac"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var nowForTests = time.Unix(1_760_000_000, 0)

// addFixtureSeeds seeds a fuzzer with the real payloads whose names start
// with prefix, when the fixtures are present.
func addFixtureSeeds(f *testing.F, prefix string, add func(body []byte)) {
	entries, err := os.ReadDir(fixturesDir)
	if err != nil {
		return // fixtures are optional seeds
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) && strings.HasSuffix(e.Name(), ".json") {
			if b, err := os.ReadFile(filepath.Join(fixturesDir, e.Name())); err == nil {
				add(b)
			}
		}
	}
}

// checkNormalized asserts the invariants every successful Normalize keeps,
// whatever the input: they are what the ledger and the queue rely on.
func checkNormalized(t *testing.T, p Payload, err error) {
	t.Helper()
	if err != nil {
		return
	}
	if p.CommitSHA != "" && p.CommitSHA != strings.ToLower(p.CommitSHA) {
		t.Fatalf("CommitSHA %q not lowercase", p.CommitSHA)
	}
	if p.Branch != "" && p.Ref != refsHeads+p.Branch {
		t.Fatalf("Branch %q does not come from Ref %q", p.Branch, p.Ref)
	}
	switch Classify(p, p.Branch) {
	case OutcomeAccepted:
		if p.Kind != KindPush {
			t.Fatalf("accepted a %q", p.Kind)
		}
		if _, ok := normalizeSHA(p.CommitSHA); !ok || isZeroSHA(p.CommitSHA) {
			t.Fatalf("accepted a push to %q", p.CommitSHA)
		}
	case OutcomeQueueFull:
		t.Fatalf("Classify returned queue_full")
	}
}

func FuzzNormalizeGitHub(f *testing.F) {
	f.Add("push", "d1", pushJSON(GitHub, "refs/heads/main", sha2, sha1))
	f.Add("push", "d2", pushJSON(GitHub, "refs/heads/main", sha1, zeros))
	f.Add("ping", "d3", []byte(`{"zen":"z","hook_id":1}`))
	f.Add("issues", "", []byte(`{`))
	addFixtureSeeds(f, "github_", func(b []byte) { f.Add("push", "fx", b); f.Add("ping", "fx", b) })
	f.Fuzz(func(t *testing.T, event, delivery string, body []byte) {
		h := header("X-GitHub-Event", event, "X-GitHub-Delivery", delivery)
		p, err := Normalize(GitHub, h, body)
		checkNormalized(t, p, err)
	})
}

func FuzzNormalizeGitLab(f *testing.F) {
	f.Add("Push Hook", "ik", "", pushJSON(GitLab, "refs/heads/main", sha2, sha1))
	f.Add("Tag Push Hook", "", "wid", []byte(`{"ref":"refs/tags/v1"}`))
	f.Add("Merge Request Hook", "ik", "", []byte(`[]`))
	addFixtureSeeds(f, "gitlab_", func(b []byte) { f.Add("Push Hook", "fx", "", b); f.Add("Tag Push Hook", "fx", "", b) })
	f.Fuzz(func(t *testing.T, event, idempotencyKey, webhookID string, body []byte) {
		h := header("X-Gitlab-Event", event, "Idempotency-Key", idempotencyKey, "webhook-id", webhookID)
		p, err := Normalize(GitLab, h, body)
		checkNormalized(t, p, err)
	})
}

func FuzzNormalizeGitea(f *testing.F) {
	f.Add("push", "", "g1", pushJSON(Gitea, "refs/heads/main", sha2, sha1))
	f.Add("push", "", "g2", pushJSON(Gitea, "refs/heads/main", zeros, zeros))
	f.Add("", "delete", "g3", []byte(`{"ref":"x","ref_type":"branch"}`))
	f.Add("create", "", "g4", []byte(`{"ref":"v1","ref_type":"tag","sha":1}`))
	addFixtureSeeds(f, "gitea_", func(b []byte) {
		for _, ev := range []string{"push", "create", "delete"} {
			f.Add(ev, "", "fx", b)
		}
	})
	f.Fuzz(func(t *testing.T, giteaEvent, forgejoEvent, delivery string, body []byte) {
		h := header("X-Gitea-Event", giteaEvent, "X-Forgejo-Event", forgejoEvent, "X-Gitea-Delivery", delivery)
		p, err := Normalize(Gitea, h, body)
		checkNormalized(t, p, err)
		if err == nil && p.Kind == KindPush && p.BeforeSHA == p.CommitSHA {
			t.Fatalf("Gitea test push normalized as a push")
		}
	})
}

// FuzzVerify checks that, against a fixed secret, a signature verifies
// exactly when it encodes the true HMAC of the body, for both hex schemes.
func FuzzVerify(f *testing.F) {
	secret := []byte("fixed fuzz secret")
	f.Add([]byte("Hello, World!"), "sha256="+hmacHex(secret, []byte("Hello, World!")), false)
	f.Add([]byte("Hello, World!"), "sha256="+strings.ToUpper(hmacHex(secret, []byte("Hello, World!"))), false)
	f.Add([]byte("{}"), hmacHex(secret, []byte("{}")), true)
	f.Add([]byte("{}"), "sha256="+hmacHex([]byte("other"), []byte("{}")), false)
	f.Add([]byte(""), "", true)
	f.Fuzz(func(t *testing.T, body []byte, sig string, gitea bool) {
		want := hmacHexBytes(secret, body)
		provider, name, rest := GitHub, "X-Hub-Signature-256", sig
		if gitea {
			provider, name = Gitea, "X-Gitea-Signature"
		} else if len(sig) >= 7 && strings.EqualFold(sig[:7], "sha256=") {
			rest = sig[7:]
		} else {
			rest = "" // wrong scheme can never verify
		}
		got, decErr := hex.DecodeString(rest)
		isTrue := decErr == nil && hmac.Equal(got, want)
		h := header(name, sig)
		err := Verify(provider, h, body, Secrets{Secret: secret}, nowForTests)
		if (err == nil) != isTrue {
			t.Fatalf("Verify(%s, sig=%q) = %v, true HMAC: %v", provider, sig, err, isTrue)
		}
		// The true signature of any body always verifies.
		trueSig := hex.EncodeToString(want)
		if !gitea {
			trueSig = "sha256=" + trueSig
		}
		if err := Verify(provider, header(name, trueSig), body, Secrets{Secret: secret}, nowForTests); err != nil {
			t.Fatalf("true signature rejected: %v", err)
		}
	})
}

func hmacHexBytes(secret, body []byte) []byte {
	b, _ := hex.DecodeString(hmacHex(secret, body))
	return b
}
