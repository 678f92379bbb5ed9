package image_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/klauspost/compress/zstd"

	"anvil/domain/image"
	"anvil/domain/image/imagetest"
)

// gzipLayer is a layer whose blob is compressed once, here: its
// Compressed() hands out these bytes, so what Store.Open allocates is the
// pull's own, not a compressor's.
func gzipLayer(t *testing.T, entries ...E) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(imagetest.Tar(t, entries...)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// zstdLayer is gzipLayer compressed with zstd, with a window of window
// bytes.
func zstdLayer(t *testing.T, window int, entries ...E) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf, zstd.WithWindowSize(window), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(imagetest.Tar(t, entries...)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// allocatedByOpen is the heap bytes one Store.Open of img allocates into
// a new store. The image's manifest and config are computed before, so
// only the unpack counts.
func allocatedByOpen(t *testing.T, img v1.Image) uint64 {
	t.Helper()
	dg, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := img.ConfigFile(); err != nil {
		t.Fatal(err)
	}
	s, err := image.OpenStore(filepath.Join(t.TempDir(), "images"), 0, image.Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	lease, err := s.Open(context.Background(), dg.String(), func(context.Context) (v1.Image, error) { return img, nil })
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	lease.Close()
	return after.TotalAlloc - before.TotalAlloc
}

// A pull streams each layer from the registry's connection through the
// decompressor and the tar reader into the files (docs/images.md, "What a
// pull holds in memory"): what it allocates does not grow with a file's
// size, and by a few KiB only with each file. Not parallel: the heap's
// counters are the process's, and parallel tests do not run beside this
// one.
func TestAPullStreamsItsLayers(t *testing.T) {
	// The first pull of the process pays for what is made once (the
	// packages' lazy tables); it is not this test's.
	allocatedByOpen(t, imagetest.Image(t, nil, gzipLayer(t, E{Name: "warm", Body: "up"})))

	t.Run("a big file", func(t *testing.T) {
		small := allocatedByOpen(t, imagetest.Image(t, nil, gzipLayer(t, E{Name: "f", Size: 1 << 20})))
		big := allocatedByOpen(t, imagetest.Image(t, nil, gzipLayer(t, E{Name: "f", Size: 32 << 20})))
		t.Logf("1 MiB file: %d KiB allocated; 32 MiB file: %d KiB", small>>10, big>>10)
		// Holding the blob, the tar or the file would allocate 31 MiB more.
		if big > small+(1<<20) {
			t.Fatalf("a 32 MiB file allocated %d KiB, a 1 MiB one %d KiB: the layer is held in memory", big>>10, small>>10)
		}
	})
	t.Run("a big file, zstd", func(t *testing.T) {
		small := allocatedByOpen(t, imagetest.Image(t, nil, zstdLayer(t, 8<<20, E{Name: "f", Size: 1 << 20})))
		big := allocatedByOpen(t, imagetest.Image(t, nil, zstdLayer(t, 8<<20, E{Name: "f", Size: 32 << 20})))
		t.Logf("1 MiB file: %d KiB allocated; 32 MiB file: %d KiB (the 8 MiB window in both)", small>>10, big>>10)
		if big > small+(1<<20) {
			t.Fatalf("a 32 MiB file allocated %d KiB, a 1 MiB one %d KiB: the layer is held in memory", big>>10, small>>10)
		}
	})
	t.Run("many files", func(t *testing.T) {
		files := func(n int) []E {
			es := make([]E, n)
			for i := range es {
				es[i] = E{Name: fmt.Sprintf("d/%d", i), Body: string(bytes.Repeat([]byte{byte(i)}, 64<<10))}
			}
			return es
		}
		few := allocatedByOpen(t, imagetest.Image(t, nil, gzipLayer(t, files(20)...)))
		many := allocatedByOpen(t, imagetest.Image(t, nil, gzipLayer(t, files(220)...)))
		perFile := (int64(many) - int64(few)) / 200
		t.Logf("20 files of 64 KiB: %d KiB allocated; 220: %d KiB; %d bytes a file", few>>10, many>>10, perFile)
		// A buffer per file (io.CopyN's 32 KiB) would be 32 KiB a file.
		if perFile > 8<<10 {
			t.Fatalf("each 64 KiB file allocated %d bytes: the unpack buffers per file", perFile)
		}
	})
}

// A zstd layer declaring a window the decoder would have to hold beyond
// the pull's budget is refused, and nothing of it is kept.
func TestAZstdLayerWithAHugeWindowIsRefused(t *testing.T) {
	t.Parallel()
	img := imagetest.Image(t, nil, zstdLayer(t, 64<<20, E{Name: "f", Size: 20 << 20}))
	dg, _ := img.Digest()
	s := store(t, 0)
	_, err := s.Open(context.Background(), dg.String(), func(context.Context) (v1.Image, error) { return img, nil })
	if !errors.Is(err, image.ErrTooBig) || !strings.Contains(err.Error(), "window over 16 MiB") {
		t.Fatalf("err = %v", err)
	}
	if s.Has(dg.String()) {
		t.Fatal("the refused image was cached")
	}
}
