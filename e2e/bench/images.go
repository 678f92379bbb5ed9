package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"anvil/domain/image"
	"anvil/domain/image/imagetest"
	"anvil/domain/netpolicy"
	"anvil/jobs/sandbox"
)

func init() {
	register("runs/images", benchImages)
}

// benchImages measures what docs/images.md promises: a cold pull and
// unpack of a big image from a registry on loopback (ANVIL_BENCH_IMAGE_MB,
// 190 by default), and a warm image step's start against today's sandbox
// on the host's tree, both `true`, alternated.
func benchImages(ctx context.Context, env *benchEnv) (err error) {
	tb := &benchTB{}
	defer func() {
		tb.done()
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	if err := sandbox.BwrapAvailable(); err != nil {
		return fmt.Errorf("images are measured in the bwrap sandbox: %w", err)
	}
	mb := 190
	if v, err := strconv.Atoi(os.Getenv("ANVIL_BENCH_IMAGE_MB")); err == nil && v > 0 {
		mb = v
	}
	dir, err := os.MkdirTemp("", "anvil-bench-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o711); err != nil {
		return err
	}
	reg := imagetest.NewRegistry(tb)
	// Layers of 32 MiB of text (it compresses about 2:1, as code does).
	layers := []v1.Layer{imagetest.Layer(tb, imagetest.BusyboxEntries(tb)...)}
	for i := 0; i*32 < mb; i++ {
		var es []imagetest.Entry
		for j := 0; j < 32; j++ {
			es = append(es, imagetest.Entry{Name: fmt.Sprintf("data/%d/%d.txt", i, j), Body: source(fmt.Sprintf("%d-%d", i, j), 1<<20)})
		}
		layers = append(layers, imagetest.Layer(tb, es...))
	}
	ref := reg.Push(tb, "big:1", imagetest.Image(tb, []string{"PATH=/bin"}, layers...))
	// The pull runs in a child process of its own, so that its peak RSS is
	// the pull's: this process holds the registry and the image it built
	// in memory (docs/images.md, "What a pull holds in memory").
	pull, err := pullInChild(ctx, ref, dir+"/images")
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Out, "  cold pull+unpack of %d MiB from loopback: %s, peak RSS of the pulling process %.1f MiB (target ≤ %d MiB)\n",
		mb, pull.took.Round(time.Millisecond), pull.peakMiB, pullTargetMiB)
	if pull.stats != "" {
		fmt.Fprintf(env.Out, "  the pulling process: %s\n", pull.stats)
	}
	env.report("images", "pull_peak_rss_mib", math.Round(pull.peakMiB*10)/10, pullTargetMiB)

	store, err := image.OpenStore(dir+"/images", 0, image.Bounds{})
	if err != nil {
		return err
	}
	lease, err := store.Open(ctx, pull.digest, func(context.Context) (v1.Image, error) {
		return nil, errors.New("the child process's pull left no image in the store")
	})
	if err != nil {
		return err
	}
	defer lease.Close()

	exe, err := sandbox.New("bwrap", 0)
	if err != nil {
		return err
	}
	ws, cleanup, err := sandbox.NewWorkspace(dir + "/ws")
	if err != nil {
		return err
	}
	defer func() { _ = cleanup() }()
	var host, img []time.Duration
	for i := 0; i < 20; i++ {
		for _, im := range []*sandbox.Image{nil, {Root: lease.Root, Env: lease.Config.Env}} {
			t0 := time.Now()
			res, err := exe.Run(ctx, sandbox.Spec{Workspace: ws, Command: "true", Limits: sandbox.DefaultLimits(), Image: im}, discard{})
			if err != nil {
				return fmt.Errorf("a step: %w", err)
			}
			if res.ExitCode != 0 {
				return fmt.Errorf("a step exited %d", res.ExitCode)
			}
			if im == nil {
				host = append(host, time.Since(t0))
			} else {
				img = append(img, time.Since(t0))
			}
		}
	}
	fmt.Fprintf(env.Out, "  step start (`true`, median of 20): host tree %s, warm image %s\n", median(host), median(img))
	return benchServiceReady(ctx, env, exe, lease, dir)
}

// serviceReadyTarget is how long a service with a healthcheck may take to
// be ready after its process starts (docs/images.md, "Services").
const serviceReadyTarget = 2 * time.Second

// benchServiceReady measures a service's way to ready as a worker takes it
// (jobs/run_step_image.go): a pod, busybox's httpd started in it from the
// warm image, its port waited for, then its healthcheck (a wget by its
// name, the default interval of 1 s) run until it passes. Median of 5
// pods: the time to the port accepting (the service's own start) and to
// ready.
func benchServiceReady(ctx context.Context, env *benchEnv, exe sandbox.Executor, lease *image.Lease, dir string) error {
	starter, ok := exe.(sandbox.PodStarter)
	if !ok {
		return errors.New("this executor starts no pods")
	}
	// The pod's holder runs anvil's own binary (its bridge), where the
	// sandbox's uid reaches it.
	bridge := dir + "/anvil-bridge"
	if out, err := exec.Command("cp", env.Binary, bridge).CombinedOutput(); err != nil {
		return fmt.Errorf("copy the bridge: %w: %s", err, out)
	}
	if err := os.Chmod(bridge, 0o755); err != nil {
		return err
	}
	im := func() *sandbox.Image { return &sandbox.Image{Root: lease.Root, Env: lease.Config.Env} }
	var started, ready []time.Duration
	for i := 0; i < 5; i++ {
		ws, cleanup, err := sandbox.NewWorkspace(fmt.Sprintf("%s/svc%d", dir, i))
		if err != nil {
			return err
		}
		err = func() error {
			defer func() { _ = cleanup() }()
			pod, err := starter.StartPod(ws, []string{"web"}, bridge, nil)
			if err != nil {
				return fmt.Errorf("a pod: %w", err)
			}
			defer pod.Stop()
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			t0 := time.Now()
			svc, err := pod.StartService(exe, "web", sandbox.Spec{Workspace: ws, Limits: sandbox.DefaultLimits(), Image: im(),
				Command: "mkdir -p /tmp/www && echo ok > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"}, ws+".web.log")
			if err != nil {
				return fmt.Errorf("the service: %w", err)
			}
			if err := pod.WaitPort(wctx, svc, 8080); err != nil {
				return fmt.Errorf("%w; its log: %s", err, svc.Tail())
			}
			started = append(started, time.Since(t0))
			check := sandbox.Spec{Workspace: ws, Limits: sandbox.DefaultLimits(), Image: im(), Command: "wget -q -O /dev/null http://web:8080/"}
			if err := pod.Healthcheck(wctx, exe, svc, check, time.Second, 10*time.Second, 10); err != nil {
				return fmt.Errorf("%w; its log: %s", err, svc.Tail())
			}
			ready = append(ready, time.Since(t0))
			return nil
		}()
		if err != nil {
			return err
		}
	}
	s, r := median(started), median(ready)
	fmt.Fprintf(env.Out, "  a service (busybox httpd, median of 5 pods): port accepting %s after its start, ready (healthcheck passed) %s (target ≤ %s after its start, plus that)\n",
		s, r, serviceReadyTarget)
	env.report("images", "service_ready_after_port_ms", ms(r-s), ms(serviceReadyTarget))
	return nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func median(ds []time.Duration) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2].Round(10 * time.Microsecond)
}

// pullTargetMiB is the memory a pull may take (docs/images.md).
const pullTargetMiB = 64

// envPullChild, set to a reference, makes the bench binary a pull's child
// process: it resolves the reference, opens it into the store of
// ANVIL_BENCH_PULL_DIR (Store.Open, nothing else) and prints the digest,
// the time it took and its Go heap's figures on one line.
const (
	envPullChild = "ANVIL_BENCH_PULL_REF"
	envPullDir   = "ANVIL_BENCH_PULL_DIR"
)

// pulled is what the pull's child reported.
type pulled struct {
	digest  string
	took    time.Duration
	peakMiB float64
	stats   string
}

// pullInChild re-executes this binary as a pull's child and returns the
// peak RSS the child read from its own VmHWM. Not the child's rusage:
// ru_maxrss survives execve, and a Go child is started with vfork in the
// parent's address space, so it reports this process's RSS (the registry
// and its 190 MiB image: ~600 MiB) whatever the child did; /proc's VmHWM is
// the high-water mark of the address space the child got at its execve.
func pullInChild(ctx context.Context, ref, dir string) (pulled, error) {
	exe, err := os.Executable()
	if err != nil {
		return pulled{}, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), envPullChild+"="+ref, envPullDir+"="+dir)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return pulled{}, fmt.Errorf("the pull's child: %w\n%s", err, errb.String())
	}
	// digest, nanoseconds, VmHWM in KiB, then the heap's words.
	line := strings.TrimSpace(out.String())
	f := strings.SplitN(line, " ", 4)
	if len(f) < 3 {
		return pulled{}, fmt.Errorf("the pull's child printed %q", line)
	}
	ns, err1 := strconv.ParseInt(f[1], 10, 64)
	kib, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return pulled{}, fmt.Errorf("the pull's child printed %q", line)
	}
	p := pulled{digest: f[0], took: time.Duration(ns), peakMiB: float64(kib) / 1024}
	if len(f) == 4 {
		p.stats = f[3]
	}
	return p, nil
}

// vmHWM is this process's peak RSS in KiB (VmHWM of /proc/self/status).
func vmHWM() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// pullChild is the child's whole life: one Store.Open of the reference
// over the loopback registry, as a worker's pull does.
func pullChild(ref, dir string) int {
	ctx := context.Background()
	host, _, _ := strings.Cut(ref, "/")
	list, err := netpolicy.Compile([]string{host})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	p := &image.Puller{List: list, AllowPrivate: true, AllowLoopback: true, Insecure: []string{host}}
	store, err := image.OpenStore(dir, 0, image.Bounds{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	before := vmHWM()
	began := time.Now()
	r, err := p.Resolve(ctx, ref)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	lease, err := store.Open(ctx, r.Digest, func(ctx context.Context) (v1.Image, error) { return p.Image(ctx, r.Pinned) })
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	took := time.Since(began)
	_ = lease.Close()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("%s %d %d %d MiB resident before the pull began (the binary, the runtime); allocated %d MiB in all, heap in use at the end %d MiB, %d MiB taken from the system, %d GCs\n",
		r.Digest, took.Nanoseconds(), vmHWM(), before>>10, ms.TotalAlloc>>20, ms.HeapInuse>>20, ms.HeapSys>>20, ms.NumGC)
	return 0
}
