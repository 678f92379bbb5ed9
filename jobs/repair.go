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

	"anvil/domain"
	"anvil/domain/forgeapi"
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
//   - no forge to propose it to: passed, the patch ready → NEEDS_HUMAN
//   - provider refused the pull request: failed / provider_error → NEEDS_HUMAN
//   - pull request opened: passed → PR_OPEN with its URL
type Repair struct {
	Incidents *incident.Incidents
	Projects  *project.Projects
	// Policy is the checkout policy, applied again to the push and to the
	// forge's API (ANVIL_CHECKOUT_ALLOW_LOCAL is the one switch for both).
	Policy repourl.Policy
	// HTTPClient talks to the provider's API: forgeapi.NewHTTPClient
	// under Policy.
	HTTPClient *http.Client
}

// NewRepair builds the handler.
func NewRepair(in *incident.Incidents, ps *project.Projects, policy repourl.Policy) *Repair {
	return &Repair{Incidents: in, Projects: ps, Policy: policy, HTTPClient: forgeapi.NewHTTPClient(policy)}
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
		// The incident's reason never names the worker's folders either.
		for _, p := range hostPaths(filepath.Dir(workspace)) {
			reason = strings.ReplaceAll(reason, p, "***")
		}
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
	// Nothing leaves the workspace for a pull request that cannot be
	// opened. Without a forge to propose it to, the patch is the outcome:
	// the repair command did its job, so the run passes, and the incident
	// waits for a person with the patch on the run's page
	// (docs/architecture.md, "Repairs").
	if err := providerProblem(proj, token); err != nil {
		log.Printf("repair: %s (no pull request: %v)", runs.PatchReadyWords, err)
		if err := log.MarkPatchReady(ctx); err != nil {
			return runs.TerminalReport{}, err
		}
		reason := runs.PatchReadyWords + " it from the repair run's page (no pull request: " + err.Error() + ")"
		if err := r.Incidents.RepairNeedsHuman(ctx, run, reason); err != nil {
			return runs.TerminalReport{}, err
		}
		return runs.TerminalReport{State: runs.StatePassed, ExitCode: &code}, nil
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
	if prURL == "" {
		log.Printf("repair: pull request opened; the forge's address for it is not an https:// URL and is not kept")
	} else {
		log.Printf("repair: pull request %s", prURL)
	}
	if err := r.Incidents.RepairPROpened(ctx, run, prURL); err != nil {
		return runs.TerminalReport{}, err
	}
	return runs.TerminalReport{State: runs.StatePassed, ExitCode: &code}, nil
}

// openPR proposes branch into the default branch through the provider's
// API (forgeapi.OpenPullRequest, the client every forge call shares) and
// returns the pull request's web URL when it may be shown (forgeapi.WebURL:
// https://, or http:// when private forges are allowed; "" otherwise).
// Errors name the forge's HTTP status and code, never its answer's body
// or the token.
func (r *Repair) openPR(ctx context.Context, proj *domain.Project, token, branch, title, body string) (string, error) {
	if err := providerProblem(proj, token); err != nil {
		return "", err
	}
	hc := r.HTTPClient
	if hc == nil {
		hc = forgeapi.NewHTTPClient(r.Policy)
	}
	f := forgeapi.Forge{Provider: proj.Provider, APIURL: strings.TrimSpace(proj.ProviderAPIURL), Repo: proj.ProviderRepo, Token: token}
	u, err := forgeapi.OpenPullRequest(ctx, hc, f, forgeapi.PullRequest{Head: branch, Base: proj.DefaultBranch, Title: title, Body: body})
	if err != nil {
		return "", errors.New(strings.ReplaceAll(err.Error(), token, "[REDACTED]"))
	}
	return forgeapi.WebURL(u, r.Policy.AllowLocal), nil
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
// checkout policy again and pinned to the checked addresses, over http(s)
// (http.curloptResolve) and ssh (sandbox.SSHCommand) alike.
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
		"GIT_SSH_COMMAND=" + sandbox.SSHCommand(chk, policy.AllowLocal),
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
