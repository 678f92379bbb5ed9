package jobs

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"code.gitea.io/sdk/gitea"
	"github.com/google/go-github/v75/github"
	gitlab "gitlab.com/gitlab-org/api/client-go"

	"anvil/domain"
	"anvil/domain/incident"
	"anvil/domain/project"
	"anvil/domain/repourl"
	runs "anvil/domain/run"
	"anvil/jobs/sandbox"
)

// Repair is the RepairHandler of anvil: it hands the repair command its
// incident, and turns a changed working tree into a pushed branch and a
// pull request through the provider's API. Every move of the incident goes
// through domain.Incidents; this file only does the git and HTTP work.
//
// Outcomes (run state / failure_reason → incident):
//   - command exit ≠ 0: failed / exit_code → NEEDS_HUMAN
//   - no change in the tree: failed / no_change → NEEDS_HUMAN. Failed, not
//     passed: the repair did not do what it was for, and the run list
//     should say so at a glance.
//   - push refused: failed / repair_push_failed → NEEDS_HUMAN
//   - provider refused the pull request: failed / provider_error → NEEDS_HUMAN
//   - pull request opened: passed → PR_OPEN with its URL
type Repair struct {
	Incidents *incident.Incidents
	Projects  *project.Projects
	// Policy is the checkout policy, applied again to the push.
	Policy repourl.Policy
	// HTTPClient talks to the provider's API (default: 30 s timeout).
	HTTPClient *http.Client
}

// NewRepair builds the handler.
func NewRepair(in *incident.Incidents, ps *project.Projects, policy repourl.Policy) *Repair {
	return &Repair{Incidents: in, Projects: ps, Policy: policy, HTTPClient: &http.Client{Timeout: 30 * time.Second}}
}

// incidentFile is where Prepare writes the incident of a workspace: beside
// the workspace (outside the writable bind), bound read-only.
func incidentFile(workspace string) string { return workspace + ".incident.json" }

// Prepare writes the incident and its latest event for the command, sets
// ANVIL_INCIDENT_FILE and ANVIL_TASK, and records that the repair started.
func (r *Repair) Prepare(ctx context.Context, run *runs.Run, proj *domain.Project, workspace string) (RepairPlan, error) {
	sweepIncidentFiles(filepath.Dir(workspace))
	inc, input, err := r.Incidents.RepairInputFor(ctx, run)
	if err != nil {
		return RepairPlan{}, fmt.Errorf("read the incident: %w", err)
	}
	if strings.TrimSpace(proj.RepairCommand) == "" {
		return RepairPlan{}, errors.New("the project has no repair command")
	}
	file := incidentFile(workspace)
	if err := os.WriteFile(file, input, 0o644); err != nil {
		return RepairPlan{}, fmt.Errorf("write the incident file: %w", err)
	}
	if err := os.Chmod(file, 0o644); err != nil { // umask-proof: the sandbox user reads it
		return RepairPlan{}, fmt.Errorf("write the incident file: %w", err)
	}
	if err := r.Incidents.RepairStarted(ctx, run); err != nil {
		return RepairPlan{}, fmt.Errorf("record the repair's start: %w", err)
	}
	task := fmt.Sprintf("Fix the production incident %q (%s, %d events, first seen %s) in this repository. "+
		"The incident and its latest event are in $ANVIL_INCIDENT_FILE (JSON). Change the code; anvil commits "+
		"the working tree and proposes it as a pull request.", clip(inc.Title, 200), inc.Environment, inc.EventCount,
		inc.FirstSeen.UTC().Format(time.RFC3339))
	return RepairPlan{
		Command:       proj.RepairCommand,
		Env:           map[string]string{"ANVIL_INCIDENT_FILE": file, "ANVIL_TASK": task, "ANVIL_INCIDENT_ID": inc.ID.String()},
		ExtraReadOnly: []string{file},
	}, nil
}

// sweepIncidentFiles removes incident files whose workspace is gone (a run
// that timed out or was canceled never reaches Finish).
func sweepIncidentFiles(root string) {
	files, _ := filepath.Glob(filepath.Join(root, "*.incident.json"))
	for _, f := range files {
		if _, err := os.Stat(strings.TrimSuffix(f, ".incident.json")); errors.Is(err, os.ErrNotExist) {
			_ = os.Remove(f)
		}
	}
}

// Finish commits, pushes and proposes the working tree, or hands the
// incident to a person with the reason.
func (r *Repair) Finish(ctx context.Context, run *runs.Run, proj *domain.Project, workspace string, res sandbox.Result, log *runs.LogWriter) (runs.TerminalReport, error) {
	defer os.Remove(incidentFile(workspace))
	code := res.ExitCode
	needsHuman := func(reason, failure string) (runs.TerminalReport, error) {
		log.Printf("repair: %s", reason)
		if err := r.Incidents.RepairNeedsHuman(ctx, run, reason); err != nil {
			return runs.TerminalReport{}, err
		}
		return runs.TerminalReport{State: runs.StateFailed, ExitCode: &code, FailureReason: failure}, nil
	}
	if code != 0 {
		return needsHuman(fmt.Sprintf("the repair command failed with exit code %d", code), runs.ReasonExitCode)
	}
	if run.IncidentID == nil {
		return runs.TerminalReport{}, errors.New("a repair run without an incident")
	}
	token, err := r.Projects.ProviderToken(proj)
	if err != nil {
		return runs.TerminalReport{}, errors.New("could not decrypt the project's provider token")
	}
	if run.CommitSHA == nil {
		return runs.TerminalReport{}, errors.New("a repair run without its checked-out commit")
	}
	g, err := newHostGit(ctx, workspace, *run.CommitSHA, proj.RepoURL, token, r.Policy)
	if err != nil {
		return needsHuman("the change was not pushed: "+err.Error(), runs.ReasonRepairPush)
	}
	defer g.close()
	status, err := g.run(ctx, "status", "--porcelain")
	if err != nil {
		return runs.TerminalReport{}, err
	}
	if strings.TrimSpace(status) == "" {
		return needsHuman("the repair command changed nothing", runs.ReasonRepairNoOp)
	}
	// The change is kept as a patch before anything can fail: whatever
	// becomes of the push or the pull request, the run page shows it and
	// offers it for download (docs/architecture.md, "Repairs").
	if _, err := g.run(ctx, "add", "-A"); err != nil {
		return runs.TerminalReport{}, err
	}
	diff, err := g.run(ctx, "diff", "--cached", "--no-color", "--no-ext-diff")
	if err != nil {
		return runs.TerminalReport{}, err
	}
	if err := log.SavePatch(ctx, diff); err != nil {
		return runs.TerminalReport{}, err
	}
	log.Printf("repair: the change is kept as a patch on the run's page")
	// Nothing leaves the workspace for a pull request that cannot be opened.
	if err := providerProblem(proj, token); err != nil {
		return needsHuman("the change was not pushed: "+err.Error()+"; its patch is kept on the repair run's page", runs.ReasonRepairForge)
	}
	branch := "anvil/repair/" + run.IncidentID.String()
	inc, err := r.Incidents.Get(ctx, run.OrgID, *run.IncidentID)
	if err != nil {
		return runs.TerminalReport{}, err
	}
	title := "anvil: repair " + clip(inc.Title, 180)
	body := fmt.Sprintf("Proposed by anvil's repair run %s for the production incident %q (%s, %d events).\n\nReview before merging.",
		run.ID, clip(inc.Title, 300), inc.Environment, inc.EventCount)
	if _, err := g.run(ctx, "add", "-A"); err != nil {
		return runs.TerminalReport{}, err
	}
	if _, err := g.run(ctx, "commit", "-q", "-m", title+"\n\n"+body); err != nil {
		return runs.TerminalReport{}, err
	}
	log.Printf("repair: pushing %s", branch)
	// --force: a second repair of the same incident replaces its branch.
	if _, err := g.run(ctx, "push", "--force", "-q", "--", proj.RepoURL, "HEAD:refs/heads/"+branch); err != nil {
		return needsHuman("pushing the branch "+branch+" failed: "+err.Error(), runs.ReasonRepairPush)
	}
	prURL, err := r.openPR(ctx, proj, token, branch, title, body)
	if err != nil {
		return needsHuman(fmt.Sprintf("the branch %s was pushed, but the pull request could not be opened: %v", branch, err), runs.ReasonRepairForge)
	}
	log.Printf("repair: pull request %s", prURL)
	if err := r.Incidents.RepairPROpened(ctx, run, prURL); err != nil {
		return runs.TerminalReport{}, err
	}
	return runs.TerminalReport{State: runs.StatePassed, ExitCode: &code}, nil
}

// openPR proposes branch into the default branch through the provider's
// API and returns the pull request's web URL. Errors name the provider's
// answer, never the token.
func (r *Repair) openPR(ctx context.Context, proj *domain.Project, token, branch, title, body string) (string, error) {
	if err := providerProblem(proj, token); err != nil {
		return "", err
	}
	owner, name, _ := strings.Cut(proj.ProviderRepo, "/")
	hc := r.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	api := strings.TrimSpace(proj.ProviderAPIURL)
	var (
		u   string
		err error
	)
	switch proj.Provider {
	case "github":
		u, err = openGitHubPR(ctx, hc, api, token, owner, name, branch, proj.DefaultBranch, title, body)
	case "gitlab":
		u, err = openGitLabMR(ctx, hc, api, token, proj.ProviderRepo, branch, proj.DefaultBranch, title, body)
	case "gitea":
		u, err = openGiteaPR(ctx, hc, api, token, owner, name, branch, proj.DefaultBranch, title, body)
	default:
		return "", fmt.Errorf("unknown provider %q", proj.Provider)
	}
	if err != nil {
		return "", errors.New(strings.ReplaceAll(err.Error(), token, "[REDACTED]"))
	}
	if u == "" {
		return "", errors.New("the provider answered without the pull request's URL")
	}
	return u, nil
}

// providerProblem says why a pull request could not be opened for proj with
// token, before anything is pushed: no provider, no repository (owner/name),
// no token, or a Gitea project without the instance's address.
func providerProblem(proj *domain.Project, token string) error {
	_, _, ok := strings.Cut(proj.ProviderRepo, "/")
	switch {
	case proj.Provider == "" || !ok:
		return errors.New("the project names no provider and repository (owner/name) to open a pull request on")
	case token == "":
		return errors.New("the project has no provider token")
	}
	switch proj.Provider {
	case "github", "gitlab":
	case "gitea":
		if strings.TrimSpace(proj.ProviderAPIURL) == "" {
			return errors.New("a Gitea project needs provider_api_url (the instance's address)")
		}
	default:
		return fmt.Errorf("unknown provider %q", proj.Provider)
	}
	return nil
}

// openGitHubPR: POST {api}/repos/{owner}/{repo}/pulls. provider_api_url is
// the API root as GitHub Enterprise serves it (https://ghe.example/api/v3).
func openGitHubPR(ctx context.Context, hc *http.Client, api, token, owner, repo, head, base, title, body string) (string, error) {
	gh := github.NewClient(hc).WithAuthToken(token)
	if api != "" {
		bu, err := url.Parse(strings.TrimSuffix(api, "/") + "/")
		if err != nil {
			return "", fmt.Errorf("provider_api_url: %w", err)
		}
		gh.BaseURL = bu
	}
	pr, _, err := gh.PullRequests.Create(ctx, owner, repo, &github.NewPullRequest{Title: &title, Head: &head, Base: &base, Body: &body})
	if err != nil {
		return "", fmt.Errorf("GitHub: %s", providerError(err))
	}
	return pr.GetHTMLURL(), nil
}

// openGitLabMR: POST {api}/projects/{owner%2Fname}/merge_requests.
func openGitLabMR(ctx context.Context, hc *http.Client, api, token, path, head, base, title, body string) (string, error) {
	opts := []gitlab.ClientOptionFunc{gitlab.WithHTTPClient(hc)}
	if api != "" {
		opts = append(opts, gitlab.WithBaseURL(api))
	}
	gl, err := gitlab.NewClient(token, opts...)
	if err != nil {
		return "", fmt.Errorf("GitLab client: %w", err)
	}
	mr, _, err := gl.MergeRequests.CreateMergeRequest(path, &gitlab.CreateMergeRequestOptions{
		Title: &title, Description: &body, SourceBranch: &head, TargetBranch: &base,
	}, gitlab.WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("GitLab: %s", providerError(err))
	}
	return mr.WebURL, nil
}

// openGiteaPR: POST {api}/api/v1/repos/{owner}/{repo}/pulls.
func openGiteaPR(ctx context.Context, hc *http.Client, api, token, owner, repo, head, base, title, body string) (string, error) {
	if api == "" {
		return "", errors.New("a Gitea project needs provider_api_url (the instance's address)")
	}
	gc, err := gitea.NewClient(api, gitea.SetToken(token), gitea.SetHTTPClient(hc), gitea.SetContext(ctx), gitea.SetGiteaVersion(""))
	if err != nil {
		return "", fmt.Errorf("Gitea client: %w", err) //nolint:staticcheck // ST1005: Gitea is a name, and this is the reason a person reads
	}
	pr, _, err := gc.CreatePullRequest(owner, repo, gitea.CreatePullRequestOption{Head: head, Base: base, Title: title, Body: body})
	if err != nil {
		return "", fmt.Errorf("Gitea: %s", providerError(err)) //nolint:staticcheck // ST1005: as above
	}
	return pr.HTMLURL, nil
}

// providerError shortens a client library's error for the incident page.
func providerError(err error) string { return clip(strings.TrimSpace(err.Error()), 300) }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// hostGit runs git on the host over a repair's workspace, without trusting
// anything the repair command could have written: the workspace's own .git
// (its config, hooks, filters, fsmonitor, remotes) belongs to the command, so
// git works in a fresh repository of anvil's own (GIT_DIR in a temporary
// folder, the workspace as its work tree), whose objects come from the
// workspace's as alternates (data only) and whose HEAD is the commit anvil
// checked out. The environment is cleaned (no inherited config, credential
// helpers or prompts), the author set, and the provider token sent as an
// http.extraHeader through GIT_CONFIG_* variables — never in argv, a URL,
// a config file, the log or an error text (it is redacted from git's
// stderr). The push goes to the project's repository address, checked by the
// checkout policy again and pinned to the checked addresses.
type hostGit struct {
	dir     string
	home    string
	env     []string
	secrets []string
}

func newHostGit(ctx context.Context, dir, base, repoURL, token string, policy repourl.Policy) (*hostGit, error) {
	chk, err := policy.Check(ctx, repoURL)
	if err != nil {
		return nil, fmt.Errorf("repository %s: %w", repoURL, err)
	}
	home, err := os.MkdirTemp("", "anvil-repair-git-")
	if err != nil {
		return nil, err
	}
	g := &hostGit{dir: dir, home: home}
	gitDir := filepath.Join(home, "repo.git")
	config := [][2]string{
		{"safe.directory", "*"},
		{"credential.helper", ""},
		{"core.hooksPath", os.DevNull},
		{"core.fsmonitor", "false"},
		{"protocol.ext.allow", "never"},
		{"user.name", "anvil"},
		{"user.email", "anvil@localhost"},
		{"commit.gpgSign", "false"},
	}
	protocols := "https:http:ssh"
	if policy.AllowLocal {
		protocols += ":file"
	} else {
		config = append(config, [2]string{"http.followRedirects", "false"})
		if _, err := netip.ParseAddr(chk.Host); err != nil && len(chk.Addrs) > 0 && chk.Kind == repourl.KindHTTP {
			config = append(config, [2]string{"http.curloptResolve", sandbox.CurlResolve(chk)})
		}
	}
	if token != "" {
		auth := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + token))
		key := "http.extraHeader"
		if u, err := url.Parse(repoURL); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
			key = "http." + u.Scheme + "://" + u.Host + "/.extraHeader"
		}
		config = append(config, [2]string{key, "Authorization: Basic " + auth})
		g.secrets = append(g.secrets, token, auth)
	}
	g.env = []string{
		"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "XDG_CONFIG_HOME=" + home, "LC_ALL=C", "LANG=C",
		"GIT_DIR=" + gitDir, "GIT_WORK_TREE=" + dir, "GIT_ALLOW_PROTOCOL=" + protocols,
		"GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_ASKPASS=/bin/false", "SSH_ASKPASS=/bin/false",
		"GIT_SSH_COMMAND=ssh -o BatchMode=yes",
		"GIT_AUTHOR_NAME=anvil", "GIT_AUTHOR_EMAIL=anvil@localhost", "GIT_COMMITTER_NAME=anvil", "GIT_COMMITTER_EMAIL=anvil@localhost",
		"GIT_CONFIG_COUNT=" + strconv.Itoa(len(config)),
	}
	for i, kv := range config {
		n := strconv.Itoa(i)
		g.env = append(g.env, "GIT_CONFIG_KEY_"+n+"="+kv[0], "GIT_CONFIG_VALUE_"+n+"="+kv[1])
	}
	fail := func(err error) (*hostGit, error) {
		g.close()
		return nil, err
	}
	if _, err := g.run(ctx, "init", "-q"); err != nil {
		return fail(err)
	}
	// The checkout is shallow: base is where anvil's history stops.
	alt := filepath.Join(gitDir, "objects", "info", "alternates")
	if err := os.WriteFile(alt, []byte(filepath.Join(dir, ".git", "objects")+"\n"), 0o600); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(gitDir, "shallow"), []byte(base+"\n"), 0o600); err != nil {
		return fail(err)
	}
	if _, err := g.run(ctx, "update-ref", "HEAD", base); err != nil {
		return fail(err)
	}
	if _, err := g.run(ctx, "read-tree", "HEAD"); err != nil {
		return fail(err)
	}
	return g, nil
}

func (g *hostGit) close() { _ = os.RemoveAll(g.home) }

func (g *hostGit) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Env = g.env
	cmd.Dir = "/"
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		for _, s := range g.secrets {
			msg = strings.ReplaceAll(msg, s, "[REDACTED]")
		}
		return "", fmt.Errorf("git %s: %w: %s", args[0], err, clip(msg, 500))
	}
	return stdout.String(), nil
}

var _ RepairHandler = (*Repair)(nil)
