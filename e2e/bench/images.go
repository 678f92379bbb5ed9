package main

import (
	"context"
	"fmt"
	"os"
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
	list, err := netpolicy.Compile([]string{reg.Addr})
	if err != nil {
		return err
	}
	p := &image.Puller{List: list, AllowPrivate: true, AllowLoopback: true, Insecure: []string{reg.Addr}}
	store, err := image.OpenStore(dir+"/images", 0, image.Bounds{})
	if err != nil {
		return err
	}
	began := time.Now()
	r, err := p.Resolve(ctx, ref)
	if err != nil {
		return err
	}
	lease, err := store.Open(ctx, r.Digest, func(ctx context.Context) (v1.Image, error) { return p.Image(ctx, r.Pinned) })
	if err != nil {
		return err
	}
	defer lease.Close()
	fmt.Fprintf(env.Out, "  cold pull+unpack of %d MiB from loopback: %s (peak RSS of the bench process, the image built in its memory included: %s)\n", mb, time.Since(began).Round(time.Millisecond), peakRSS())

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
	return nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func median(ds []time.Duration) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2].Round(10 * time.Microsecond)
}

// peakRSS is this process's VmHWM.
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "VmHWM:"))
		}
	}
	return "?"
}
