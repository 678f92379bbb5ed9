//go:build package

package packaging

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestUnitsUnderSystemd installs the .deb into a Debian root that boots a
// real systemd (systemd-nspawn --boot), configures it as docs/install.md
// says, starts both units and runs a build through the worker: the units'
// confinement is enforced there as on a host, so this is where a system-call
// filter that refuses bubblewrap (capset, pivot_root), a /proc that hides
// what bubblewrap reads, or a probe that waits for ever shows. The build
// changes the owner of a file to its own uid (chown) and shows that it
// inherited the unit's seccomp filter; the journal must hold no refusal.
func TestUnitsUnderSystemd(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"systemd-nspawn", "nsenter", "mmdebstrap"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (apt-get install --no-install-recommends systemd-container mmdebstrap util-linux)", tool)
		}
	}
	tarball, err := SystemdRoot(context.Background(), DebianRootCache())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "tar", "-xf", tarball, "--numeric-owner", "-C", root)
	b, err := os.ReadFile(built.deb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "var/cache/anvil.deb"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	// The project's repository, made here, owned by the service's user
	// inside (below).
	repo := filepath.Join(root, "srv/repo")
	run(t, "git", "init", "-q", "-b", "main", repo)
	run(t, "git", "-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "first")

	ct := bootContainer(t, root)
	// Until its bus is up systemctl cannot ask; then --wait waits for the
	// boot to finish.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		out, _ := ct.output(nil, "systemctl", "is-system-running", "--wait")
		if strings.Contains(out, "running") || strings.Contains(out, "degraded") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the container's systemd did not come up: %q\n%s", out, ct.console())
		}
	}
	ct.run(t, "dpkg", "-i", "/var/cache/anvil.deb")
	ct.run(t, "chown", "-R", "anvil:anvil", "/srv/repo")

	// The root's Postgres took whatever port was free where mmdebstrap ran.
	var port string
	for _, l := range strings.Split(ct.run(t, "pg_lsclusters", "--no-header"), "\n") {
		if f := strings.Fields(l); len(f) >= 3 {
			port = f[2]
		}
	}
	if _, err := strconv.Atoi(port); err != nil {
		t.Fatalf("no Postgres cluster in the root: %q", port)
	}
	ct.run(t, "runuser", "-u", "postgres", "--", "psql", "-p", port, "-qc", "CREATE ROLE anvil LOGIN PASSWORD 'pw'", "-c", "CREATE DATABASE anvil OWNER anvil")
	f, err := os.OpenFile(filepath.Join(root, "etc/anvil/anvil.env"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "\n# Set by the operator.\nANVIL_DATABASE_URL=postgres://anvil:pw@127.0.0.1:%s/anvil?sslmode=disable\nANVIL_PUBLIC_URL=http://127.0.0.1:8080\nANVIL_CHECKOUT_ALLOW_LOCAL=true\n", port)
	f.Close()

	// admin check from the operator's shell says what it cannot see.
	if out, err := ct.output(nil, "runuser", "-u", "anvil", "--", "anvil", "admin", "check", "--env-file", "/etc/anvil/anvil.env"); err != nil ||
		!strings.Contains(out, "outside the unit's confinement") {
		t.Errorf("anvil admin check: %v\n%s", err, out)
	}

	// A Type=notify unit that never gets ready would hold a blocking start
	// for its whole TimeoutStartSec: start without blocking, then ask.
	ct.run(t, "systemctl", "start", "--no-block", "anvil.service", "anvil-worker.service")
	for _, u := range []string{"anvil.service", "anvil-worker.service"} {
		ct.waitActive(t, u)
	}

	out, err := ct.output(strings.NewReader("a long enough password\n"), "runuser", "-u", "anvil", "--",
		"anvil", "admin", "bootstrap", "--env-file", "/etc/anvil/anvil.env", "--org", "acme", "--email", "owner@acme.test")
	var boot struct{ Token string }
	if i := strings.Index(out, `{"org_id"`); err != nil || i < 0 || json.Unmarshal([]byte(strings.SplitN(out[i:], "\n", 2)[0]), &boot) != nil || boot.Token == "" {
		t.Fatalf("bootstrap: %v\n%s", err, out)
	}
	api := func(method, path, body string, v any) {
		t.Helper()
		args := []string{"curl", "-sS", "--fail-with-body", "-X", method, "http://127.0.0.1:8080/api/private" + path,
			"-H", "Authorization: Bearer " + boot.Token, "-H", "Content-Type: application/json"}
		if body != "" {
			args = append(args, "-d", body)
		}
		out := ct.run(t, args...)
		if v != nil {
			if err := json.Unmarshal([]byte(out), v); err != nil {
				t.Fatalf("%s %s: %v\n%s", method, path, err, out)
			}
		}
	}
	var proj struct{ Warnings []string }
	api("POST", "/projects", `{"slug":"shop","name":"shop","repo_url":"/srv/repo","default_branch":"main",
		"run_command":"touch f && chown \"$(id -u)\" f && grep ^Seccomp: /proc/self/status && echo built-ok"}`, &proj)
	if len(proj.Warnings) > 0 {
		t.Errorf("saving the project warned: %v", proj.Warnings)
	}
	var queued struct {
		RunID string `json:"run_id"`
	}
	api("POST", "/projects/shop/runs", `{"branch":"main"}`, &queued)
	var status string
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		var r struct{ Status string }
		api("GET", "/runs/"+queued.RunID, "", &r)
		status = r.Status
		// The run's end: passed, failed or canceled (domain/run).
		if status == "passed" || status == "failed" || status == "canceled" || time.Now().After(deadline) {
			break
		}
	}
	log := ct.run(t, "curl", "-sS", "http://127.0.0.1:8080/api/private/runs/"+queued.RunID+"/logs", "-H", "Authorization: Bearer "+boot.Token)
	if status != "passed" || !strings.Contains(log, "built-ok") {
		t.Errorf("the run ended %q:\n%s\n%s", status, log, ct.journal())
	}
	// Mode 2: the build ran under the worker unit's system-call filter.
	if !strings.Contains(log, "Seccomp:\t2") {
		t.Errorf("the build did not run under the unit's filter:\n%s", log)
	}

	journal := ct.journal()
	for _, bad := range []string{"capset failed", "overflowuid", "cannot be confined", "not probed", "Operation not permitted", "ANVIL_SANDBOX=process"} {
		if strings.Contains(journal, bad) {
			t.Errorf("the journal says %q:\n%s", bad, journal)
		}
	}
	// Both stop cleanly, within their TimeoutStopSec.
	ct.run(t, "systemctl", "stop", "anvil-worker.service", "anvil.service")
	for _, u := range []string{"anvil.service", "anvil-worker.service"} {
		if res := strings.TrimSpace(ct.run(t, "systemctl", "show", "-P", "Result", u)); res != "success" {
			t.Errorf("%s stopped with result %q\n%s", u, res, ct.journal())
		}
	}
}

// container is a Debian root booted by systemd-nspawn.
type container struct {
	leader  int // the container's systemd, as the host sees it
	out     *lockedBuffer
	exited  chan struct{}
	cgroups []string
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// bootContainer boots root with systemd-nspawn (docs/install.md, "Tests"):
// in cgroups of its own, made here (nspawn puts the container beside
// itself, and the test's own cgroup is not to be touched), with a private
// network (the host's Postgres and ports stay out), unregistered (there is
// no machined), with a writable /proc/sys (bubblewrap writes its
// namespace's limits there). When the test ends the container is stopped
// with SIGTERM, whatever is left of it killed through its cgroups, and the
// cgroups and the run-time folder nspawn made removed.
func bootContainer(t *testing.T, root string) *container {
	t.Helper()
	name := fmt.Sprintf("anvil-pkgtest-%d-%d", os.Getpid(), time.Now().UnixNano())
	ct := &container{out: &lockedBuffer{}, exited: make(chan struct{})}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		ct.cgroups = []string{filepath.Join("/sys/fs/cgroup", name)}
	} else {
		// A hybrid hierarchy: systemd's named one and the unified one.
		for _, h := range []string{"systemd", "unified"} {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", h, "cgroup.procs")); err == nil {
				ct.cgroups = append(ct.cgroups, filepath.Join("/sys/fs/cgroup", h, name))
			}
		}
	}
	for _, cg := range ct.cgroups {
		if err := os.Mkdir(cg, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_, err := os.Stat("/run/systemd/nspawn")
	ownRunDir := os.IsNotExist(err)
	// The shell moves itself into the cgroups, then becomes nspawn.
	script := `for d in "$@"; do echo $$ > "$d/cgroup.procs" || exit 1; done
exec systemd-nspawn -q -D "$ROOT" --boot --private-network --register=no --keep-unit --console=read-only`
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, ct.cgroups...)...)
	cmd.Env = append(os.Environ(), "SYSTEMD_NSPAWN_API_VFS_WRITABLE=1", "ROOT="+root)
	cmd.Stdout, cmd.Stderr = ct.out, ct.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(ct.exited) }()
	t.Cleanup(func() {
		// SIGKILL to nspawn would orphan the container: SIGTERM shuts it
		// down, then its cgroups take what is left.
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-ct.exited:
		case <-time.After(90 * time.Second):
			t.Errorf("systemd-nspawn did not stop on SIGTERM")
		}
		for _, cg := range ct.cgroups {
			os.WriteFile(filepath.Join(cg, "cgroup.kill"), []byte("1"), 0)
		}
		for _, cg := range ct.cgroups {
			removeCgroup(t, cg)
		}
		if ownRunDir {
			os.RemoveAll("/run/systemd/nspawn")
		}
	})
	// The container's systemd is nspawn's child.
	for deadline := time.Now().Add(time.Minute); ct.leader == 0; time.Sleep(100 * time.Millisecond) {
		select {
		case <-ct.exited:
			t.Fatalf("systemd-nspawn exited:\n%s", ct.out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the container's systemd did not start:\n%s", ct.out)
		}
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		if f := strings.Fields(string(kids)); len(f) > 0 {
			pid, _ := strconv.Atoi(f[0])
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "systemd" {
				ct.leader = pid
			}
		}
	}
	return ct
}

// removeCgroup removes cg and the cgroups systemd made below it, deepest
// first, once their processes are gone.
func removeCgroup(t *testing.T, cg string) {
	var dirs []string
	filepath.WalkDir(cg, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		var err error
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if err = os.Remove(dirs[i]); err == nil || os.IsNotExist(err) || time.Now().After(deadline) {
				break
			}
		}
		if err != nil && !os.IsNotExist(err) {
			t.Errorf("cgroup %s: %v", dirs[i], err)
		}
	}
}

func (c *container) console() string { return c.out.String() }

// output runs a command inside the container (every namespace of its
// systemd, its root and working folder) and returns its combined output.
func (c *container) output(stdin *strings.Reader, args ...string) (string, error) {
	cmd := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(c.leader), "-a", "--"}, args...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "DEBIAN_FRONTEND=noninteractive"}
	if stdin != nil {
		cmd.Stdin = stdin
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c *container) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := c.output(nil, args...)
	if err != nil {
		t.Fatalf("in the container: %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// journal is what both units logged.
func (c *container) journal() string {
	out, _ := c.output(nil, "journalctl", "--no-pager", "-o", "short", "-u", "anvil.service", "-u", "anvil-worker.service")
	return out
}

// waitActive waits until unit is active; failed, or still activating after
// three minutes, ends the test with the journal. (`systemctl is-active A B`
// is true when either is: one unit at a time.)
func (c *container) waitActive(t *testing.T, unit string) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		state, _ := c.output(nil, "systemctl", "is-active", unit)
		switch strings.TrimSpace(state) {
		case "active":
			return
		case "failed":
			t.Fatalf("%s is %s:\n%s", unit, strings.TrimSpace(state), c.journal())
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still %s after three minutes:\n%s", unit, strings.TrimSpace(state), c.journal())
		}
	}
}
