package sandbox

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"anvil/domain/repourl"
)

// ErrBranchNotFound is returned (wrapped) by [Checkout] when the remote has
// no such branch.
var ErrBranchNotFound = errors.New("sandbox: branch not found on the remote")

var shaRE = regexp.MustCompile(`^(?:[0-9a-fA-F]{40}|[0-9a-fA-F]{64})$`)

// Git checks repositories out, and probes them, under a checkout policy.
//
// Every repository address goes through [repourl.Policy] first (local
// repositories and addresses on the worker's own or private network are
// refused unless the policy allows them), and git is then held to what was
// checked: only the https, http and ssh protocols (and file when local
// checkouts are allowed), no HTTP redirects (a redirect could lead anywhere),
// and the host name pinned to the checked addresses (http.curloptResolve for
// http(s), ssh's HostName for ssh) so that a DNS answer that changes between
// the check and the connection cannot lead git elsewhere.
//
// When confined, git runs inside bubblewrap as the sandbox user: the
// network is shared but the host's files are not — git sees /usr and the
// other system directories read-only, the /etc entries of etcFiles (name
// resolution, certificates), a private /tmp as HOME, the checkout directory
// read-write and, when local checkouts are allowed, the local repository
// read-only; nothing else of the host. Unconfined (ANVIL_SANDBOX=process), git
// runs on the host as the host process, under the same policy.
type Git struct {
	// Policy decides which repositories may be checked out.
	Policy repourl.Policy
	bwrap  string
}

// NewGit returns a Git that runs git inside bubblewrap when confined (an
// error when bwrap cannot run here), on the host otherwise.
func NewGit(confined bool, policy repourl.Policy) (*Git, error) {
	g := &Git{Policy: policy}
	if confined {
		path, err := lookBwrap()
		if err != nil {
			return nil, err
		}
		// The probe builds git's sandbox, which shares the network (no
		// loopback to bring up over netlink, which the web tier's unit
		// does not allow), not a run's.
		if err := probeBwrapArgs(path, append(baseBwrapArgs(1<<20), "--share-net", "--remount-ro", "/", "--clearenv", "--", "/bin/true")); err != nil {
			return nil, err
		}
		g.bwrap = path
	}
	return g, nil
}

// Confined reports whether git runs inside bubblewrap.
func (g *Git) Confined() bool { return g.bwrap != "" }

// gitTmpBytes bounds the private /tmp (git's HOME) of a confined git.
const gitTmpBytes = 64 << 20

// Checkout prepares a fresh workspace: it clones repoURL into dir (which must
// not exist or be empty) and checks out sha when given (a full 40- or 64-hex
// commit id), else the head of branch, and returns the checked-out commit
// (HEAD, read from the checkout's files; see readHead). When branch is given the local branch of that name
// points at the commit; otherwise HEAD is detached.
//
// git runs in a cleaned environment: nothing is inherited, HOME and
// XDG_CONFIG_HOME are an empty temporary directory, GIT_CONFIG_NOSYSTEM=1,
// GIT_TERMINAL_PROMPT=0, no credential helpers, ssh in batch mode. Fetches
// are shallow (git init, git fetch --depth 1 origin <sha>, or a shallow
// clone of the branch); when the server refuses a fetch by sha, Checkout
// falls back to fetching all branches and tags.
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
// [NewWorkspace]), the checked-out tree belongs to that user.
// Git's progress output goes to log (which may be nil).
func (g *Git) Checkout(ctx context.Context, repoURL, branch, sha, token, dir string, log io.Writer) (string, error) {
	return g.checkout(ctx, repoURL, branch, sha, token, dir, log, nil)
}

// Probe asks the repository for its branches (git ls-remote --heads), under
// the same policy and confinement as a checkout, and reports whether it
// answered.
func (g *Git) Probe(ctx context.Context, repoURL, token string) error {
	r, err := g.newRun(ctx, repoURL, token, "", io.Discard, nil)
	if err != nil {
		return err
	}
	defer r.close()
	_, err = r.git(ctx, false, "ls-remote", "--heads", "--", repoURL)
	return err
}

// checkout is Checkout with extra git configuration (for tests).
func (g *Git) checkout(ctx context.Context, repoURL, branch, sha, token, dir string, log io.Writer, extraConfig [][2]string) (string, error) {
	if log == nil {
		log = io.Discard
	}
	if sha != "" && !shaRE.MatchString(sha) {
		return "", fmt.Errorf("sandbox: commit %q is not a full hex commit id", sha)
	}
	sha = strings.ToLower(sha)
	if sha == "" && branch == "" {
		return "", errors.New("sandbox: checkout needs a branch or a commit")
	}
	if branch != "" && (strings.HasPrefix(branch, "-") || !validBranch(ctx, branch)) {
		return "", fmt.Errorf("sandbox: invalid branch name %q", branch)
	}
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("sandbox: checkout directory %q is not absolute", dir)
	}
	if err := prepareDir(dir, g.Confined()); err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("sandbox: checkout directory: %w", err)
	}
	r, err := g.newRun(ctx, repoURL, token, real, log, extraConfig)
	if err != nil {
		return "", err
	}
	defer r.close()
	src := gitSource(repoURL)

	if sha == "" {
		// A branch head: one shallow clone does init, fetch and checkout in
		// a single process (a run's checkout is on every run's critical path).
		// --template= copies no template directory: its sample hooks never
		// run (core.hooksPath is /dev/null) and would only be files to write.
		if _, err := r.git(ctx, true, "clone", "--template=", "--progress", "--no-tags", "--depth", "1", "--single-branch",
			"--branch", branch, "--", src, "."); err != nil {
			if strings.Contains(err.Error(), "not found in upstream") || strings.Contains(err.Error(), "couldn't find remote ref") {
				return "", fmt.Errorf("%w: %q in %s", ErrBranchNotFound, branch, r.redact(repoURL))
			}
			return "", err
		}
		head, err := r.head(ctx)
		if err != nil {
			return "", err
		}
		if err := chownToDir(dir, g.Confined()); err != nil {
			return "", err
		}
		return strings.TrimSpace(head), nil
	}

	if _, err := r.git(ctx, true, "init", "-q", "--template="); err != nil {
		return "", err
	}
	if _, err := r.git(ctx, true, "remote", "add", "origin", src); err != nil {
		return "", err
	}
	if _, err := r.git(ctx, true, "fetch", "--progress", "--no-tags", "--depth", "1", "origin", sha); err != nil {
		if ctx.Err() != nil {
			return "", err
		}
		fmt.Fprintf(log, "anvil: shallow fetch of %s failed; fetching all branches and tags\n", sha)
		if _, err := r.git(ctx, true, "fetch", "--progress", "--no-tags", "origin",
			"+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"); err != nil {
			return "", err
		}
		if _, err := r.git(ctx, false, "rev-parse", "--verify", "--quiet", sha+"^{commit}"); err != nil {
			return "", fmt.Errorf("sandbox: commit %s not found on the remote", sha)
		}
	}
	if branch != "" {
		_, err = r.git(ctx, true, "checkout", "-q", "-B", branch, sha)
	} else {
		_, err = r.git(ctx, true, "checkout", "-q", "--detach", sha)
	}
	if err != nil {
		return "", err
	}
	head, err := r.head(ctx)
	if err != nil {
		return "", err
	}
	if head != sha {
		return "", fmt.Errorf("sandbox: checked out %s, want %s", head, sha)
	}
	if err := chownToDir(dir, g.Confined()); err != nil {
		return "", err
	}
	return head, nil
}

// head returns the checked-out commit: read from the checkout's files
// (readHead), or, for a shape readHead does not know, from git rev-parse.
func (r *gitRun) head(ctx context.Context) (string, error) {
	if sha, ok := readHead(r.dir); ok {
		return sha, nil
	}
	out, err := r.git(ctx, false, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// validBranch asks git whether refs/heads/branch is a valid ref name. It
// runs on the host: check-ref-format reads no repository and no file.
func validBranch(ctx context.Context, branch string) bool {
	path, err := exec.LookPath("git")
	if err != nil {
		return false
	}
	cmd := exec.CommandContext(ctx, path, "check-ref-format", "refs/heads/"+branch)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1", "HOME=/nonexistent"}
	cmd.Dir = "/"
	return cmd.Run() == nil
}

// prepareDir makes sure dir exists and is empty. A directory it makes for
// a confined git belongs to the sandbox user (when the host process is root),
// who must write it.
func prepareDir(dir string, confined bool) error {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("sandbox: checkout directory: %w", err)
		}
		if confined && os.Geteuid() == 0 {
			if err := os.Chown(dir, SandboxUID, SandboxGID); err != nil {
				return fmt.Errorf("sandbox: checkout directory: %w", err)
			}
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
// is root and dir belongs to someone else. A confined git runs as the
// sandbox user: when dir is theirs, everything git wrote is theirs already
// and the walk is skipped (it would cost a system call per file).
func chownToDir(dir string, confined bool) error {
	if os.Geteuid() != 0 {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || (st.Uid == 0 && st.Gid == 0) || confined && st.Uid == SandboxUID && st.Gid == SandboxGID {
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

// gitRun runs git commands for one checkout or probe.
type gitRun struct {
	path    string
	bwrap   string   // run inside bubblewrap when set
	dir     string   // the checkout directory ("" for a probe)
	roBinds []string // host paths a confined git may read (a local repository)
	home    string
	env     []string
	secrets []string
	log     *redactWriter
}

// newRun applies the policy to repoURL and prepares git's environment for
// it; dir is the (symlink-resolved) checkout directory or "".
func (g *Git) newRun(ctx context.Context, repoURL, token, dir string, log io.Writer, extraConfig [][2]string) (*gitRun, error) {
	path, err := exec.LookPath("git")
	if err != nil {
		return nil, errors.New("sandbox: git is not installed")
	}
	var secrets []string
	if u, err := url.Parse(repoURL); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			secrets = append(secrets, pw)
		}
	}
	chk, err := g.Policy.Check(ctx, repoURL)
	if err != nil {
		return nil, fmt.Errorf("sandbox: repository %s: %w", redact(repoURL, secrets), err)
	}
	r := &gitRun{path: path, bwrap: g.bwrap, dir: dir, secrets: secrets}
	if g.bwrap != "" {
		r.home = "/tmp" // the sandbox's private /tmp
	} else if r.home, err = os.MkdirTemp("", "anvil-git-home-"); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}

	protocols := "https:http:ssh"
	config := [][2]string{
		{"safe.directory", "*"}, // dir may belong to the sandbox uid
		{"credential.helper", ""},
		{"core.hooksPath", os.DevNull},
		{"advice.detachedHead", "false"},
		{"init.defaultBranch", "anvil"},
		{"protocol.ext.allow", "never"},
	}
	sshCommand := SSHCommand(chk, g.Policy.AllowLocal)
	if g.Policy.AllowLocal {
		protocols += ":file"
		if chk.Kind == repourl.KindLocal && g.bwrap != "" {
			if !filepath.IsAbs(chk.Path) {
				return nil, fmt.Errorf("sandbox: local repository %q must be an absolute path", chk.Path)
			}
			r.roBinds = append(r.roBinds, filepath.Clean(chk.Path))
		}
	} else {
		// A redirect is a new address the policy has not seen.
		config = append(config, [2]string{"http.followRedirects", "false"}, [2]string{"protocol.file.allow", "never"})
		// ssh is pinned by SSHCommand above.
		if _, err := netip.ParseAddr(chk.Host); err != nil && len(chk.Addrs) > 0 && chk.Kind == repourl.KindHTTP {
			config = append(config, [2]string{"http.curloptResolve", CurlResolve(chk)})
		}
	}
	config = append(config, extraConfig...)
	if token != "" {
		auth := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + token))
		key := "http.extraHeader"
		if u, err := url.Parse(repoURL); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
			key = "http." + u.Scheme + "://" + u.Host + "/.extraHeader"
		}
		config = append(config, [2]string{key, "Authorization: Basic " + auth})
		r.secrets = append(r.secrets, token, auth)
	}

	r.env = []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + r.home,
		"XDG_CONFIG_HOME=" + r.home,
		"LC_ALL=C",
		"LANG=C",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_ALLOW_PROTOCOL=" + protocols,
		"GIT_ASKPASS=/bin/false",
		"SSH_ASKPASS=/bin/false",
		"GIT_SSH_COMMAND=" + sshCommand,
		"GIT_CONFIG_COUNT=" + strconv.Itoa(len(config)),
	}
	for i, kv := range config {
		n := strconv.Itoa(i)
		r.env = append(r.env, "GIT_CONFIG_KEY_"+n+"="+kv[0], "GIT_CONFIG_VALUE_"+n+"="+kv[1])
	}
	r.log = &redactWriter{w: log, secrets: r.secrets}
	return r, nil
}

// CurlResolve is the http.curloptResolve entry that pins chk's host and
// port to its checked addresses.
func CurlResolve(chk repourl.Checked) string {
	addrs := make([]string, 0, len(chk.Addrs))
	for _, a := range chk.Addrs {
		if a.Is6() {
			addrs = append(addrs, "["+a.String()+"]")
		} else {
			addrs = append(addrs, a.String())
		}
	}
	return chk.Host + ":" + chk.Port + ":" + strings.Join(addrs, ",")
}

func (r *gitRun) close() {
	r.log.Flush()
	if r.bwrap == "" {
		_ = os.RemoveAll(r.home)
	}
}

// redact removes every secret from s.
func (r *gitRun) redact(s string) string { return redact(s, r.secrets) }

// command returns the command that runs git args in the checkout directory:
// git itself, or bwrap around it. The environment goes to bwrap's own
// environment, which bwrap hands to git: never to argv, where --setenv
// would put the token.
func (r *gitRun) command(ctx context.Context, args []string) *exec.Cmd {
	gitArgs := args
	if r.dir != "" {
		gitArgs = append([]string{"-C", r.dir}, args...)
	}
	if r.bwrap == "" {
		cmd := exec.CommandContext(ctx, r.path, gitArgs...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd
	}
	a := baseBwrapArgs(gitTmpBytes)
	a = append(a, "--share-net")
	if r.dir != "" {
		a = append(a, "--bind", r.dir, r.dir)
	}
	for _, p := range r.roBinds {
		a = append(a, "--ro-bind", p, p)
	}
	a = append(a, "--remount-ro", "/", "--chdir", "/", "--", r.path)
	cmd := exec.CommandContext(ctx, r.bwrap, append(a, gitArgs...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: credential()}
	return cmd
}

// git runs git args; its stderr goes to the log when toLog. It returns
// stdout, or an error with git's (redacted) stderr.
func (r *gitRun) git(ctx context.Context, toLog bool, args ...string) (string, error) {
	cmd := r.command(ctx, args)
	cmd.Env = r.env
	cmd.Dir = "/"
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if toLog {
		cmd.Stderr = io.MultiWriter(&stderr, r.log)
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	closeOnExecInherited()
	err := cmd.Run()
	r.log.Flush()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 2000 {
			msg = "…" + msg[len(msg)-2000:]
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("sandbox: git %s: %w", args[0], context.Cause(ctx))
		}
		return "", fmt.Errorf("sandbox: git %s: %w: %s", args[0], err, r.redact(msg))
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

// Head resolves a branch's head commit (git ls-remote), under the same
// policy and confinement as a checkout.
func (g *Git) Head(ctx context.Context, repoURL, token, branch string) (string, error) {
	if strings.HasPrefix(branch, "-") || !validBranch(ctx, branch) {
		return "", fmt.Errorf("sandbox: invalid branch name %q", branch)
	}
	r, err := g.newRun(ctx, repoURL, token, "", io.Discard, nil)
	if err != nil {
		return "", err
	}
	defer r.close()
	out, err := r.git(ctx, false, "ls-remote", "--", repoURL, "refs/heads/"+branch)
	if err != nil {
		return "", err
	}
	sha, _, _ := strings.Cut(strings.TrimSpace(out), "\t")
	if !shaRE.MatchString(sha) {
		return "", fmt.Errorf("sandbox: branch %q not found", branch)
	}
	return strings.ToLower(sha), nil
}

// gitSource is the address git is given for repoURL: a local repository
// named by its path goes as a file:// URL. Given a bare path, git copies
// the repository's files rather than speaking its protocol, so the
// shallow clone's --depth is ignored (with a warning in every run's log)
// and the whole history is copied.
func gitSource(repoURL string) string {
	if filepath.IsAbs(repoURL) && !strings.Contains(repoURL, "://") {
		return "file://" + filepath.ToSlash(filepath.Clean(repoURL))
	}
	return repoURL
}
