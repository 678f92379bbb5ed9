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
	def := strings.TrimPrefix(defaultBranch, refsHeads)
	return ClassifyWith(p, func(branch string) bool { return def != "" && branch == def })
}

// ClassifyWith is Classify with the project's own rule for which branches'
// pushes become runs (its branch filters): a push to a branch runs does not
// accept is [OutcomeIgnoredBranch]. Everything else is decided as Classify
// decides it.
func ClassifyWith(p Payload, runs func(branch string) bool) Outcome {
	if p.Kind == KindPing || (p.Kind == KindPush && isGiteaTestPush(p)) {
		return OutcomeIgnoredPing
	}
	if p.Kind == KindPullRequest {
		return classifyPull(p, runs)
	}
	// Re-check the push invariants rather than trusting Kind alone: an
	// accepted outcome starts a run pinned to CommitSHA, so it must be a
	// real commit on a real branch.
	sha, ok := normalizeSHA(p.CommitSHA)
	if p.Kind != KindPush || p.Branch == "" || !ok || isZeroSHA(sha) {
		return OutcomeIgnoredEvent
	}
	if !runs(p.Branch) {
		return OutcomeIgnoredBranch
	}
	return OutcomeAccepted
}

// classifyPull: a pull request from a branch of the same repository that
// brought a head commit (opened, reopened, new commits) into a branch whose
// pushes run (the default branch, or the project's branch filters) is a run
// pinned to the head SHA; a fork's is never run, because
// the project's secrets must not run code from outside.
func classifyPull(p Payload, runs func(branch string) bool) Outcome {
	pr := p.PullRequest
	sha, ok := normalizeSHA(p.CommitSHA)
	if pr == nil || !pr.NewCommits || pr.Fork || p.Branch == "" || !ok || isZeroSHA(sha) {
		return OutcomeIgnoredEvent
	}
	if pr.BaseBranch == "" || !runs(pr.BaseBranch) {
		return OutcomeIgnoredBranch
	}
	return OutcomeAccepted
}
