//go:build package

// The package tests (`make test-package`, as root): they build the packages
// of this checkout, install the .deb into a fresh Debian root made by
// mmdebstrap, run the units' commands there against the local Postgres,
// check the units with systemd-analyze, upgrade from an older commit's
// package, and unpack the image with umoci.
package packaging

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"anvil/db"
	"anvil/internal/envfile"
)

// built is this checkout's packages, made once by TestMain.
var built struct {
	info              Info
	bin, deb, image   string
	digest            string
	repo, dir, goarch string
}

func TestMain(m *testing.M) {
	code, err := func() (int, error) {
		if os.Geteuid() != 0 {
			return 0, fmt.Errorf("the package tests install packages into a root file system: run them as root")
		}
		repo, err := filepath.Abs("../..")
		if err != nil {
			return 0, err
		}
		dir, err := os.MkdirTemp("", "anvil-pkgtest-")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(dir)
		ctx := context.Background()
		built.repo, built.dir, built.goarch = repo, dir, runtime.GOARCH
		if built.info, err = Describe(ctx, repo); err != nil {
			return 0, err
		}
		built.bin = filepath.Join(dir, "anvil")
		if err := BuildBinary(ctx, repo, built.bin, built.goarch, built.info); err != nil {
			return 0, err
		}
		if built.deb, err = Deb(ctx, repo, built.bin, dir, built.goarch, built.info); err != nil {
			return 0, err
		}
		built.image = filepath.Join(dir, "anvil.oci.tar")
		d, err := Image(built.bin, built.image, built.goarch, built.info)
		if err != nil {
			return 0, err
		}
		built.digest = d.String()
		return m.Run(), nil
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "package tests:", err)
		code = 1
	}
	os.Exit(code)
}

func sha(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// run runs a command and returns its combined output; a failure ends the test.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestPackagesAreReproducible builds everything a second time, as a second
// `make package` of the same commit would: the same binary, the same .deb,
// the same image digest and the same image tarball.
func TestPackagesAreReproducible(t *testing.T) {
	if built.info.Dirty {
		t.Fatalf("the checkout has uncommitted changes (version %s): commit them, a dirty tree is not reproducible", built.info.Version)
	}
	ctx := context.Background()
	dir := t.TempDir()
	bin := filepath.Join(dir, "anvil")
	if err := BuildBinary(ctx, built.repo, bin, built.goarch, built.info); err != nil {
		t.Fatal(err)
	}
	if sha(t, bin) != sha(t, built.bin) {
		t.Errorf("two builds of one commit give two binaries")
	}
	deb, err := Deb(ctx, built.repo, bin, dir, built.goarch, built.info)
	if err != nil {
		t.Fatal(err)
	}
	if sha(t, deb) != sha(t, built.deb) {
		t.Errorf("two builds of one commit give two .deb files")
	}
	image := filepath.Join(dir, "anvil.oci.tar")
	d, err := Image(bin, image, built.goarch, built.info)
	if err != nil {
		t.Fatal(err)
	}
	if d.String() != built.digest {
		t.Errorf("image digests differ: %s and %s", d, built.digest)
	}
	if sha(t, image) != sha(t, built.image) {
		t.Errorf("two builds of one commit give two image tarballs")
	}
	if !strings.Contains(filepath.Base(built.deb), "anvil_"+built.info.PackageVersion()+"_"+built.goarch+".deb") {
		t.Errorf("package name %s", built.deb)
	}
	if out := run(t, built.bin, "version"); !strings.HasPrefix(out, built.info.Version+"\n") {
		t.Errorf("anvil version printed %q, want %s", out, built.info.Version)
	}
	if f, err := elf.Open(built.bin); err != nil {
		t.Error(err)
	} else {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("the binary is not static: it has a %v program header", p.Type)
			}
		}
		f.Close()
	}
}

// --- a fresh Debian root -------------------------------------------------

var (
	rootOnce    sync.Once
	rootTarball string
	rootErr     error
)

// freshRoot unpacks a fresh Debian root into a new folder, from the
// tarball DebianRoot keeps for a week (making it takes about a minute).
func freshRoot(t *testing.T) string {
	t.Helper()
	rootOnce.Do(func() {
		rootTarball, rootErr = DebianRoot(context.Background(), DebianRootCache())
	})
	if rootErr != nil {
		t.Fatal(rootErr)
	}
	root := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "tar", "-xf", rootTarball, "--numeric-owner", "-C", root)
	return root
}

// inRoot runs a command inside root as root: bubblewrap makes root the
// file system's root (a chroot would forbid the user namespaces the
// worker's sandbox needs), sharing the host's network so that Postgres on
// 127.0.0.1 answers. /proc is the host's, bound whole: a proc that
// bubblewrap mounted (--proc) has read-only covers on /proc/sys and the
// like, and the kernel then refuses the worker's own bwrap a fresh one.
func inRoot(root string, binds []string, env []string, args ...string) *exec.Cmd {
	a := []string{"--bind", root, "/", "--bind", "/proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--die-with-parent"}
	for _, b := range binds {
		host, inside, _ := strings.Cut(b, ":")
		a = append(a, "--bind", host, inside)
	}
	cmd := exec.Command("bwrap", append(append(a, "--"), args...)...)
	cmd.Env = append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}, env...)
	return cmd
}

func rootRun(t *testing.T, root string, args ...string) string {
	t.Helper()
	cmd := inRoot(root, nil, []string{"DEBIAN_FRONTEND=noninteractive"}, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in the root: %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// install copies a .deb into root and installs it with dpkg -i.
func install(t *testing.T, root, deb string) string {
	t.Helper()
	b, err := os.ReadFile(deb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "var/cache/anvil.deb"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return rootRun(t, root, "dpkg", "-i", "/var/cache/anvil.deb")
}

// owned checks a path's owner, group and mode in root.
func owned(t *testing.T, root, path, owner, group string, mode os.FileMode) {
	t.Helper()
	out := strings.TrimSpace(rootRun(t, root, "stat", "-c", "%U %G %a", path))
	want := fmt.Sprintf("%s %s %o", owner, group, mode)
	if out != want {
		t.Errorf("%s: %s, want %s", path, out, want)
	}
}

// unit reads a unit file of root into key → values.
func unit(t *testing.T, root, name string) map[string][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "usr/lib/systemd/system", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || l[0] == '#' || l[0] == '[' {
			continue
		}
		k, v, _ := strings.Cut(l, "=")
		u[k] = append(u[k], v)
	}
	return u
}

// database creates an empty database on the local Postgres and drops it
// when the test ends; it returns its URL.
func database(t *testing.T) string {
	t.Helper()
	admin := os.Getenv("ANVIL_TEST_DATABASE_URL")
	if admin == "" {
		admin = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("anvil_pkgtest_%d_%d", os.Getpid(), time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), admin)
		if err == nil {
			c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			c.Close(context.Background())
		}
	})
	u, _ := url.Parse(admin)
	u.Path = "/" + name
	return u.String()
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// configure does what the package asks the operator to: it sets the
// database (and the web tier's port) in /etc/anvil/anvil.env.
func configure(t *testing.T, root, dbURL string, port int) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(root, "etc/anvil/anvil.env"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "\n# Set by the operator.\nANVIL_DATABASE_URL=%s\nANVIL_ADDR=127.0.0.1:%d\n", dbURL, port)
	f.Close()
}

// service runs a unit's ExecStart in root as systemd would: as its User=
// and Group=, with exactly its EnvironmentFile= (plus extra), and a
// NOTIFY_SOCKET it listens on. It waits for READY=1, checks that /readyz
// answers on port at once, and stops the process with SIGTERM when the
// test ends (it must exit 0).
func service(t *testing.T, root, unitName string, port int, extra ...string) {
	t.Helper()
	u := unit(t, root, unitName)
	if got := u["Type"]; len(got) != 1 || got[0] != "notify" {
		t.Fatalf("%s: Type=%v", unitName, got)
	}
	args := strings.Fields(u["ExecStart"][0])
	for i, a := range args {
		if a == "--addr" {
			args[i+1] = fmt.Sprintf("127.0.0.1:%d", port)
		}
	}
	vars, err := envfile.Read(filepath.Join(root, u["EnvironmentFile"][0]))
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"NOTIFY_SOCKET=/run/anvil-notify/sock"}
	for _, v := range vars {
		env = append(env, v.Key+"="+v.Value)
	}
	env = append(env, extra...)
	sockDir := t.TempDir()
	os.Chmod(sockDir, 0o777)
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(sockDir, "sock"), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(sockDir, "sock"), 0o666)
	user := fmt.Sprintf("--reuid=%s", u["User"][0])
	cmd := inRoot(root, []string{sockDir + ":/run/anvil-notify"}, env,
		append([]string{"setpriv", user, "--regid=" + u["Group"][0], "--init-groups", "--"}, args...)...)
	// bwrap does not pass signals on: it tells the service's pid (--info-fd),
	// and SIGTERM goes there, as systemd's would.
	infoR, infoW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Args = append([]string{cmd.Args[0], "--info-fd", "3"}, cmd.Args[1:]...)
	cmd.ExtraFiles = []*os.File{infoW}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	infoW.Close()
	var info struct {
		ChildPid int `json:"child-pid"`
	}
	if err := json.NewDecoder(infoR).Decode(&info); err != nil || info.ChildPid == 0 {
		t.Fatalf("bwrap's info: %v %+v", err, info)
	}
	infoR.Close()
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		conn.Close()
		syscall.Kill(info.ChildPid, syscall.SIGTERM)
		select {
		case <-exited:
			if waitErr != nil && !t.Failed() {
				t.Errorf("%s: exit after SIGTERM: %v\n%s", unitName, waitErr, logs.String())
			}
		case <-time.After(2 * time.Minute):
			cmd.Process.Kill()
			t.Errorf("%s did not stop on SIGTERM", unitName)
		}
	})
	ready := make(chan string, 1)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			if strings.Contains(string(buf[:n]), "READY=1") {
				ready <- string(buf[:n])
				return
			}
		}
	}()
	select {
	case <-ready:
	case <-exited:
		t.Fatalf("%s exited before READY=1: %v\n%s", unitName, waitErr, logs.String())
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("%s never sent READY=1\n%s", unitName, logs.String())
	}
	res, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
	if err != nil {
		t.Fatalf("%s: /readyz at READY=1: %v\n%s", unitName, err, logs.String())
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"ready"`) {
		t.Fatalf("%s: /readyz: %d %s", unitName, res.StatusCode, body)
	}
}

var exposureRE = regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`)

// TestDebInstallsIntoFreshDebian installs the .deb into a fresh Debian
// root: the user, the files with their owners and modes, the key, nothing
// started; both units verify without a word and score within their
// bounds; the web unit's and the worker unit's commands, run as the unit
// says, come up against the local Postgres; `anvil admin check` passes as
// the service's user; purge removes the service's files.
func TestDebInstallsIntoFreshDebian(t *testing.T) {
	t.Parallel()
	root := freshRoot(t)
	out := install(t, root, built.deb)
	for _, want := range []string{"anvil is installed but not started", "Set ANVIL_DATABASE_URL", "systemctl enable --now anvil anvil-worker"} {
		if !strings.Contains(out, want) {
			t.Errorf("dpkg -i does not say %q:\n%s", want, out)
		}
	}
	pw := strings.Split(strings.TrimSpace(rootRun(t, root, "getent", "passwd", "anvil")), ":")
	if uid, _ := strconv.Atoi(pw[2]); len(pw) != 7 || uid >= 1000 || uid == 0 || pw[5] != "/var/lib/anvil" || !strings.HasSuffix(pw[6], "nologin") {
		t.Errorf("the anvil user: %v", pw)
	}
	owned(t, root, "/usr/bin/anvil", "root", "root", 0o755)
	owned(t, root, "/etc/anvil", "root", "anvil", 0o750)
	owned(t, root, "/etc/anvil/anvil.env", "root", "anvil", 0o640)
	owned(t, root, "/etc/anvil/secret.key", "root", "anvil", 0o640)
	owned(t, root, "/var/lib/anvil", "anvil", "anvil", 0o750)
	owned(t, root, "/usr/lib/systemd/system/anvil.service", "root", "root", 0o644)
	owned(t, root, "/usr/lib/systemd/system/anvil-worker.service", "root", "root", 0o644)
	key, _ := os.ReadFile(filepath.Join(root, "etc/anvil/secret.key"))
	if len(strings.TrimSpace(string(key))) != 44 {
		t.Errorf("the generated key %q is not 32 bytes in base64", key)
	}
	if got := rootRun(t, root, "dpkg-query", "-W", "-f", "${Conffiles}", "anvil"); !strings.Contains(got, "/etc/anvil/anvil.env") {
		t.Errorf("conffiles: %q", got)
	}
	status := rootRun(t, root, "dpkg-query", "-s", "anvil")
	for _, want := range []string{"Depends: bubblewrap, git, ca-certificates", "Recommends: postgresql", "Version: " + built.info.PackageVersion()} {
		if !strings.Contains(status, want) {
			t.Errorf("dpkg -s does not say %q:\n%s", want, status)
		}
	}
	if links, _ := filepath.Glob(filepath.Join(root, "etc/systemd/system/*.wants/anvil*")); len(links) != 0 {
		t.Errorf("installing enabled %v", links)
	}
	if out := rootRun(t, root, "/usr/bin/anvil", "version"); !strings.HasPrefix(out, built.info.Version+"\n") {
		t.Errorf("anvil version in the root: %q", out)
	}

	for name, bound := range map[string]float64{"anvil.service": 2.5, "anvil-worker.service": 3.5} {
		// systemd-analyze verify exits 0 on a misspelled key: any output fails.
		cmd := exec.Command("systemd-analyze", "verify", "--root="+root, name)
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Run(); err != nil || buf.Len() > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", name, err, buf.String())
		}
		sec := run(t, "systemd-analyze", "security", "--offline=true", "--root="+root, name)
		m := exposureRE.FindStringSubmatch(sec)
		if m == nil {
			t.Fatalf("systemd-analyze security %s printed no exposure:\n%s", name, sec)
		}
		if score, _ := strconv.ParseFloat(m[1], 64); score > bound {
			t.Errorf("%s scores %.1f, more than %.1f:\n%s", name, score, bound, sec)
		} else {
			t.Logf("%s: exposure %s", name, m[1])
		}
		if c := unit(t, root, name)["ConditionPathExists"]; len(c) != 1 || c[0] != "/etc/anvil/anvil.env" {
			t.Errorf("%s: ConditionPathExists=%v", name, c)
		}
	}

	dbURL := database(t)
	webPort, workerPort := freePort(t), freePort(t)
	configure(t, root, dbURL, webPort)
	check := inRoot(root, nil, nil, "setpriv", "--reuid=anvil", "--regid=anvil", "--init-groups", "--",
		"/usr/bin/anvil", "admin", "check", "--env-file", "/etc/anvil/anvil.env")
	if out, err := check.CombinedOutput(); err != nil || !strings.Contains(string(out), "ok    sandbox     bubblewrap runs") {
		t.Errorf("anvil admin check as the anvil user: %v\n%s", err, out)
	}
	service(t, root, "anvil.service", webPort)
	service(t, root, "anvil-worker.service", workerPort)
}

func TestDebPurgeKeepsTheDatabase(t *testing.T) {
	t.Parallel()
	root := freshRoot(t)
	install(t, root, built.deb)
	dbURL := database(t)
	configure(t, root, dbURL, freePort(t))
	rootRun(t, root, "setpriv", "--reuid=anvil", "--regid=anvil", "--init-groups", "--", "/usr/bin/anvil", "admin", "check", "--env-file", "/etc/anvil/anvil.env")
	mig := inRoot(root, nil, []string{"ANVIL_DATABASE_URL=" + dbURL}, "/usr/bin/anvil", "migrate")
	if out, err := mig.CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	out := rootRun(t, root, "dpkg", "--purge", "anvil")
	if !strings.Contains(out, "the database was not touched") {
		t.Errorf("purge says %q", out)
	}
	for _, p := range []string{"etc/anvil", "var/lib/anvil", "usr/bin/anvil"} {
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
			t.Errorf("/%s is still there after purge", p)
		}
	}
	d, err := db.Open(context.Background(), dbURL, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if level, err := db.Applied(context.Background(), d); err != nil || level == "" {
		t.Errorf("the database lost its tables on purge: %q %v", level, err)
	}
}

// TestDebUpgradeKeepsData installs the package of an older commit
// (ANVIL_UPGRADE_FROM, by default the commit this packaging started from),
// gives it data, then installs this checkout's package over it: the user,
// the key and the operator's configuration stay, the new binary applies
// its newer migrations on start, and every row of every table the old one
// had is still there.
func TestDebUpgradeKeepsData(t *testing.T) {
	t.Parallel()
	from := os.Getenv("ANVIL_UPGRADE_FROM")
	if from == "" {
		from = "342b857"
	}
	ctx := context.Background()
	old := filepath.Join(t.TempDir(), "old")
	if out, err := exec.Command("git", "-C", built.repo, "worktree", "add", "--detach", old, from).CombinedOutput(); err != nil {
		t.Fatalf("git worktree add %s (a shallow clone lacks it: fetch it, or set ANVIL_UPGRADE_FROM): %v\n%s", from, err, out)
	}
	t.Cleanup(func() { exec.Command("git", "-C", built.repo, "worktree", "remove", "--force", old).Run() })
	oldInfo, err := Describe(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	if exec.Command("dpkg", "--compare-versions", oldInfo.Version, "lt", built.info.Version).Run() != nil {
		t.Fatalf("the old version %s does not sort before %s", oldInfo.Version, built.info.Version)
	}
	oldBin := filepath.Join(t.TempDir(), "anvil")
	if err := BuildBinary(ctx, old, oldBin, built.goarch, oldInfo); err != nil {
		t.Fatal(err)
	}
	// The older binary in this packaging (the packaging is the code under test).
	oldDeb, err := Deb(ctx, built.repo, oldBin, t.TempDir(), built.goarch, oldInfo)
	if err != nil {
		t.Fatal(err)
	}

	root := freshRoot(t)
	install(t, root, oldDeb)
	dbURL := database(t)
	port := freePort(t)
	configure(t, root, dbURL, port)
	key, _ := os.ReadFile(filepath.Join(root, "etc/anvil/secret.key"))
	uid := rootRun(t, root, "id", "-u", "anvil")
	// The older binary may predate ANVIL_SECRET_KEY_FILE: it gets the key
	// from the file through the environment.
	oldEnv := []string{"ANVIL_DATABASE_URL=" + dbURL, "ANVIL_SECRET_KEY=" + strings.TrimSpace(string(key))}
	for _, args := range [][]string{{"migrate"}, {"admin", "bootstrap", "--org", "acme", "--email", "owner@acme.test"}} {
		cmd := inRoot(root, nil, oldEnv, append([]string{"setpriv", "--reuid=anvil", "--regid=anvil", "--init-groups", "--", "/usr/bin/anvil"}, args...)...)
		cmd.Stdin = strings.NewReader("a long enough password\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("old anvil %v: %v\n%s", args, err, out)
		}
	}
	before := rowSums(t, dbURL, nil)

	out := install(t, root, built.deb)
	if strings.Contains(out, "anvil is installed but not started") {
		t.Errorf("an upgrade printed the first install's steps:\n%s", out)
	}
	if got := rootRun(t, root, "id", "-u", "anvil"); got != uid {
		t.Errorf("the anvil user changed: %s → %s", uid, got)
	}
	if k, _ := os.ReadFile(filepath.Join(root, "etc/anvil/secret.key")); !bytes.Equal(k, key) {
		t.Errorf("the upgrade replaced the key")
	}
	if env, _ := os.ReadFile(filepath.Join(root, "etc/anvil/anvil.env")); !strings.Contains(string(env), "ANVIL_DATABASE_URL="+dbURL) {
		t.Errorf("the upgrade lost the operator's configuration")
	}
	if out := rootRun(t, root, "/usr/bin/anvil", "version"); !strings.HasPrefix(out, built.info.Version) {
		t.Errorf("after the upgrade anvil version is %q", out)
	}
	service(t, root, "anvil.service", port) // migrates, then READY=1

	after := rowSums(t, dbURL, before)
	for table, sum := range before {
		if after[table] != sum {
			t.Errorf("table %s: %s before the upgrade, %s after", table, sum, after[table])
		}
	}
	d, err := db.Open(ctx, dbURL, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	applied, err := db.Applied(ctx, d)
	newest, _ := db.Newest()
	if err != nil || applied != newest {
		t.Errorf("after the upgrade the schema is at %q (%v), want %s", applied, err, newest)
	}
	t.Logf("upgraded %s → %s; schema at %s; %d tables kept", oldInfo.Version, built.info.Version, applied, len(before))
}

// rowSums is every table's row count and a checksum of its rows over the
// columns it had in like (all columns when like is nil): a newer migration
// may add columns, never change the rows that were.
func rowSums(t *testing.T, dbURL string, like map[string]string) map[string]string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT table_name, string_agg(quote_ident(column_name), ',' ORDER BY column_name)
		FROM information_schema.columns WHERE table_schema = 'public' GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	cols := map[string]string{}
	for rows.Next() {
		var tb, c string
		rows.Scan(&tb, &c)
		cols[tb] = c
	}
	rows.Close()
	if like != nil {
		for tb, sum := range like {
			cols[tb] = strings.SplitN(sum, " ", 2)[0]
		}
	}
	sums := map[string]string{}
	for tb, c := range cols {
		var n int
		var sum string
		// The migrations' own table grows by the newer ones: the rows it
		// had (the oldest, by id) must stay as they were.
		limit := ""
		if tb == "bun_migrations" && like != nil {
			var had int
			fmt.Sscanf(strings.SplitN(like[tb], " ", 3)[1], "rows=%d", &had)
			limit = fmt.Sprintf(" ORDER BY id LIMIT %d", had)
		}
		q := fmt.Sprintf(`SELECT count(*), coalesce(md5(string_agg(r::text, '|' ORDER BY r::text)), '') FROM (SELECT %s FROM %s%s) r`, c, pgx.Identifier{tb}.Sanitize(), limit)
		if err := conn.QueryRow(ctx, q).Scan(&n, &sum); err != nil {
			t.Fatalf("%s: %v", tb, err)
		}
		sums[tb] = fmt.Sprintf("%s rows=%d %s", c, n, sum)
	}
	return sums
}

// TestImageUnpacks reads the image as a container platform would: skopeo
// inspects the archive, umoci unpacks it into a runtime bundle whose
// rootfs holds the binary, the certificates, the time zones and a non-root
// user, and the binary runs there as that user.
func TestImageUnpacks(t *testing.T) {
	t.Parallel()
	var inspect struct {
		Digest, Architecture, Os string
		Env                      []string
	}
	if err := json.Unmarshal([]byte(run(t, "skopeo", "inspect", "oci-archive:"+built.image)), &inspect); err != nil {
		t.Fatal(err)
	}
	if inspect.Digest != built.digest || inspect.Architecture != built.goarch || inspect.Os != "linux" {
		t.Errorf("skopeo inspect: %+v, want digest %s", inspect, built.digest)
	}
	dir := t.TempDir()
	run(t, "tar", "-xf", built.image, "-C", dir)
	bundle := filepath.Join(t.TempDir(), "bundle")
	run(t, "umoci", "unpack", "--image", dir+":"+built.info.Tag(), bundle)
	rootfs := filepath.Join(bundle, "rootfs")
	for _, p := range []string{"usr/bin/anvil", "etc/ssl/certs/ca-certificates.crt", "usr/share/zoneinfo/Europe/Berlin", "etc/passwd", "etc/group"} {
		if fi, err := os.Stat(filepath.Join(rootfs, p)); err != nil || fi.Size() == 0 {
			t.Errorf("the image lacks /%s: %v", p, err)
		}
	}
	if passwd, _ := os.ReadFile(filepath.Join(rootfs, "etc/passwd")); !strings.Contains(string(passwd), fmt.Sprintf("anvil:x:%d:%d:", ImageUID, ImageUID)) {
		t.Errorf("/etc/passwd: %s", passwd)
	}
	if fi, err := os.Stat(filepath.Join(rootfs, "var/lib/anvil")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != ImageUID {
		t.Errorf("/var/lib/anvil is not the anvil user's: %v", err)
	}
	var spec struct {
		Process struct {
			User struct{ UID, GID int }
			Args []string
			Env  []string
		}
	}
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(b, &spec)
	if spec.Process.User.UID != ImageUID || strings.Join(spec.Process.Args, " ") != "/usr/bin/anvil serve --role web" ||
		!strings.Contains(strings.Join(spec.Process.Env, " "), "ANVIL_ADDR=0.0.0.0:8080") {
		t.Errorf("the runtime spec: %+v", spec.Process)
	}
	cmd := exec.Command("chroot", fmt.Sprintf("--userspec=%d:%d", ImageUID, ImageUID), rootfs, "/usr/bin/anvil", "version")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), built.info.Version+"\n") {
		t.Errorf("anvil version in the image: %v %q", err, out)
	}
}
