package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"anvil/domain/image"
	"anvil/domain/image/imagetest"
	"anvil/domain/netpolicy"
)

// busyboxRoot pulls a busybox image (with extra files) from a loopback
// registry into a store the sandbox's uid can reach, and returns it.
func busyboxRoot(t *testing.T, files ...imagetest.Entry) *image.Lease {
	t.Helper()
	reg := imagetest.NewRegistry(t)
	ref := reg.Push(t, "tools:1", imagetest.BusyboxImage(t, files...))
	list, err := netpolicy.Compile([]string{reg.Addr})
	if err != nil {
		t.Fatal(err)
	}
	p := &image.Puller{List: list, AllowPrivate: true, AllowLoopback: true, Insecure: []string{reg.Addr}}
	if err := os.MkdirAll(wsRoot, 0o711); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(wsRoot, "images-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeAll(dir) })
	s, err := image.OpenStore(dir, 0, image.Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := p.Resolve(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Open(ctx, r.Digest, func(ctx context.Context) (v1.Image, error) { return p.Image(ctx, r.Pinned) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// A step in an image sees the image's files and environment, its
// workspace at /workspace, and none of the host's tools.
func TestAStepRunsInsideAnImage(t *testing.T) {
	t.Parallel()
	ex := bwrapExec(t)
	l := busyboxRoot(t, imagetest.Entry{Name: "opt/only-in-image", Body: "image file\n"})
	ws := newWorkspace(t)
	if err := os.WriteFile(filepath.Join(ws, "src.txt"), []byte("from the checkout\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	cmd := `cat /opt/only-in-image; cat src.txt; pwd; echo "ws=$CI_WORKSPACE path=$PATH says=$IMAGE_SAYS home=$HOME"
test -e /usr/bin/git && echo HOST-GIT-VISIBLE; test -e /etc/shadow && echo HOST-SHADOW-VISIBLE
echo made > built.txt; echo tmp > /tmp/x && cat /tmp/x; echo home > $HOME/h && cat $HOME/h
touch /opt/new 2>/dev/null && echo ROOT-WRITABLE; true`
	res, err := ex.Run(context.Background(), Spec{Workspace: ws, Command: cmd, Limits: DefaultLimits(),
		Env:   map[string]string{"ANVIL_TASK": "t", "PATH_FROM_ANVIL": "x"},
		Image: &Image{Root: l.Root, Env: l.Config.Env, Volumes: l.Config.Volumes}}, &out)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("res %+v err %v out %q", res, err, out.String())
	}
	got := out.String()
	for _, want := range []string{"image file", "from the checkout", "/workspace\n", "ws=/workspace path=/bin:/usr/bin says=hello home=/root", "tmp\n", "home\n"} {
		if !strings.Contains(got, want) {
			t.Fatalf("output lacks %q: %q", want, got)
		}
	}
	for _, bad := range []string{"HOST-GIT-VISIBLE", "HOST-SHADOW-VISIBLE", "ROOT-WRITABLE"} {
		if strings.Contains(got, bad) {
			t.Fatalf("%s: %q", bad, got)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "built.txt")); string(b) != "made\n" {
		t.Fatalf("the workspace was not written: %q", b)
	}
}

// A step in an image with a network list reaches a listed host through
// the bridge (anvil's binary, with its loader when built with cgo) and the
// proxy, as on the host.
func TestAStepInAnImageReachesTheNetworkThroughTheProxy(t *testing.T) {
	t.Parallel()
	ex := bwrapExec(t)
	port, _ := localOrigin(t)
	l := busyboxRoot(t)
	ws := newWorkspace(t)
	n, _ := proxyFor(t, ws, "127.0.0.2:"+itoa(port))
	var out syncBuffer
	res, err := ex.Run(context.Background(), Spec{Workspace: ws, Limits: DefaultLimits(), Network: n,
		Command: "wget -q -O - http://127.0.0.2:" + itoa(port) + "/",
		Image:   &Image{Root: l.Root, Env: l.Config.Env}}, &out)
	if err != nil || res.ExitCode != 0 || !strings.Contains(out.String(), "hello from the host") {
		t.Fatalf("res %+v err %v out %q", res, err, out.String())
	}
}
