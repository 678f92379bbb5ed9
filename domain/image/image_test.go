package image_test

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"anvil/domain/image"
	"anvil/domain/image/imagetest"
	"anvil/domain/netpolicy"
)

func puller(t *testing.T, reg *imagetest.Registry, list ...string) *image.Puller {
	t.Helper()
	if list == nil {
		list = []string{reg.Addr}
	}
	l, err := netpolicy.Compile(list)
	if err != nil {
		t.Fatal(err)
	}
	return &image.Puller{List: l, AllowPrivate: true, AllowLoopback: true, Insecure: []string{reg.Addr}}
}

func store(t *testing.T, limit int64) *image.Store {
	t.Helper()
	s, err := image.OpenStore(filepath.Join(t.TempDir(), "images"), limit, image.Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func pull(t *testing.T, s *image.Store, p *image.Puller, ref string) (*image.Lease, image.Resolved) {
	t.Helper()
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
	return l, r
}

func TestPullUnpacksTheImageWithMountPoints(t *testing.T) {
	t.Parallel()
	reg := imagetest.NewRegistry(t)
	ref := reg.Push(t, "tools:1", imagetest.BusyboxImage(t,
		imagetest.Entry{Name: "opt/only-in-image", Body: "from the image\n"},
		imagetest.Entry{Name: "usr/bin/suid", Body: "x", Mode: 0o4755},
		imagetest.Entry{Name: "var/", Type: tar.TypeDir},
		imagetest.Entry{Name: "var/run", Type: tar.TypeSymlink, Linkname: "/run"},
		imagetest.Entry{Name: "etc/hosts", Body: "6.6.6.6 evil\n"},
	))
	s := store(t, 0)
	l, r := pull(t, s, puller(t, reg), ref)
	if !strings.HasPrefix(r.Digest, "sha256:") || !strings.Contains(r.Pinned, "@sha256:") {
		t.Fatalf("resolved %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(l.Root, "opt/only-in-image")); err != nil || string(b) != "from the image\n" {
		t.Fatalf("file of the image: %q %v", b, err)
	}
	fi, err := os.Stat(filepath.Join(l.Root, "usr/bin/suid"))
	if err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 || fi.Mode().Perm() != 0o755 {
		t.Fatalf("setuid kept: %v %v", fi.Mode(), err)
	}
	if !fi.ModTime().Equal(imagetest.Epoch) {
		t.Fatalf("mtime %v, want %v", fi.ModTime(), imagetest.Epoch)
	}
	for _, d := range []string{"proc", "dev", "tmp", "workspace", "run", "cache"} {
		if fi, err := os.Stat(filepath.Join(l.Root, d)); err != nil || !fi.IsDir() {
			t.Fatalf("mount point %s: %v", d, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(l.Root, "etc/hosts")); err != nil || len(b) != 0 {
		t.Fatalf("etc/hosts is the image's: %q %v", b, err)
	}
	if l.Config.Digest != r.Digest || !strings.Contains(strings.Join(l.Config.Env, " "), "PATH=/bin:/usr/bin") {
		t.Fatalf("config %+v", l.Config)
	}
	if !s.Has(r.Digest) || len(s.List()) != 1 {
		t.Fatalf("store %+v", s.List())
	}
}

func TestResolvePicksTheWorkersPlatformFromAnIndex(t *testing.T) {
	t.Parallel()
	reg := imagetest.NewRegistry(t)
	amd := imagetest.BusyboxImage(t, imagetest.Entry{Name: "arch", Body: "amd64"})
	arm := imagetest.Image(t, nil, imagetest.Layer(t, imagetest.Entry{Name: "arch", Body: "arm64"}))
	ref := reg.PushIndex(t, "multi:1", map[string]v1.Image{"amd64": amd, "arm64": arm})
	r, err := puller(t, reg).Resolve(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := amd.Digest()
	if r.Digest != want.String() {
		t.Fatalf("resolved %s, want the amd64 manifest %s", r.Digest, want)
	}
}

func TestATagMovedAfterResolvingKeepsTheDigest(t *testing.T) {
	t.Parallel()
	reg := imagetest.NewRegistry(t)
	ref := reg.Push(t, "moving:latest", imagetest.BusyboxImage(t, imagetest.Entry{Name: "version", Body: "one"}))
	p := puller(t, reg)
	r, err := p.Resolve(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	reg.Push(t, "moving:latest", imagetest.BusyboxImage(t, imagetest.Entry{Name: "version", Body: "two"}))
	s := store(t, 0)
	l, err := s.Open(context.Background(), r.Digest, func(ctx context.Context) (v1.Image, error) { return p.Image(ctx, r.Pinned) })
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if b, _ := os.ReadFile(filepath.Join(l.Root, "version")); string(b) != "one" {
		t.Fatalf("ran %q, want the bytes resolved first", b)
	}
	r2, _ := p.Resolve(context.Background(), ref)
	if r2.Digest == r.Digest {
		t.Fatal("the tag did not move")
	}
}

func TestARegistryNotInTheListIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	reg := imagetest.NewRegistry(t)
	ref := reg.Push(t, "x:1", imagetest.BusyboxImage(t))
	cases := []struct {
		name string
		p    func() *image.Puller
		ref  string
		want []string
	}{
		{"not listed", func() *image.Puller { return puller(t, reg, "registry.npmjs.org") }, ref,
			[]string{reg.Addr, "not in this project's network list"}},
		{"a preset names it", func() *image.Puller { return puller(t, reg, "@npm") }, "ghcr.io/acme/ci:3",
			[]string{"ghcr.io:443", "add @ghcr"}},
		{"docker hub", func() *image.Puller { return puller(t, reg, "@npm") }, "node:22",
			[]string{"index.docker.io:443", "add @dockerhub"}},
		// The registry is on loopback: the private switch alone never
		// opens the worker's own addresses, as for the runs' proxy.
		{"loopback", func() *image.Puller { p := puller(t, reg); p.AllowLoopback = false; return p }, ref,
			[]string{"the worker's own address", netpolicy.EnvAllowLoopback}},
		{"no switch", func() *image.Puller { p := puller(t, reg); p.AllowPrivate, p.AllowLoopback = false, false; return p }, ref,
			[]string{"the worker's own address", netpolicy.EnvAllowLoopback}},
		{"plain http", func() *image.Puller { p := puller(t, reg); p.Insecure = nil; return p }, ref,
			[]string{image.EnvInsecure}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := c.p().Resolve(context.Background(), c.ref)
			if c.name != "plain http" && !errors.Is(err, image.ErrRefused) || err == nil {
				t.Fatalf("err = %v, want a refusal", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("%q does not name %q", err, w)
				}
			}
		})
	}
}

func TestEvictionRemovesTheLeastRecentlyUsedButNotAnImageInUse(t *testing.T) {
	t.Parallel()
	reg := imagetest.NewRegistry(t)
	p := puller(t, reg)
	big := imagetest.Entry{Name: "big", Size: 3 << 20}
	refA := reg.Push(t, "a:1", imagetest.BusyboxImage(t, big, imagetest.Entry{Name: "a", Body: "a"}))
	refB := reg.Push(t, "b:1", imagetest.BusyboxImage(t, big, imagetest.Entry{Name: "b", Body: "b"}))
	refC := reg.Push(t, "c:1", imagetest.BusyboxImage(t, big, imagetest.Entry{Name: "c", Body: "c"}))
	s := store(t, 8<<20) // two images fit, not three
	la, ra := pull(t, s, p, refA)
	la.Close()
	lb, rb := pull(t, s, p, refB)
	_, rc := pull(t, s, p, refC) // A is the least recently used
	if s.Has(ra.Digest) || !s.Has(rb.Digest) || !s.Has(rc.Digest) {
		t.Fatalf("after C: A %v B %v C %v", s.Has(ra.Digest), s.Has(rb.Digest), s.Has(rc.Digest))
	}
	// B and C in use: pulling A again leaves the store above its bound
	// rather than pull the root from under a run.
	pull(t, s, p, refA)
	if !s.Has(rb.Digest) || !s.Has(rc.Digest) {
		t.Fatal("an image in use was evicted")
	}
	lb.Close()
	if n, _ := s.Clear(); n != 1 || s.Has(rb.Digest) {
		t.Fatalf("clear removed %d; B still there: %v", n, s.Has(rb.Digest))
	}
}

func TestTwoWorkersPullingOneDigestUnpackItOnce(t *testing.T) {
	t.Parallel()
	reg := imagetest.NewRegistry(t)
	p := puller(t, reg)
	ref := reg.Push(t, "shared:1", imagetest.BusyboxImage(t, imagetest.Entry{Name: "big", Size: 2 << 20}))
	r, err := p.Resolve(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "images")
	var opens atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A store each: two workers share the folder, not the process.
			s, err := image.OpenStore(dir, 0, image.Bounds{})
			if err != nil {
				errs <- err
				return
			}
			l, err := s.Open(context.Background(), r.Digest, func(ctx context.Context) (v1.Image, error) {
				opens.Add(1)
				return p.Image(ctx, r.Pinned)
			})
			if err != nil {
				errs <- err
				return
			}
			if fi, err := os.Stat(filepath.Join(l.Root, "big")); err != nil || fi.Size() != 2<<20 {
				errs <- errors.New("a worker saw half an image")
			}
			l.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := opens.Load(); n != 1 {
		t.Fatalf("unpacked %d times", n)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Fatalf("left %s", e.Name())
		}
	}
}

func TestParseCredentials(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ value, registry, user, pass string }{
		{"bot:tok", "ghcr.io", "bot", "tok"},
		{`{"auths":{"ghcr.io":{"auth":"Ym90OnRvaw=="}}}`, "ghcr.io", "bot", "tok"},
		{`{"auths":{"https://index.docker.io/v1/":{"username":"u","password":"p"}}}`, "index.docker.io", "u", "p"},
	} {
		a, err := image.ParseCredentials(c.value, c.registry)
		if err != nil {
			t.Fatal(err)
		}
		cfg, _ := a.Authorization()
		if cfg.Username != c.user || cfg.Password != c.pass {
			t.Fatalf("%q: %+v", c.value, cfg)
		}
	}
	if _, err := image.ParseCredentials(`{"auths":{"quay.io":{"auth":"eDp5"}}}`, "ghcr.io"); err == nil {
		t.Fatal("credentials of another registry used")
	}
}

// A private registry: refused without credentials, pulled with a pull
// secret in either form.
func TestAPrivateRegistryNeedsThePullSecret(t *testing.T) {
	t.Parallel()
	reg := imagetest.NewPrivateRegistry(t, "bot", "s3cret")
	ref := reg.Push(t, "private:1", imagetest.BusyboxImage(t))
	p := puller(t, reg)
	if _, err := p.Resolve(context.Background(), ref); err == nil || !strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
		t.Fatalf("without credentials: %v", err)
	}
	for _, secret := range []string{"bot:s3cret", `{"auths":{"` + reg.Addr + `":{"auth":"Ym90OnMzY3JldA=="}}}`} {
		a, err := image.ParseCredentials(secret, reg.Addr)
		if err != nil {
			t.Fatal(err)
		}
		p.Auth = a
		s := store(t, 0)
		l, _ := pull(t, s, p, ref)
		if _, err := os.Stat(filepath.Join(l.Root, "bin/busybox")); err != nil {
			t.Fatal(err)
		}
	}
}
