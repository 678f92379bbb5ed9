package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"anvil/domain/image"
)

const podChildEnv = "ANVIL_TEST_POD_CHILD"

func podExec(t *testing.T) *bwrapExecutor {
	t.Helper()
	ex := bwrapExec(t)
	b, ok := ex.(*bwrapExecutor)
	if !ok {
		t.Skip("pods need the bwrap executor")
	}
	if _, err := nsenterPath(); err != nil {
		t.Skip(err)
	}
	return b
}

const webService = `mkdir -p /tmp/www && echo hello-from-web > /tmp/www/index.html && echo web is up && exec httpd -f -p 8080 -h /tmp/www`

func startWeb(t *testing.T, ex *bwrapExecutor, l *image.Lease, p *Pod) *Service {
	t.Helper()
	ws := newWorkspace(t)
	s, err := p.StartService(ex, "web", Spec{Workspace: ws, Command: webService, Limits: DefaultLimits(),
		Image: &Image{Root: l.Root, Env: l.Config.Env}}, filepath.Join(filepath.Dir(ws), filepath.Base(ws)+".web.log"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A step reaches a service by its name once its port accepts and its
// healthcheck passes; the service's log is kept.
func TestAServiceIsReachedByNameFromAStep(t *testing.T) {
	t.Parallel()
	ex := podExec(t)
	l := busyboxRoot(t)
	dir := newWorkspace(t)
	p, err := ex.StartPod(dir, []string{"web"}, podBridge(t, dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	s := startWeb(t, ex, l, p)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.WaitPort(ctx, s, 8080); err != nil {
		t.Fatalf("%v; log: %s", err, s.Tail())
	}
	check := Spec{Workspace: dir, Command: "wget -q -O /dev/null http://web:8080/", Limits: DefaultLimits(), Image: &Image{Root: l.Root, Env: l.Config.Env}}
	if err := p.Healthcheck(ctx, ex, s, check, 100*time.Millisecond, 5*time.Second, 5); err != nil {
		t.Fatalf("%v; log: %s", err, s.Tail())
	}
	var out syncBuffer
	step := Spec{Workspace: dir, Command: "wget -q -O - http://web:8080/ && cat /etc/hosts && echo uid=$(id -u)", Limits: DefaultLimits(), Image: &Image{Root: l.Root, Env: l.Config.Env}}
	p.Enter(&step)
	res, err := ex.Run(ctx, step, &out)
	want := "uid=" + strconv.Itoa(os.Getuid())
	if os.Getuid() == 0 {
		want = "uid=65534" // the sandbox's user, never root, in a pod too
	}
	if err != nil || res.ExitCode != 0 || !strings.Contains(out.String(), "hello-from-web") || !strings.Contains(out.String(), want) {
		t.Fatalf("step: %+v %v %q", res, err, out.String())
	}
	if !strings.Contains(s.Tail(), "web is up") {
		t.Fatalf("the service's log: %q", s.Tail())
	}
	p.Stop()
	if s.Running() {
		t.Fatal("the service outlived its pod")
	}
	if alive(p.Pid) {
		t.Fatal("the holder outlived its pod")
	}
}

// A service whose port never accepts fails its wait with the cause; its
// log's tail is there for the run's message.
func TestAServiceThatNeverGetsReady(t *testing.T) {
	t.Parallel()
	ex := podExec(t)
	l := busyboxRoot(t)
	dir := newWorkspace(t)
	p, err := ex.StartPod(dir, []string{"db"}, podBridge(t, dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	s, err := p.StartService(ex, "db", Spec{Workspace: dir, Command: "echo initdb: cannot start; sleep 600", Limits: DefaultLimits(),
		Image: &Image{Root: l.Root, Env: l.Config.Env}}, dir+".db.log")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := p.WaitPort(ctx, s, 5432); err == nil || !strings.Contains(err.Error(), "port 5432 did not accept") {
		res, _ := s.Exited()
		t.Fatalf("err = %v %+v %v tail %q", err, res, s.err, s.Tail())
	}
	if !strings.Contains(s.Tail(), "initdb: cannot start") {
		t.Fatalf("tail %q", s.Tail())
	}
}

// SIGKILL of the worker leaves no process of its pod: the holder and the
// services die with it.
func TestSIGKILLOfTheWorkerLeavesNoProcessOfItsPod(t *testing.T) {
	t.Parallel()
	podExec(t)
	l := busyboxRoot(t)
	dir := newWorkspace(t)
	report := filepath.Join(dir, "pod.pids")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), podChildEnv+"="+dir+"|"+l.Root+"|"+report)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var ns string
	if !pollUntil(20*time.Second, func() bool {
		b, err := os.ReadFile(report)
		ns = strings.TrimSpace(string(b))
		return err == nil && strings.HasPrefix(ns, "net:")
	}) {
		cmd.Process.Kill()
		t.Fatal("the child never started its pod")
	}
	if n := len(inNetNS(ns)); n < 2 {
		t.Fatalf("%d processes in the pod before the kill", n)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if !pollUntil(10*time.Second, func() bool { return len(inNetNS(ns)) == 0 }) {
		t.Fatalf("processes left in the pod: %v", inNetNS(ns))
	}
}

// podChild is the worker TestSIGKILLOfTheWorkerLeavesNoProcessOfItsPod
// kills: it starts a pod with a service and waits.
func podChild(v string) {
	parts := strings.SplitN(v, "|", 3)
	dir, root, report := parts[0], parts[1], parts[2]
	ex, err := newBwrap(time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bridge, err := InstallBridge(filepath.Dir(dir))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	p, err := ex.StartPod(dir, []string{"web"}, bridge, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s, err := p.StartService(ex, "web", Spec{Workspace: dir, Command: webService, Limits: DefaultLimits(), Image: &Image{Root: root}}, dir+".web.log")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := p.WaitPort(ctx, s, 8080); err != nil {
		fmt.Fprintln(os.Stderr, err, s.Tail(), p.probe(8080))
		os.Exit(1)
	}
	ns, _ := os.Readlink("/proc/" + strconv.Itoa(p.Pid) + "/ns/net")
	_ = os.WriteFile(report, []byte(ns), 0o644)
	select {}
}

// inNetNS lists the processes whose network namespace is ns.
func inNetNS(ns string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/net"); err == nil && l == ns {
			out = append(out, pid)
		}
	}
	return out
}

func podBridge(t *testing.T, dir string) string {
	t.Helper()
	b, err := InstallBridge(filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// A service's kept log is its end from a line's start, so that a line cut
// in half (a secret's tail among it) is never shown; Written counts all.
func TestAServiceLogKeepsItsEndFromALine(t *testing.T) {
	t.Parallel()
	b := &tailBuffer{max: 16}
	fmt.Fprint(b, "first line\nsecond\nthird\n")
	if got := b.String(); got != "second\nthird\n" {
		t.Fatalf("kept %q", got)
	}
	if got := b.last(4); got != "ird\n" {
		t.Fatalf("last 4: %q", got)
	}
	if b.total != 24 {
		t.Fatalf("written %d", b.total)
	}
	whole := &tailBuffer{max: 64}
	fmt.Fprint(whole, "one\ntwo\n")
	if got := whole.String(); got != "one\ntwo\n" {
		t.Fatalf("a whole log: %q", got)
	}
}
