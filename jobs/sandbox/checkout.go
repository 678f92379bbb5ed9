package sandbox

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrBranchNotFound is returned (wrapped) by [Checkout] when the remote has
// no such branch.
var ErrBranchNotFound = errors.New("sandbox: branch not found on the remote")

var shaRE = regexp.MustCompile(`^(?:[0-9a-fA-F]{40}|[0-9a-fA-F]{64})$`)

// Checkout prepares a fresh workspace: it clones repoURL into dir (which must
// not exist or be empty) and checks out sha when given (a full 40- or 64-hex
// commit id), else the head of branch, and returns the checked-out commit
// (git rev-parse HEAD). When branch is given the local branch of that name
// points at the commit; otherwise HEAD is detached.
//
// git runs on the host as the host process (it needs the network and, for
// ssh URLs, the host's ssh keys and known_hosts; ssh runs in batch mode), in
// a cleaned environment: nothing is inherited, HOME and XDG_CONFIG_HOME are
// an empty temporary directory, GIT_CONFIG_NOSYSTEM=1, GIT_TERMINAL_PROMPT=0,
// no credential helpers. Fetches are shallow (git init, git fetch --depth 1
// origin <sha | refs/heads/branch>); when the server refuses a fetch by sha,
// Checkout falls back to fetching all branches and tags.
//
// token (may be empty) is the provider token for private http(s)
// repositories. It is sent as an "Authorization: Basic
// base64(x-access-token:TOKEN)" header configured through the GIT_CONFIG_*
// environment variables and scoped to the repository's scheme and host, so it
// never appears in argv or .git/config; it (and any password in repoURL) is
// also redacted from log and from error texts. Put credentials in token,
// not in repoURL: the URL is stored in .git/config as the origin remote.
//
// When the host process is root and dir is owned by another user (as made by
// [NewWorkspace]), the checked-out tree is handed over to that user.
// Git's progress output goes to log (which may be nil).
func Checkout(ctx context.Context, repoURL, branch, sha, token, dir string, log io.Writer) (string, error) {
	return checkout(ctx, repoURL, branch, sha, token, dir, log, nil)
}

// checkout is Checkout with extra git configuration (for tests).
func checkout(ctx context.Context, repoURL, branch, sha, token, dir string, log io.Writer, extraConfig [][2]string) (string, error) {
	if log == nil {
		log = io.Discard
	}
	g, err := newGitRun(repoURL, token, dir, log, extraConfig)
	if err != nil {
		return "", err
	}
	defer g.close()

	if repoURL == "" || strings.HasPrefix(repoURL, "-") {
		return "", fmt.Errorf("sandbox: invalid repository URL %q", g.redact(repoURL))
	}
	if sha != "" && !shaRE.MatchString(sha) {
		return "", fmt.Errorf("sandbox: commit %q is not a full hex commit id", sha)
	}
	sha = strings.ToLower(sha)
	if sha == "" && branch == "" {
		return "", errors.New("sandbox: checkout needs a branch or a commit")
	}
	if branch != "" {
		if strings.HasPrefix(branch, "-") {
			return "", fmt.Errorf("sandbox: invalid branch name %q", branch)
		}
		if _, err := g.git(ctx, false, "check-ref-format", "refs/heads/"+branch); err != nil {
			return "", fmt.Errorf("sandbox: invalid branch name %q", branch)
		}
	}
	if err := prepareDir(dir); err != nil {
		return "", err
	}

	if sha == "" {
		// A branch head: one shallow clone does init, fetch and checkout in
		// a single process (a run's checkout is on every run's critical path).
		if _, err := g.git(ctx, true, "clone", "--progress", "--no-tags", "--depth", "1", "--single-branch",
			"--branch", branch, "--", repoURL, "."); err != nil {
			if strings.Contains(err.Error(), "not found in upstream") || strings.Contains(err.Error(), "couldn't find remote ref") {
				return "", fmt.Errorf("%w: %q in %s", ErrBranchNotFound, branch, g.redact(repoURL))
			}
			return "", err
		}
		head, err := g.git(ctx, false, "rev-parse", "HEAD")
		if err != nil {
			return "", err
		}
		if err := chownToDir(dir); err != nil {
			return "", err
		}
		return strings.TrimSpace(head), nil
	}

	if _, err := g.git(ctx, true, "init", "-q"); err != nil {
		return "", err
	}
	if _, err := g.git(ctx, true, "remote", "add", "origin", repoURL); err != nil {
		return "", err
	}

	target := "FETCH_HEAD"
	if sha != "" {
		target = sha
		if _, err := g.git(ctx, true, "fetch", "--progress", "--no-tags", "--depth", "1", "origin", sha); err != nil {
			if ctx.Err() != nil {
				return "", err
			}
			fmt.Fprintf(log, "anvil: shallow fetch of %s failed; fetching all branches and tags\n", sha)
			if _, err := g.git(ctx, true, "fetch", "--progress", "--no-tags", "origin",
				"+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"); err != nil {
				return "", err
			}
			if _, err := g.git(ctx, false, "rev-parse", "--verify", "--quiet", sha+"^{commit}"); err != nil {
				return "", fmt.Errorf("sandbox: commit %s not found on the remote", sha)
			}
		}
	} else {
		if _, err := g.git(ctx, true, "fetch", "--progress", "--no-tags", "--depth", "1", "origin", "refs/heads/"+branch); err != nil {
			if strings.Contains(err.Error(), "couldn't find remote ref") {
				return "", fmt.Errorf("%w: %q in %s", ErrBranchNotFound, branch, g.redact(repoURL))
			}
			return "", err
		}
	}
	if branch != "" {
		_, err = g.git(ctx, true, "checkout", "-q", "-B", branch, target)
	} else {
		_, err = g.git(ctx, true, "checkout", "-q", "--detach", target)
	}
	if err != nil {
		return "", err
	}
	head, err := g.git(ctx, false, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	head = strings.TrimSpace(head)
	if sha != "" && head != sha {
		return "", fmt.Errorf("sandbox: checked out %s, want %s", head, sha)
	}
	if err := chownToDir(dir); err != nil {
		return "", err
	}
	return head, nil
}

// prepareDir makes sure dir exists and is empty.
func prepareDir(dir string) error {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("sandbox: checkout directory: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("sandbox: checkout directory: %w", err)
	case len(ents) > 0:
		return fmt.Errorf("sandbox: checkout directory %s is not empty", dir)
	}
	return nil
}

// chownToDir gives every file below dir to dir's owner when the host process
// is root and dir belongs to someone else.
func chownToDir(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || (st.Uid == 0 && st.Gid == 0) {
		return nil
	}
	uid, gid := int(st.Uid), int(st.Gid)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
	if err != nil {
		return fmt.Errorf("sandbox: handing the checkout to uid %d: %w", uid, err)
	}
	return nil
}

// gitRun runs git commands for one checkout.
type gitRun struct {
	path    string
	dir     string
	home    string
	env     []string
	secrets []string
	log     *redactWriter
}

func newGitRun(repoURL, token, dir string, log io.Writer, extraConfig [][2]string) (*gitRun, error) {
	path, err := exec.LookPath("git")
	if err != nil {
		return nil, errors.New("sandbox: git is not installed")
	}
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("sandbox: checkout directory %q is not absolute", dir)
	}
	home, err := os.MkdirTemp("", "anvil-git-home-")
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	g := &gitRun{path: path, dir: dir, home: home}

	config := [][2]string{
		{"safe.directory", "*"}, // dir may belong to the sandbox uid
		{"credential.helper", ""},
		{"core.hooksPath", os.DevNull},
		{"advice.detachedHead", "false"},
		{"init.defaultBranch", "anvil"},
		{"protocol.ext.allow", "never"},
	}
	config = append(config, extraConfig...)
	if token != "" {
		auth := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + token))
		key := "http.extraHeader"
		if u, err := url.Parse(repoURL); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
			key = "http." + u.Scheme + "://" + u.Host + "/.extraHeader"
		}
		config = append(config, [2]string{key, "Authorization: Basic " + auth})
		g.secrets = append(g.secrets, token, auth)
	}
	if u, err := url.Parse(repoURL); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			g.secrets = append(g.secrets, pw)
		}
	}

	g.env = []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + home,
		"LC_ALL=C",
		"LANG=C",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_ASKPASS=/bin/false",
		"SSH_ASKPASS=/bin/false",
		"GIT_SSH_COMMAND=ssh -o BatchMode=yes",
		"GIT_CONFIG_COUNT=" + strconv.Itoa(len(config)),
	}
	for i, kv := range config {
		n := strconv.Itoa(i)
		g.env = append(g.env, "GIT_CONFIG_KEY_"+n+"="+kv[0], "GIT_CONFIG_VALUE_"+n+"="+kv[1])
	}
	g.log = &redactWriter{w: log, secrets: g.secrets}
	return g, nil
}

func (g *gitRun) close() {
	g.log.Flush()
	_ = os.RemoveAll(g.home)
}

// redact removes every secret from s.
func (g *gitRun) redact(s string) string { return redact(s, g.secrets) }

// git runs git -C dir args…; its stderr goes to the log when toLog. It
// returns stdout, or an error with git's (redacted) stderr.
func (g *gitRun) git(ctx context.Context, toLog bool, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, g.path, append([]string{"-C", g.dir}, args...)...)
	if args[0] == "check-ref-format" {
		cmd = exec.CommandContext(ctx, g.path, args...)
	}
	cmd.Env = g.env
	cmd.Dir = "/"
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if toLog {
		cmd.Stderr = io.MultiWriter(&stderr, g.log)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	closeOnExecInherited()
	err := cmd.Run()
	g.log.Flush()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 2000 {
			msg = "…" + msg[len(msg)-2000:]
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("sandbox: git %s: %w", args[0], context.Cause(ctx))
		}
		return "", fmt.Errorf("sandbox: git %s: %v: %s", args[0], err, g.redact(msg))
	}
	return stdout.String(), nil
}

// redact replaces every non-empty secret in s with "[REDACTED]".
func redact(s string, secrets []string) string {
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "[REDACTED]")
		}
	}
	return s
}

// redactWriter passes output through line by line ('\n' or '\r'), with
// secrets redacted; Flush writes a pending partial line.
type redactWriter struct {
	w       io.Writer
	secrets []string
	buf     []byte
}

func (r *redactWriter) Write(p []byte) (int, error) {
	r.buf = append(r.buf, p...)
	if i := bytes.LastIndexAny(r.buf, "\r\n"); i >= 0 {
		line := redact(string(r.buf[:i+1]), r.secrets)
		r.buf = append(r.buf[:0], r.buf[i+1:]...)
		if _, err := io.WriteString(r.w, line); err != nil {
			return len(p), nil // the log is best effort; git must not fail for it
		}
	}
	return len(p), nil
}

// Flush writes out a pending partial line.
func (r *redactWriter) Flush() {
	if len(r.buf) > 0 {
		_, _ = io.WriteString(r.w, redact(string(r.buf), r.secrets))
		r.buf = r.buf[:0]
	}
}
