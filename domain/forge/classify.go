package forge

import "strings"

// Classify decides what a normalized delivery means for the project, before
// anything reaches the queue (docs/contracts/webhooks.md, "Classification"):
//
//   - GitHub's ping and Gitea's test push → [OutcomeIgnoredPing];
//   - tags, branch deletions, Gitea create/delete, GitLab Tag Push Hook and
//     every other event → [OutcomeIgnoredEvent];
//   - a push to a branch other than defaultBranch → [OutcomeIgnoredBranch];
//   - a push to defaultBranch → [OutcomeAccepted], a run pinned to CommitSHA.
//
// It never returns [OutcomeQueueFull]: only the queue knows that. The
// default branch may be given bare ("main") or as a full ref; an empty one
// matches nothing, so an unconfigured project never starts runs by accident.
func Classify(p Payload, defaultBranch string) Outcome {
	if p.Kind == KindPing || (p.Kind == KindPush && isGiteaTestPush(p)) {
		return OutcomeIgnoredPing
	}
	if p.Kind == KindPullRequest {
		return classifyPull(p, defaultBranch)
	}
	// Re-check the push invariants rather than trusting Kind alone: an
	// accepted outcome starts a run pinned to CommitSHA, so it must be a
	// real commit on a real branch.
	sha, ok := normalizeSHA(p.CommitSHA)
	if p.Kind != KindPush || p.Branch == "" || !ok || isZeroSHA(sha) {
		return OutcomeIgnoredEvent
	}
	def := strings.TrimPrefix(defaultBranch, refsHeads)
	if def == "" || p.Branch != def {
		return OutcomeIgnoredBranch
	}
	return OutcomeAccepted
}

// classifyPull: a pull request from a branch of the same repository that
// brought a head commit (opened, reopened, new commits) into the default
// branch is a run pinned to the head SHA; a fork's is never run, because
// the project's secrets must not run code from outside.
func classifyPull(p Payload, defaultBranch string) Outcome {
	pr := p.PullRequest
	sha, ok := normalizeSHA(p.CommitSHA)
	if pr == nil || !pr.NewCommits || pr.Fork || p.Branch == "" || !ok || isZeroSHA(sha) {
		return OutcomeIgnoredEvent
	}
	def := strings.TrimPrefix(defaultBranch, refsHeads)
	if def == "" || pr.BaseBranch != def {
		return OutcomeIgnoredBranch
	}
	return OutcomeAccepted
}
