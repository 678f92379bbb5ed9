package forge

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Header names used for delivery ids and event names.
const (
	headerGitHubDelivery  = "X-GitHub-Delivery"
	headerGiteaDelivery   = "X-Gitea-Delivery"
	headerForgejoDelivery = "X-Forgejo-Delivery"
	headerIdempotencyKey  = "Idempotency-Key"

	headerGitHubEvent  = "X-GitHub-Event"
	headerGitLabEvent  = "X-Gitlab-Event"
	headerGiteaEvent   = "X-Gitea-Event"
	headerForgejoEvent = "X-Forgejo-Event"
)

// Limits on header values that end up in the ledger and the UI.
const (
	maxDeliveryIDLen = 200
	maxEventLen      = 100
)

// Provider event names anvil reads (everything else is KindOther).
const (
	githubPush      = "push"
	githubPing      = "ping"
	gitlabPush      = "Push Hook"
	gitlabTagPush   = "Tag Push Hook"
	giteaPush       = "push"
	giteaCreate     = "create"
	giteaDelete     = "delete"
	refsHeads       = "refs/heads/"
	refsTags        = "refs/tags/"
	giteaRefTypeTag = "tag"
	giteaRefBranch  = "branch"
)

// DeliveryID returns the provider's id for a delivery, the dedupe key of the
// ledger together with project and provider. Only ids that stay the same on
// redelivery qualify: GitHub's X-GitHub-Delivery, Gitea's X-Gitea-Delivery
// (X-Forgejo-Delivery), and GitLab's Idempotency-Key (stable across retries
// and "Resend", unlike X-Gitlab-Webhook-UUID), falling back to webhook-id.
//
// The id is bounded to 200 printable ASCII characters because it is stored
// and displayed; anything else wraps [ErrMalformed].
func DeliveryID(p Provider, h http.Header) (string, error) {
	var names []string
	switch p {
	case GitHub:
		names = []string{headerGitHubDelivery}
	case Gitea:
		names = []string{headerGiteaDelivery, headerForgejoDelivery}
	case GitLab:
		names = []string{headerIdempotencyKey, headerWebhookID}
	default:
		return "", ErrUnknownProvider
	}
	id := firstHeader(h, names...)
	if id == "" {
		return "", ErrMissingDelivery
	}
	if !printableASCII(id, maxDeliveryIDLen) {
		return "", fmt.Errorf("%w: delivery id is not 1–%d printable ASCII characters", ErrMalformed, maxDeliveryIDLen)
	}
	return id, nil
}

// firstHeader returns the first non-empty value among the named headers, in
// order of preference.
func firstHeader(h http.Header, names ...string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return ""
}

func printableASCII(s string, maxLen int) bool {
	if s == "" || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// Normalize turns a verified delivery into the canonical [Payload].
//
// Only pushes are read strictly: they are what can start a run, so a push
// with a malformed body, an empty ref or an "after" that is not a commit SHA
// wraps [ErrMalformed] rather than being guessed at. Every other event
// (GitHub issues, GitLab merge requests, Gitea create/delete, …) normalizes
// to [KindOther], or [KindTag]/[KindBranchDelete] where that is clear,
// without requiring any particular body shape: a forge adding fields or
// events must never make anvil reject deliveries it was going to ignore.
func Normalize(p Provider, h http.Header, body []byte) (Payload, error) {
	var eventHeaders []string
	switch p {
	case GitHub:
		eventHeaders = []string{headerGitHubEvent}
	case GitLab:
		eventHeaders = []string{headerGitLabEvent}
	case Gitea:
		eventHeaders = []string{headerGiteaEvent, headerForgejoEvent}
	default:
		return Payload{}, ErrUnknownProvider
	}
	id, err := DeliveryID(p, h)
	if err != nil {
		return Payload{}, err
	}
	event := firstHeader(h, eventHeaders...)
	if event == "" {
		return Payload{}, fmt.Errorf("%w: missing event header", ErrMalformed)
	}
	if !printableASCII(event, maxEventLen) {
		return Payload{}, fmt.Errorf("%w: event header is not 1–%d printable ASCII characters", ErrMalformed, maxEventLen)
	}
	out := Payload{Provider: p, DeliveryID: id, Event: event, Kind: KindOther}
	switch p {
	case GitHub:
		err = normalizeGitHub(&out, body)
	case GitLab:
		err = normalizeGitLab(&out, body)
	case Gitea:
		err = normalizeGitea(&out, body)
	}
	if err != nil {
		return Payload{}, err
	}
	return out, nil
}

// repoURLs gathers the repository URL fields of all three providers; each
// provider picks its preferred one, clone URL first because that is what a
// runner fetches.
type repoURLs struct {
	CloneURL   string `json:"clone_url"`    // GitHub, Gitea
	HTMLURL    string `json:"html_url"`     // GitHub, Gitea
	GitHTTPURL string `json:"git_http_url"` // GitLab
	WebURL     string `json:"web_url"`      // GitLab project
	Homepage   string `json:"homepage"`     // GitLab repository
}

// pushBody is the part of a push payload anvil reads. The three providers
// agree on ref/before/after; the rest is provider specific.
type pushBody struct {
	Ref        string   `json:"ref"`
	Before     string   `json:"before"`
	After      string   `json:"after"`
	Deleted    bool     `json:"deleted"`     // GitHub
	ObjectKind string   `json:"object_kind"` // GitLab
	Repository repoURLs `json:"repository"`
	Project    repoURLs `json:"project"` // GitLab
	// Commits carry their messages in all three forges' push events: a
	// commit that says "Fixes SHOP-12" marks an incident's fix
	// (docs/releases.md).
	Commits []struct {
		ID        string `json:"id"`
		Message   string `json:"message"`
		Timestamp string `json:"timestamp"`
	} `json:"commits"`
}

// lenientBody is read from events anvil does not act on. Decode errors are
// ignored: whatever is recovered only decorates the ledger row.
type lenientBody struct {
	Ref        string   `json:"ref"`
	RefType    string   `json:"ref_type"` // Gitea create/delete
	SHA        string   `json:"sha"`      // Gitea create
	Before     string   `json:"before"`
	After      string   `json:"after"`
	Repository repoURLs `json:"repository"`
	Project    repoURLs `json:"project"`
}

func decodeLenient(body []byte) lenientBody {
	var b lenientBody
	_ = json.Unmarshal(body, &b) // best effort by design, see lenientBody
	return b
}

// decodePush decodes a push body strictly. JSON error details are not
// wrapped because syntax errors quote body bytes, and old Gitea payloads
// carry the webhook secret in the body.
func decodePush(body []byte) (pushBody, error) {
	var b pushBody
	if err := json.Unmarshal(body, &b); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return pushBody{}, fmt.Errorf("%w: push body field %q has the wrong type", ErrMalformed, typeErr.Field)
		}
		return pushBody{}, fmt.Errorf("%w: push body is not a JSON object", ErrMalformed)
	}
	if b.Ref == "" {
		return pushBody{}, fmt.Errorf("%w: push without ref", ErrMalformed)
	}
	after, ok := normalizeSHA(b.After)
	if !ok {
		return pushBody{}, fmt.Errorf("%w: push \"after\" is not a commit SHA", ErrMalformed)
	}
	b.After = after
	if b.Before != "" {
		before, ok := normalizeSHA(b.Before)
		if !ok {
			return pushBody{}, fmt.Errorf("%w: push \"before\" is not a commit SHA", ErrMalformed)
		}
		b.Before = before
	}
	return b, nil
}

// applyPush fills the ref-derived fields shared by every provider's push and
// picks its kind from the ref and the new value.
func applyPush(out *Payload, b pushBody, deleted bool) {
	out.Ref = b.Ref
	out.CommitSHA = b.After
	out.BeforeSHA = b.Before
	for _, c := range b.Commits {
		if sha, ok := normalizeSHA(c.ID); ok && len(out.Commits) < maxCommits {
			msg := c.Message
			if len(msg) > maxCommitMessage {
				msg = msg[:maxCommitMessage]
			}
			out.Commits = append(out.Commits, Commit{SHA: sha, Message: msg, Timestamp: forgeTime(c.Timestamp)})
		}
	}
	switch {
	case strings.HasPrefix(b.Ref, refsTags):
		out.Kind = KindTag
	case strings.HasPrefix(b.Ref, refsHeads) && len(b.Ref) > len(refsHeads):
		out.Branch = b.Ref[len(refsHeads):]
		if deleted || isZeroSHA(b.After) {
			out.Kind = KindBranchDelete
		} else {
			out.Kind = KindPush
		}
	default:
		out.Kind = KindOther // refs/notes/…, refs/pull/… and the like
	}
}

func normalizeGitHub(out *Payload, body []byte) error {
	switch out.Event {
	case githubPush:
		b, err := decodePush(body)
		if err != nil {
			return err
		}
		out.RepositoryURL = firstNonEmpty(b.Repository.CloneURL, b.Repository.HTMLURL)
		applyPush(out, b, b.Deleted)
	case githubPullRequest:
		return normalizeGitHubPull(out, body)
	case githubPing:
		out.Kind = KindPing
		lb := decodeLenient(body)
		out.RepositoryURL = firstNonEmpty(lb.Repository.CloneURL, lb.Repository.HTMLURL)
	default:
		lb := decodeLenient(body)
		out.RepositoryURL = firstNonEmpty(lb.Repository.CloneURL, lb.Repository.HTMLURL)
	}
	return nil
}

func normalizeGitLab(out *Payload, body []byte) error {
	switch out.Event {
	case gitlabPush:
		b, err := decodePush(body)
		if err != nil {
			return err
		}
		// The header is authoritative, but a body that says it is something
		// else is not a push we should run.
		if b.ObjectKind != "" && b.ObjectKind != "push" {
			return fmt.Errorf("%w: Push Hook with object_kind other than push", ErrMalformed)
		}
		out.RepositoryURL = firstNonEmpty(b.Project.GitHTTPURL, b.Project.WebURL, b.Repository.GitHTTPURL, b.Repository.Homepage)
		applyPush(out, b, false)
	case gitlabMergeReq:
		return normalizeGitLabMerge(out, body)
	default:
		lb := decodeLenient(body)
		out.RepositoryURL = firstNonEmpty(lb.Project.GitHTTPURL, lb.Project.WebURL, lb.Repository.GitHTTPURL, lb.Repository.Homepage)
		if out.Event == gitlabTagPush {
			out.Kind = KindTag
			out.Ref = lb.Ref
			out.CommitSHA, _ = normalizeSHA(lb.After)
			out.BeforeSHA, _ = normalizeSHA(lb.Before)
		}
	}
	return nil
}

func normalizeGitea(out *Payload, body []byte) error {
	switch out.Event {
	case giteaPush:
		b, err := decodePush(body)
		if err != nil {
			return err
		}
		out.RepositoryURL = firstNonEmpty(b.Repository.CloneURL, b.Repository.HTMLURL)
		applyPush(out, b, false)
		if isGiteaTestPush(*out) {
			out.Kind = KindPing
		}
	case giteaPullRequest:
		return normalizeGiteaPull(out, body)
	case giteaCreate, giteaDelete:
		// Gitea sends no push for a branch deletion, only "delete"; tags get
		// a push on refs/tags/… as well as "create". Refs here are short
		// names ("v1.0.0", "feature"), so Branch stays empty by contract.
		lb := decodeLenient(body)
		out.RepositoryURL = firstNonEmpty(lb.Repository.CloneURL, lb.Repository.HTMLURL)
		out.Ref = lb.Ref
		out.CommitSHA, _ = normalizeSHA(lb.SHA)
		switch {
		case lb.RefType == giteaRefTypeTag:
			out.Kind = KindTag
		case lb.RefType == giteaRefBranch && out.Event == giteaDelete:
			out.Kind = KindBranchDelete
		}
	default:
		lb := decodeLenient(body)
		out.RepositoryURL = firstNonEmpty(lb.Repository.CloneURL, lb.Repository.HTMLURL)
	}
	return nil
}

// isGiteaTestPush recognizes the delivery Gitea's "Test Delivery" button
// sends: a push on the default branch whose before and after are equal.
// Current Gitea uses 40 zeros for both; older Gitea (and Gogs) used the
// branch head for both. A real push never reports an unchanged ref, so
// before == after is a reliable marker either way.
func isGiteaTestPush(p Payload) bool {
	return p.Provider == Gitea && p.Event == giteaPush &&
		p.BeforeSHA != "" && p.BeforeSHA == p.CommitSHA
}

// normalizeSHA accepts a full SHA-1 (40) or SHA-256 (64) object name in hex
// and returns it in lowercase, the form git and the forges print.
func normalizeSHA(s string) (string, bool) {
	if len(s) != 40 && len(s) != 64 {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return "", false
		}
	}
	return strings.ToLower(s), true
}

// isZeroSHA reports git's "no object" value, which forges send as the new
// value of a deleted ref and the old value of a created one.
func isZeroSHA(s string) bool {
	return (len(s) == 40 || len(s) == 64) && strings.Trim(s, "0") == ""
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// forgeTime reads a time a forge sent (RFC 3339, as all three send their
// commits' and merges' times); zero when it is absent or does not parse.
func forgeTime(s string) time.Time {
	if len(s) > 64 {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}
