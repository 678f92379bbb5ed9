// Package forge turns raw webhook deliveries from GitHub, GitLab and
// Gitea/Forgejo into anvil's canonical payload and decides what each delivery
// means for the project's run queue (docs/contracts/webhooks.md).
//
// The package is deliberately pure: it knows nothing about HTTP servers,
// databases or queues. The web tier hands it the raw body and headers, in this
// order:
//
//  1. [Verify] the raw body against the decrypted secret, before any parsing,
//     so unauthenticated bytes never reach a JSON decoder;
//  2. [Normalize] the verified body into a [Payload];
//  3. [Classify] the payload against the project's default branch.
//
// Only the web tier decides [OutcomeQueueFull], because only the queue knows
// whether it is full.
package forge

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Callers match them with [errors.Is]; the wrapped message
// adds a short reason for logs but never secrets, signatures or body bytes.
var (
	// ErrUnverified means the delivery could not be authenticated. The web
	// tier answers 401 and must not record it in the delivery ledger.
	ErrUnverified = errors.New("forge: webhook not verified")
	// ErrMissingDelivery means the provider's delivery-id header is absent,
	// so the delivery cannot be deduplicated.
	ErrMissingDelivery = errors.New("forge: missing delivery id")
	// ErrMalformed means a header or the body of a verified delivery does not
	// have the shape we need to act on it.
	ErrMalformed = errors.New("forge: malformed webhook")
	// ErrUnknownProvider means the provider name is not one anvil supports.
	ErrUnknownProvider = errors.New("forge: unknown provider")
)

// Provider names a forge family. The values are the path segment of the
// public webhook route and the provider column of the delivery ledger.
type Provider string

// The supported providers. Forgejo sends Gitea's headers (plus its own), so
// it is served by [Gitea].
const (
	GitHub Provider = "github"
	GitLab Provider = "gitlab"
	Gitea  Provider = "gitea"
)

// ParseProvider maps a route segment to a [Provider]. The match is exact:
// the segment comes from a URL anvil generated, so anything else is a wrong
// URL rather than a spelling to be forgiven.
func ParseProvider(s string) (Provider, error) {
	switch p := Provider(s); p {
	case GitHub, GitLab, Gitea:
		return p, nil
	}
	return "", ErrUnknownProvider
}

// Kind is the provider-independent meaning of a delivery.
type Kind string

// The normalized kinds.
const (
	// KindPush is a push that moved a branch to a new commit.
	KindPush Kind = "push"
	// KindTag is anything about a tag (pushed, created or deleted).
	KindTag Kind = "tag"
	// KindBranchDelete is a branch deletion.
	KindBranchDelete Kind = "branch_delete"
	// KindPing is a provider's "is this endpoint alive" delivery: GitHub's
	// ping event or Gitea's test push.
	KindPing Kind = "ping"
	// KindPullRequest is a pull request (GitHub, Gitea) or merge request
	// (GitLab) event; [Payload.PullRequest] says which.
	KindPullRequest Kind = "pull_request"
	// KindOther is every event anvil does not act on.
	KindOther Kind = "other"
)

// Outcome is the stored result of a verified delivery in the ledger
// (docs/contracts/webhooks.md, "The ledger").
type Outcome string

// The ledger outcomes.
const (
	OutcomeAccepted      Outcome = "accepted"
	OutcomeIgnoredPing   Outcome = "ignored_ping"
	OutcomeIgnoredEvent  Outcome = "ignored_event"
	OutcomeIgnoredBranch Outcome = "ignored_branch"
	// OutcomeQueueFull is decided by the queue, never by [Classify].
	OutcomeQueueFull Outcome = "queue_full"
)

// Payload is the canonical normalized payload
// (docs/contracts/webhooks.md, "Classification"): the only thing
// that crosses from the web tier into the domain after verification.
type Payload struct {
	Provider      Provider `json:"provider"`
	DeliveryID    string   `json:"deliveryId"`
	Kind          Kind     `json:"kind"`
	Event         string   `json:"event"` // raw provider event name (header value)
	RepositoryURL string   `json:"repositoryUrl"`
	Ref           string   `json:"ref"`       // raw ref as the provider sent it
	Branch        string   `json:"branch"`    // "" unless Ref is refs/heads/…
	CommitSHA     string   `json:"commitSha"` // the ref's new value ("after"), lowercase hex
	BeforeSHA     string   `json:"beforeSha,omitempty"`
	// PullRequest is set for KindPullRequest: Branch and CommitSHA are then
	// the head's, and Ref the head branch.
	PullRequest *PullRequest `json:"pullRequest,omitempty"`
	// Commits are a push's commits with their messages (at most
	// maxCommits, each message cut at maxCommitMessage bytes).
	Commits []Commit `json:"commits,omitempty"`
}

// Commit is one commit of a push.
type Commit struct {
	SHA     string `json:"sha"`
	Message string `json:"message"`
	// Timestamp is the commit's time as the forge sent it (zero when it
	// sent none or none that parses): a fix chain orders fixes by it, so a
	// delivery replayed late never replaces a newer fix (docs/releases.md).
	Timestamp time.Time `json:"timestamp,omitzero"`
}

// A push's commits as the payload keeps them: GitHub sends at most 2048,
// and a message that says which incident it fixes says so in its first
// lines.
const (
	maxCommits       = 100
	maxCommitMessage = 4096
)

// PullRequest is what anvil reads of a pull or merge request event.
type PullRequest struct {
	Number     int    `json:"number"`
	Action     string `json:"action"`
	BaseBranch string `json:"baseBranch"`
	// Fork: the head lives in another repository (or one since deleted).
	Fork bool `json:"fork"`
	// NewCommits: the action brought a head commit to run (opened,
	// reopened, new commits pushed) rather than a label or a title.
	NewCommits bool `json:"newCommits"`
	// Closed: the pull request was closed (GitHub, Gitea: "closed";
	// GitLab: "close" or "merge"); Merged says whether by a merge, and
	// MergeCommitSHA is then the commit on the base branch.
	Closed         bool   `json:"closed,omitempty"`
	Merged         bool   `json:"merged,omitempty"`
	MergeCommitSHA string `json:"mergeCommitSha,omitempty"`
	// URL is the pull request's web page.
	URL string `json:"url,omitempty"`
	// MergedAt is when it was merged, as GitHub and Gitea send it (zero
	// otherwise).
	MergedAt time.Time `json:"mergedAt,omitzero"`
}

// secretBytes is the entropy of generated secrets: 256 bits, the strength of
// HMAC-SHA256 itself, so the secret is never the weak link.
const secretBytes = 32

// GenerateSecret returns a new webhook secret: 32 random bytes as 64 lowercase
// hex characters. Hex keeps the secret copy-paste safe in every forge's UI.
func GenerateSecret() string {
	return hex.EncodeToString(randomBytes())
}

// GenerateSigningToken returns a new GitLab signing token in the Standard
// Webhooks format GitLab expects: "whsec_" followed by base64 of 32 random
// bytes.
func GenerateSigningToken() string {
	return signingTokenPrefix + base64.StdEncoding.EncodeToString(randomBytes())
}

func randomBytes() []byte {
	b := make([]byte, secretBytes)
	// crypto/rand.Read never returns an error since Go 1.24 (it crashes the
	// program instead), but keep the check so a future change cannot hand
	// out an all-zero secret silently.
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("forge: crypto/rand failed: %v", err))
	}
	return b
}
