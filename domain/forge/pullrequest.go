package forge

import (
	"encoding/json"
	"fmt"
)

// The pull and merge request events anvil reads.
const (
	githubPullRequest = "pull_request"
	gitlabMergeReq    = "Merge Request Hook"
	giteaPullRequest  = "pull_request"
)

// ghPullBody is the part of GitHub's and Gitea's pull_request payload anvil
// reads (GitHub: docs "Webhook events and payloads", pull_request; Gitea:
// modules/structs/hook.go PullRequestPayload).
type ghPullBody struct {
	Action      string `json:"action"`
	Number      int    `json:"number"`
	PullRequest struct {
		Head           ghPullRef `json:"head"`
		Base           ghPullRef `json:"base"`
		HTMLURL        string    `json:"html_url"`
		Merged         bool      `json:"merged"`
		MergeCommitSHA *string   `json:"merge_commit_sha"`
		MergedAt       string    `json:"merged_at"`
	} `json:"pull_request"`
	Repository repoURLs `json:"repository"`
}

type ghPullRef struct {
	Ref    string `json:"ref"`
	SHA    string `json:"sha"`
	RepoID int64  `json:"repo_id"` // Gitea
	Repo   *struct {
		ID int64 `json:"id"`
	} `json:"repo"`
}

// repoID is the repository's id (0 when the repository is gone, as it is
// for a pull request from a deleted fork).
func (r ghPullRef) repoID() int64 {
	if r.Repo != nil && r.Repo.ID != 0 {
		return r.Repo.ID
	}
	return r.RepoID
}

// glMergeBody is the part of GitLab's Merge Request Hook anvil reads
// (docs "Webhook events", merge request events).
type glMergeBody struct {
	ObjectKind       string   `json:"object_kind"`
	Project          repoURLs `json:"project"`
	ObjectAttributes struct {
		IID             int     `json:"iid"`
		Action          string  `json:"action"`
		URL             string  `json:"url"`
		MergeCommitSHA  *string `json:"merge_commit_sha"`
		SourceBranch    string  `json:"source_branch"`
		TargetBranch    string  `json:"target_branch"`
		SourceProjectID int64   `json:"source_project_id"`
		TargetProjectID int64   `json:"target_project_id"`
		OldRev          string  `json:"oldrev"`
		LastCommit      struct {
			ID string `json:"id"`
		} `json:"last_commit"`
	} `json:"object_attributes"`
}

func decodePull(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: pull request body is not a JSON object of the documented shape", ErrMalformed)
	}
	return nil
}

// applyPull fills a pull request payload. A head SHA that is not one leaves
// CommitSHA empty, and Classify ignores the event.
func applyPull(out *Payload, pr PullRequest, head, sha string) {
	out.Kind = KindPullRequest
	out.Ref, out.Branch = head, head
	out.CommitSHA, _ = normalizeSHA(sha)
	out.PullRequest = &pr
}

func normalizeGitHubPull(out *Payload, body []byte) error {
	var b ghPullBody
	if err := decodePull(body, &b); err != nil {
		return err
	}
	out.RepositoryURL = firstNonEmpty(b.Repository.CloneURL, b.Repository.HTMLURL)
	head, base := b.PullRequest.Head, b.PullRequest.Base
	applyPull(out, PullRequest{Number: b.Number, Action: b.Action, BaseBranch: base.Ref,
		Fork:       head.repoID() == 0 || head.repoID() != base.repoID(),
		NewCommits: b.Action == "opened" || b.Action == "synchronize" || b.Action == "reopened"}, head.Ref, head.SHA)
	closing(out.PullRequest, b.Action == "closed", b.PullRequest.Merged, b.PullRequest.MergeCommitSHA, b.PullRequest.HTMLURL)
	if out.PullRequest.Merged {
		out.PullRequest.MergedAt = forgeTime(b.PullRequest.MergedAt)
	}
	return nil
}

func normalizeGiteaPull(out *Payload, body []byte) error {
	var b ghPullBody
	if err := decodePull(body, &b); err != nil {
		return err
	}
	out.RepositoryURL = firstNonEmpty(b.Repository.CloneURL, b.Repository.HTMLURL)
	head, base := b.PullRequest.Head, b.PullRequest.Base
	applyPull(out, PullRequest{Number: b.Number, Action: b.Action, BaseBranch: base.Ref,
		Fork:       head.repoID() == 0 || head.repoID() != base.repoID(),
		NewCommits: b.Action == "opened" || b.Action == "synchronized" || b.Action == "reopened"}, head.Ref, head.SHA)
	closing(out.PullRequest, b.Action == "closed", b.PullRequest.Merged, b.PullRequest.MergeCommitSHA, b.PullRequest.HTMLURL)
	if out.PullRequest.Merged {
		out.PullRequest.MergedAt = forgeTime(b.PullRequest.MergedAt)
	}
	return nil
}

func normalizeGitLabMerge(out *Payload, body []byte) error {
	var b glMergeBody
	if err := decodePull(body, &b); err != nil {
		return err
	}
	a := b.ObjectAttributes
	out.RepositoryURL = firstNonEmpty(b.Project.GitHTTPURL, b.Project.WebURL)
	// "update" is sent for title, label and assignee changes too; only
	// one with oldrev brought new commits.
	applyPull(out, PullRequest{Number: a.IID, Action: a.Action, BaseBranch: a.TargetBranch,
		Fork:       a.SourceProjectID == 0 || a.SourceProjectID != a.TargetProjectID,
		NewCommits: a.Action == "open" || a.Action == "reopen" || (a.Action == "update" && a.OldRev != "")}, a.SourceBranch, a.LastCommit.ID)
	closing(out.PullRequest, a.Action == "close" || a.Action == "merge", a.Action == "merge", a.MergeCommitSHA, a.URL)
	return nil
}

// closing records how a pull request was closed. GitHub's
// merge_commit_sha is set on an unmerged pull request too (its test
// merge), so it counts only with merged (fixtures/webhooks/SOURCES.txt).
func closing(pr *PullRequest, closed, merged bool, mergeSHA *string, url string) {
	pr.URL = url
	if !closed {
		return
	}
	pr.Closed, pr.Merged = true, merged
	if merged && mergeSHA != nil {
		pr.MergeCommitSHA, _ = normalizeSHA(*mergeSHA)
	}
}

// IgnoredReason says why a delivery that is not a run was ignored, for the
// ledger ("" when there is nothing more to say than the outcome).
func IgnoredReason(p Payload, defaultBranch string) string {
	if p.Kind != KindPullRequest || p.PullRequest == nil {
		return ""
	}
	pr := p.PullRequest
	switch Classify(p, defaultBranch) {
	case OutcomeIgnoredEvent:
		switch {
		case !pr.NewCommits:
			return fmt.Sprintf("pull request %q action brings no new commit", pr.Action)
		case pr.Fork:
			return "pull request from a fork: the project's secrets must not run fork code"
		}
		return "pull request without a head commit"
	case OutcomeIgnoredBranch:
		return fmt.Sprintf("pull request into %q, not the default branch", pr.BaseBranch)
	}
	return ""
}
