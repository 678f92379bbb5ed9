package forge

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

const (
	sha1  = "2adc9465c4edfc33834e173fe89436a7cb899a1d"
	sha2  = "9217710ce8c7e1eae7a5d1c45f6e43e1c769f866"
	zeros = "0000000000000000000000000000000000000000"
	// sha256Obj is a SHA-256 object name, as sent for sha256 repositories.
	sha256Obj = "6e0bc1c4a0de3a5e0d8d4cdfd1d0b2c1a8d1f9e3b4c5d6e7f8091a2b3c4d5e6f"
)

// deliveryHeaders builds the headers a provider sends for event.
func deliveryHeaders(p Provider, event string) http.Header {
	switch p {
	case GitHub:
		return header("X-GitHub-Event", event, "X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	case GitLab:
		return header("X-Gitlab-Event", event, "Idempotency-Key", "f5cbb8b5-0ae4-4cbd-9a16-2a5e3f0f8c3a")
	default:
		return header("X-Gitea-Event", event, "X-Gitea-Delivery", "f6266f16-1bf3-46a5-9ea4-602e06ead473")
	}
}

// pushJSON builds a minimal push body in the shape each provider documents.
func pushJSON(p Provider, ref, before, after string) []byte {
	switch p {
	case GitHub:
		return fmt.Appendf(nil, `{"ref":%q,"before":%q,"after":%q,"deleted":%t,"repository":{"clone_url":"https://github.com/o/r.git","html_url":"https://github.com/o/r"}}`,
			ref, before, after, after == zeros)
	case GitLab:
		return fmt.Appendf(nil, `{"object_kind":"push","ref":%q,"before":%q,"after":%q,"checkout_sha":null,"project":{"git_http_url":"https://gitlab.com/o/r.git","web_url":"https://gitlab.com/o/r"}}`,
			ref, before, after)
	default:
		return fmt.Appendf(nil, `{"ref":%q,"before":%q,"after":%q,"repository":{"clone_url":"https://gitea.example/o/r.git"}}`,
			ref, before, after)
	}
}

func TestNormalizeAndClassifyBuilt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		provider Provider
		event    string
		body     []byte
		kind     Kind
		branch   string
		sha      string
		repo     string
		outcome  Outcome
	}{
		{"github push default", GitHub, "push", pushJSON(GitHub, "refs/heads/main", sha2, sha1), KindPush, "main", sha1, "https://github.com/o/r.git", OutcomeAccepted},
		{"github push upper-case sha", GitHub, "push", pushJSON(GitHub, "refs/heads/main", sha2, strings.ToUpper(sha1)), KindPush, "main", sha1, "https://github.com/o/r.git", OutcomeAccepted},
		{"github push sha256 repo", GitHub, "push", pushJSON(GitHub, "refs/heads/main", "", sha256Obj), KindPush, "main", sha256Obj, "https://github.com/o/r.git", OutcomeAccepted},
		{"github push other branch", GitHub, "push", pushJSON(GitHub, "refs/heads/feature", sha2, sha1), KindPush, "feature", sha1, "https://github.com/o/r.git", OutcomeIgnoredBranch},
		{"github push branch named like default suffix", GitHub, "push", pushJSON(GitHub, "refs/heads/x/main", sha2, sha1), KindPush, "x/main", sha1, "https://github.com/o/r.git", OutcomeIgnoredBranch},
		{"github new branch on default", GitHub, "push", pushJSON(GitHub, "refs/heads/main", zeros, sha1), KindPush, "main", sha1, "https://github.com/o/r.git", OutcomeAccepted},
		{"github delete default branch", GitHub, "push", pushJSON(GitHub, "refs/heads/main", sha1, zeros), KindBranchDelete, "main", zeros, "https://github.com/o/r.git", OutcomeIgnoredEvent},
		{"github tag", GitHub, "push", pushJSON(GitHub, "refs/tags/v1", zeros, sha1), KindTag, "", sha1, "https://github.com/o/r.git", OutcomeIgnoredEvent},
		{"github notes ref", GitHub, "push", pushJSON(GitHub, "refs/notes/commits", sha2, sha1), KindOther, "", sha1, "https://github.com/o/r.git", OutcomeIgnoredEvent},
		{"github ping", GitHub, "ping", []byte(`{"zen":"Keep it logically awesome.","hook_id":1,"repository":{"html_url":"https://github.com/o/r"}}`), KindPing, "", "", "https://github.com/o/r", OutcomeIgnoredPing},
		{"github org ping without repository", GitHub, "ping", []byte(`{"zen":"x","hook_id":1}`), KindPing, "", "", "", OutcomeIgnoredPing},
		{"github issues any shape", GitHub, "issues", []byte(`[1,2,3]`), KindOther, "", "", "", OutcomeIgnoredEvent},
		{"github unknown event not json", GitHub, "workflow_run", []byte(`not json`), KindOther, "", "", "", OutcomeIgnoredEvent},
		{"gitlab push default", GitLab, "Push Hook", pushJSON(GitLab, "refs/heads/main", sha2, sha1), KindPush, "main", sha1, "https://gitlab.com/o/r.git", OutcomeAccepted},
		{"gitlab push other branch", GitLab, "Push Hook", pushJSON(GitLab, "refs/heads/dev", sha2, sha1), KindPush, "dev", sha1, "https://gitlab.com/o/r.git", OutcomeIgnoredBranch},
		{"gitlab branch delete", GitLab, "Push Hook", pushJSON(GitLab, "refs/heads/main", sha2, zeros), KindBranchDelete, "main", zeros, "https://gitlab.com/o/r.git", OutcomeIgnoredEvent},
		{"gitlab tag push hook", GitLab, "Tag Push Hook", []byte(`{"object_kind":"tag_push","ref":"refs/tags/v1","before":"` + zeros + `","after":"` + sha1 + `","project":{"web_url":"https://gitlab.com/o/r"}}`), KindTag, "", sha1, "https://gitlab.com/o/r", OutcomeIgnoredEvent},
		{"gitlab tag push hook odd body", GitLab, "Tag Push Hook", []byte(`{"ref":5}`), KindTag, "", "", "", OutcomeIgnoredEvent},
		{"gitlab merge request", GitLab, "Merge Request Hook", []byte(`{"object_kind":"merge_request","object_attributes":{"target_branch":"main"}}`), KindPullRequest, "", "", "", OutcomeIgnoredEvent},
		{"gitea push default", Gitea, "push", pushJSON(Gitea, "refs/heads/main", sha2, sha1), KindPush, "main", sha1, "https://gitea.example/o/r.git", OutcomeAccepted},
		{"gitea push other branch", Gitea, "push", pushJSON(Gitea, "refs/heads/feature", sha2, sha1), KindPush, "feature", sha1, "https://gitea.example/o/r.git", OutcomeIgnoredBranch},
		{"gitea test delivery zeros", Gitea, "push", pushJSON(Gitea, "refs/heads/main", zeros, zeros), KindPing, "main", zeros, "https://gitea.example/o/r.git", OutcomeIgnoredPing},
		{"gitea test delivery old style", Gitea, "push", pushJSON(Gitea, "refs/heads/main", sha1, sha1), KindPing, "main", sha1, "https://gitea.example/o/r.git", OutcomeIgnoredPing},
		{"gitea tag push", Gitea, "push", pushJSON(Gitea, "refs/tags/v1", zeros, sha1), KindTag, "", sha1, "https://gitea.example/o/r.git", OutcomeIgnoredEvent},
		{"gitea create tag", Gitea, "create", []byte(`{"ref":"v1","ref_type":"tag","sha":"` + sha1 + `","repository":{"clone_url":"https://gitea.example/o/r.git"}}`), KindTag, "", sha1, "https://gitea.example/o/r.git", OutcomeIgnoredEvent},
		{"gitea create branch", Gitea, "create", []byte(`{"ref":"main","ref_type":"branch","sha":"` + sha1 + `"}`), KindOther, "", sha1, "", OutcomeIgnoredEvent},
		{"gitea delete branch", Gitea, "delete", []byte(`{"ref":"main","ref_type":"branch","pusher_type":"user"}`), KindBranchDelete, "", "", "", OutcomeIgnoredEvent},
		{"gitea delete tag", Gitea, "delete", []byte(`{"ref":"v1","ref_type":"tag"}`), KindTag, "", "", "", OutcomeIgnoredEvent},
		{"gitea issues", Gitea, "issues", []byte(`{"action":"opened"}`), KindOther, "", "", "", OutcomeIgnoredEvent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := Normalize(tt.provider, deliveryHeaders(tt.provider, tt.event), tt.body)
			if err != nil {
				t.Fatalf("Normalize: %v", err)
			}
			if p.Provider != tt.provider || p.Event != tt.event || p.DeliveryID == "" {
				t.Fatalf("Normalize: provider/event/delivery = %q/%q/%q", p.Provider, p.Event, p.DeliveryID)
			}
			if p.Kind != tt.kind || p.Branch != tt.branch || p.CommitSHA != tt.sha || p.RepositoryURL != tt.repo {
				t.Fatalf("Normalize: kind=%q branch=%q sha=%q repo=%q, want %q %q %q %q",
					p.Kind, p.Branch, p.CommitSHA, p.RepositoryURL, tt.kind, tt.branch, tt.sha, tt.repo)
			}
			if got := Classify(p, "main"); got != tt.outcome {
				t.Fatalf("Classify = %q, want %q", got, tt.outcome)
			}
		})
	}
}

func TestNormalizeErrors(t *testing.T) {
	t.Parallel()
	good := pushJSON(GitHub, "refs/heads/main", sha2, sha1)
	tests := []struct {
		name     string
		provider Provider
		h        http.Header
		body     []byte
		want     error
	}{
		{"unknown provider", Provider("svn"), deliveryHeaders(GitHub, "push"), good, ErrUnknownProvider},
		{"missing event", GitHub, header("X-GitHub-Delivery", "d1"), good, ErrMalformed},
		{"event with control chars", GitHub, header("X-GitHub-Event", "push\x00", "X-GitHub-Delivery", "d1"), good, ErrMalformed},
		{"missing delivery", GitHub, header("X-GitHub-Event", "push"), good, ErrMissingDelivery},
		{"push not json", GitHub, deliveryHeaders(GitHub, "push"), []byte(`{"ref":`), ErrMalformed},
		{"push array", GitHub, deliveryHeaders(GitHub, "push"), []byte(`[]`), ErrMalformed},
		{"push null", GitHub, deliveryHeaders(GitHub, "push"), []byte(`null`), ErrMalformed},
		{"push without ref", GitHub, deliveryHeaders(GitHub, "push"), []byte(`{"after":"` + sha1 + `"}`), ErrMalformed},
		{"push ref wrong type", GitHub, deliveryHeaders(GitHub, "push"), []byte(`{"ref":1,"after":"` + sha1 + `"}`), ErrMalformed},
		{"push short sha", GitHub, deliveryHeaders(GitHub, "push"), pushJSON(GitHub, "refs/heads/main", sha2, sha1[:12]), ErrMalformed},
		{"push missing after", GitHub, deliveryHeaders(GitHub, "push"), []byte(`{"ref":"refs/heads/main"}`), ErrMalformed},
		{"push non-hex after", GitHub, deliveryHeaders(GitHub, "push"), pushJSON(GitHub, "refs/heads/main", sha2, strings.Repeat("g", 40)), ErrMalformed},
		{"push bad before", GitHub, deliveryHeaders(GitHub, "push"), pushJSON(GitHub, "refs/heads/main", "abc", sha1), ErrMalformed},
		{"gitlab push bad after", GitLab, deliveryHeaders(GitLab, "Push Hook"), pushJSON(GitLab, "refs/heads/main", sha2, "HEAD"), ErrMalformed},
		{"gitlab push hook other object_kind", GitLab, deliveryHeaders(GitLab, "Push Hook"), []byte(`{"object_kind":"tag_push","ref":"refs/heads/main","after":"` + sha1 + `"}`), ErrMalformed},
		{"gitea push bad json", Gitea, deliveryHeaders(Gitea, "push"), []byte(`{`), ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := Normalize(tt.provider, tt.h, tt.body); !errors.Is(err, tt.want) {
				t.Fatalf("Normalize: %v, want %v", err, tt.want)
			}
		})
	}
}

func TestNormalizeErrorDoesNotQuoteBody(t *testing.T) {
	t.Parallel()
	// Old Gitea payloads carry the secret; a JSON error must not echo body bytes.
	body := []byte(`{"secret":"hunter2hunter2", "ref": hunter2}`)
	_, err := Normalize(Gitea, deliveryHeaders(Gitea, "push"), body)
	if !errors.Is(err, ErrMalformed) || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "'h'") {
		t.Fatalf("Normalize: %v: want ErrMalformed without body bytes", err)
	}
}

func TestDeliveryID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		provider Provider
		h        http.Header
		want     string
		err      error
	}{
		{"github", GitHub, header("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"), "72d3162e-cc78-11e3-81ab-4c9367dc0958", nil},
		{"github missing", GitHub, header("X-Gitea-Delivery", "x"), "", ErrMissingDelivery},
		{"gitea", Gitea, header("X-Gitea-Delivery", "g1", "X-Forgejo-Delivery", "f1"), "g1", nil},
		{"forgejo only", Gitea, header("X-Forgejo-Delivery", "f1"), "f1", nil},
		{"gitea missing", Gitea, header(), "", ErrMissingDelivery},
		{"gitlab idempotency key", GitLab, header("Idempotency-Key", "ik", "webhook-id", "wid", "X-Gitlab-Webhook-UUID", "per-attempt"), "ik", nil},
		{"gitlab webhook-id fallback", GitLab, header("webhook-id", "wid", "X-Gitlab-Event-UUID", "evt"), "wid", nil},
		{"gitlab event uuid is not a delivery id", GitLab, header("X-Gitlab-Event-UUID", "evt", "X-Gitlab-Webhook-UUID", "att"), "", ErrMissingDelivery},
		{"max length", GitHub, header("X-GitHub-Delivery", strings.Repeat("a", 200)), strings.Repeat("a", 200), nil},
		{"too long", GitHub, header("X-GitHub-Delivery", strings.Repeat("a", 201)), "", ErrMalformed},
		{"non-ascii", GitHub, header("X-GitHub-Delivery", "délivery"), "", ErrMalformed},
		{"control char", GitHub, header("X-GitHub-Delivery", "a\tb"), "", ErrMalformed},
		{"unknown provider", Provider("x"), header("X-GitHub-Delivery", "a"), "", ErrUnknownProvider},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := DeliveryID(tt.provider, tt.h)
			if got != tt.want || !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
				t.Fatalf("DeliveryID = %q, %v; want %q, %v", got, err, tt.want, tt.err)
			}
		})
	}
}

func TestNormalizeForgejoHeaders(t *testing.T) {
	t.Parallel()
	h := header("X-Forgejo-Event", "push", "X-Forgejo-Delivery", "fj-1")
	p, err := Normalize(Gitea, h, pushJSON(Gitea, "refs/heads/main", sha2, sha1))
	if err != nil {
		t.Fatalf("Normalize: %v", err)
	}
	if p.Event != "push" || p.DeliveryID != "fj-1" || Classify(p, "main") != OutcomeAccepted {
		t.Fatalf("Normalize(Forgejo) = %+v", p)
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	push := Payload{Provider: GitHub, Event: "push", Kind: KindPush, Ref: "refs/heads/main", Branch: "main", CommitSHA: sha1, BeforeSHA: sha2}
	with := func(f func(*Payload)) Payload { p := push; f(&p); return p }
	tests := []struct {
		name string
		p    Payload
		def  string
		want Outcome
	}{
		{"default branch", push, "main", OutcomeAccepted},
		{"default branch as full ref", push, "refs/heads/main", OutcomeAccepted},
		{"other branch", push, "master", OutcomeIgnoredBranch},
		{"no default branch configured", push, "", OutcomeIgnoredBranch},
		{"branch names are case-sensitive", push, "Main", OutcomeIgnoredBranch},
		{"ping", with(func(p *Payload) { p.Kind = KindPing }), "main", OutcomeIgnoredPing},
		{"tag", with(func(p *Payload) { p.Kind = KindTag }), "main", OutcomeIgnoredEvent},
		{"branch delete", with(func(p *Payload) { p.Kind = KindBranchDelete; p.CommitSHA = zeros }), "main", OutcomeIgnoredEvent},
		{"other", with(func(p *Payload) { p.Kind = KindOther }), "main", OutcomeIgnoredEvent},
		{"unknown kind", with(func(p *Payload) { p.Kind = "weird" }), "main", OutcomeIgnoredEvent},
		{"push with zero sha", with(func(p *Payload) { p.CommitSHA = zeros }), "main", OutcomeIgnoredEvent},
		{"push without sha", with(func(p *Payload) { p.CommitSHA = "" }), "main", OutcomeIgnoredEvent},
		{"push without branch", with(func(p *Payload) { p.Branch = "" }), "", OutcomeIgnoredEvent},
		{"gitea test push built by hand", with(func(p *Payload) { p.Provider = Gitea; p.BeforeSHA = sha1 }), "main", OutcomeIgnoredPing},
		{"github before == after is not a ping", with(func(p *Payload) { p.BeforeSHA = sha1 }), "main", OutcomeAccepted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Classify(tt.p, tt.def); got != tt.want {
				t.Fatalf("Classify = %q, want %q", got, tt.want)
			}
		})
	}
}
