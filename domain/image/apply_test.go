package image_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"anvil/domain/image"
	"anvil/domain/image/imagetest"
)

type E = imagetest.Entry

// tree is a cache tree beside an "outside" folder a hostile layer aims at.
func tree(t *testing.T) (root, outside string) {
	t.Helper()
	dir := t.TempDir()
	root, outside = filepath.Join(dir, "cache", "rootfs"), filepath.Join(dir, "outside")
	for _, d := range []string{root, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root, outside
}

func apply(t *testing.T, root string, b image.Bounds, layers ...[]E) error {
	t.Helper()
	a, err := image.NewApplier(root, b)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, l := range layers {
		if err := a.Layer(bytes.NewReader(imagetest.Tar(t, l...))); err != nil {
			return err
		}
	}
	return nil
}

func empty(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Fatalf("%s holds %v: a layer wrote outside its tree", dir, ents)
	}
}

func TestHostileLayersAreRefusedAndWriteNothingOutside(t *testing.T) {
	t.Parallel()
	rel := func(outside string) string { return "../../../../../../../../.." + outside }
	cases := []struct {
		name   string
		layers func(outside string) [][]E
	}{
		{"relative escaping symlink", func(o string) [][]E {
			return [][]E{{{Name: "esc", Type: tar.TypeSymlink, Linkname: rel(o)}}}
		}},
		{"absolute symlink climbing above the root", func(o string) [][]E {
			return [][]E{{{Name: "esc", Type: tar.TypeSymlink, Linkname: "/../../../.." + o}}}
		}},
		{"a file through an escaping link, same layer", func(o string) [][]E {
			return [][]E{{{Name: "esc", Type: tar.TypeSymlink, Linkname: rel(o)}, {Name: "esc/pwned", Body: "x"}}}
		}},
		{"a file through an escaping link, later layer", func(o string) [][]E {
			return [][]E{{{Name: "esc", Type: tar.TypeSymlink, Linkname: rel(o)}}, {{Name: "esc/pwned", Body: "x"}}}
		}},
		{"../ name", func(o string) [][]E {
			return [][]E{{{Name: "../outside/pwned", Body: "x"}}}
		}},
		{"../ deep in a name", func(o string) [][]E {
			return [][]E{{{Name: "a/b/../../../outside/pwned", Body: "x"}}}
		}},
		{"hard link out of the tree", func(o string) [][]E {
			return [][]E{{{Name: "hl", Type: tar.TypeLink, Linkname: "../outside/x"}}}
		}},
		{"whiteout climbing", func(o string) [][]E {
			return [][]E{{{Name: "../.wh.outside", Body: ""}}}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			root, outside := tree(t)
			err := apply(t, root, image.Bounds{}, c.layers(outside)...)
			if !errors.Is(err, image.ErrHostile) {
				t.Fatalf("err = %v, want a refusal", err)
			}
			empty(t, outside)
		})
	}
}

func TestAbsoluteSymlinksResolveInsideTheImage(t *testing.T) {
	t.Parallel()
	root, outside := tree(t)
	// Debian's var/run → /run, and a link aimed at a host path: both land
	// inside the tree, as in a container.
	err := apply(t, root, image.Bounds{},
		[]E{{Name: "run/", Type: tar.TypeDir}, {Name: "var/run", Type: tar.TypeSymlink, Linkname: "/run"},
			{Name: "host", Type: tar.TypeSymlink, Linkname: outside}},
		[]E{{Name: "var/run/pid", Body: "1"}, {Name: "host/pwned", Body: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	empty(t, outside)
	if b, err := os.ReadFile(filepath.Join(root, "run/pid")); err != nil || string(b) != "1" {
		t.Fatalf("var/run/pid: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(root, outside, "pwned")); err != nil {
		t.Fatalf("the file through an absolute link is not inside the tree: %v", err)
	}
}

func TestDevicesAndFifosAreDroppedAndBitsSquashed(t *testing.T) {
	t.Parallel()
	root, _ := tree(t)
	err := apply(t, root, image.Bounds{}, []E{
		{Name: "dev/", Type: tar.TypeDir},
		{Name: "dev/sda", Type: tar.TypeBlock}, {Name: "dev/mem", Type: tar.TypeChar}, {Name: "fifo", Type: tar.TypeFifo},
		{Name: "bin/su", Body: "x", Mode: 0o6755}, {Name: "tmp/", Type: tar.TypeDir, Mode: 0o1777},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"dev/sda", "dev/mem", "fifo"} {
		if _, err := os.Lstat(filepath.Join(root, n)); !os.IsNotExist(err) {
			t.Fatalf("%s was created: %v", n, err)
		}
	}
	if fi, _ := os.Stat(filepath.Join(root, "bin/su")); fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Fatalf("bin/su is %v", fi.Mode())
	}
	if fi, _ := os.Stat(filepath.Join(root, "tmp")); fi.Mode()&os.ModeSticky == 0 {
		t.Fatalf("tmp lost its sticky bit: %v", fi.Mode())
	}
}

func TestWhiteoutsAndOpaqueDirectories(t *testing.T) {
	t.Parallel()
	root, _ := tree(t)
	err := apply(t, root, image.Bounds{},
		[]E{{Name: "a/x", Body: "1"}, {Name: "a/y", Body: "2"}, {Name: "b/z", Body: "3"}, {Name: "gone", Body: "4"}},
		[]E{{Name: "a/.wh..wh..opq"}, {Name: "a/new", Body: "5"}, {Name: ".wh.gone"}, {Name: "b/.wh.z"}})
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range map[string]bool{"a/x": false, "a/y": false, "a/new": true, "b/z": false, "b": true, "gone": false} {
		_, err := os.Lstat(filepath.Join(root, n))
		if (err == nil) != want {
			t.Fatalf("%s exists = %v, want %v", n, err == nil, want)
		}
	}
}

func TestHardLinksWithinTheTree(t *testing.T) {
	t.Parallel()
	root, _ := tree(t)
	if err := apply(t, root, image.Bounds{}, []E{{Name: "a", Body: "same"}}, []E{{Name: "d/b", Type: tar.TypeLink, Linkname: "a"}}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "d/b")); string(b) != "same" {
		t.Fatalf("link reads %q", b)
	}
	if err := apply(t, root, image.Bounds{}, []E{{Name: "c", Type: tar.TypeLink, Linkname: "d"}}); !errors.Is(err, image.ErrHostile) {
		t.Fatalf("a hard link to a directory: %v", err)
	}
}

func TestBoundsAreCheckedBeforeWriting(t *testing.T) {
	t.Parallel()
	t.Run("unpacked size", func(t *testing.T) {
		t.Parallel()
		root, _ := tree(t)
		err := apply(t, root, image.Bounds{Unpacked: 1 << 20}, []E{{Name: "big", Size: 2 << 20}})
		if !errors.Is(err, image.ErrTooBig) {
			t.Fatalf("err = %v", err)
		}
		if _, err := os.Stat(filepath.Join(root, "big")); !os.IsNotExist(err) {
			t.Fatal("the file was written before the bound was checked")
		}
	})
	t.Run("entries", func(t *testing.T) {
		t.Parallel()
		root, _ := tree(t)
		err := apply(t, root, image.Bounds{Entries: 2}, []E{{Name: "a"}, {Name: "b"}, {Name: "c"}})
		if !errors.Is(err, image.ErrTooBig) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("free disk", func(t *testing.T) {
		t.Parallel()
		root, _ := tree(t)
		a, _ := image.NewApplier(root, image.Bounds{FreeReserve: 1})
		defer a.Close()
		a.Statfs = func() (int64, error) { return 1 << 20, nil }
		err := a.Layer(bytes.NewReader(imagetest.Tar(t, E{Name: "big", Size: 2 << 20})))
		if !errors.Is(err, image.ErrTooBig) || !strings.Contains(err.Error(), "free") {
			t.Fatalf("err = %v", err)
		}
	})
}

// tampered serves an image whose layer bytes are not the ones its
// manifest names (a registry or a man in the middle that lies).
type tampered struct {
	v1.Image
	layer v1.Layer
}

func (t tampered) Layers() ([]v1.Layer, error) { return []v1.Layer{t.layer}, nil }

type badLayer struct {
	v1.Layer
	body []byte
}

func (b badLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(b.body)), nil
}
func (b badLayer) MediaType() (types.MediaType, error) { return types.DockerLayer, nil }

func TestATamperedBlobIsRefusedAndNotCached(t *testing.T) {
	t.Parallel()
	good := imagetest.Layer(t, E{Name: "f", Body: "genuine"})
	img := imagetest.Image(t, nil, good)
	dg, _ := img.Digest()
	rc, _ := good.Compressed()
	body, _ := io.ReadAll(rc)
	// The same tar with other bytes after its trailer: a reader that
	// stopped at the trailer would accept it.
	evil := imagetest.Layer(t, E{Name: "f", Body: "genuine"})
	rc2, _ := evil.Uncompressed()
	plain, _ := io.ReadAll(rc2)
	plain = append(plain, bytes.Repeat([]byte("x"), 100)...)
	for name, b := range map[string][]byte{
		"flipped byte":          append(append([]byte{}, body[:len(body)-9]...), append([]byte{body[len(body)-9] ^ 1}, body[len(body)-8:]...)...),
		"after the tar trailer": plain,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := store(t, 0)
			_, err := s.Open(context.Background(), dg.String(), func(context.Context) (v1.Image, error) {
				return tampered{img, badLayer{good, b}}, nil
			})
			if !errors.Is(err, image.ErrHostile) {
				t.Fatalf("err = %v", err)
			}
			if s.Has(dg.String()) {
				t.Fatal("a tampered image was cached")
			}
		})
	}
}

func TestAZeroBombIsRefusedByTheHeaderBeforeWriting(t *testing.T) {
	t.Parallel()
	bomb := imagetest.Layer(t, E{Name: "zeros", Size: 512 << 20})
	img := imagetest.Image(t, nil, bomb)
	if m, _ := img.Manifest(); m.Layers[0].Size > 2<<20 {
		t.Fatalf("the bomb is %d bytes compressed", m.Layers[0].Size)
	}
	dg, _ := img.Digest()
	s, err := image.OpenStore(filepath.Join(t.TempDir(), "images"), 256<<20, image.Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Open(context.Background(), dg.String(), func(context.Context) (v1.Image, error) { return img, nil })
	if !errors.Is(err, image.ErrTooBig) {
		t.Fatalf("err = %v", err)
	}
}

// FuzzApply: whatever the layers, the applier writes nothing outside its
// tree, and either applies them or refuses with an error.
func FuzzApply(f *testing.F) {
	tb := &testing.T{}
	seeds := [][]E{
		{{Name: "a/b", Body: "x"}, {Name: "l", Type: tar.TypeSymlink, Linkname: "/a"}, {Name: "l/c", Body: "y"}},
		{{Name: "esc", Type: tar.TypeSymlink, Linkname: "../../x"}, {Name: "esc/p", Body: "x"}},
		{{Name: "../p", Body: "x"}},
		{{Name: "d/", Type: tar.TypeDir}, {Name: "d/.wh..wh..opq"}, {Name: ".wh.d"}},
		{{Name: "h", Type: tar.TypeLink, Linkname: "a/b"}},
	}
	for _, s := range seeds {
		f.Add(imagetest.Tar(tb, s...), []byte{})
	}
	f.Fuzz(func(t *testing.T, l1, l2 []byte) {
		dir := t.TempDir()
		root, outside := filepath.Join(dir, "rootfs"), filepath.Join(dir, "outside")
		os.MkdirAll(root, 0o755)
		os.MkdirAll(outside, 0o755)
		a, err := image.NewApplier(root, image.Bounds{Unpacked: 1 << 20, Entries: 1000, FreeReserve: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range [][]byte{l1, l2} {
			if a.Layer(bytes.NewReader(l)) != nil {
				break
			}
		}
		a.Close()
		ents, _ := os.ReadDir(outside)
		if len(ents) != 0 {
			t.Fatalf("wrote outside: %v", ents)
		}
		siblings, _ := os.ReadDir(dir)
		if len(siblings) != 2 {
			t.Fatalf("wrote beside the tree: %v", siblings)
		}
	})
}
