package image

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/klauspost/compress/zstd"
)

// EnvCacheMB bounds the store.
const EnvCacheMB = "ANVIL_IMAGE_CACHE_MB"

// DefaultCacheMB is the store's bound when EnvCacheMB is unset: 10 GiB.
const DefaultCacheMB = 10240

// Store keeps unpacked images under one directory (ANVIL_WORK_DIR/images):
// one tree per manifest digest, sha256-<hex>/rootfs, beside its config
// (image.json). A tree is built in a temporary directory and renamed into
// place under an exclusive lock on its digest, so two workers never build
// or see half of one; a run holds a shared lock on it while it runs, so
// eviction (least recently used first, above the bound) and the settings
// page's clear button pass over images in use.
//
// Layers shared by two images are stored twice: the tree is the sandbox's
// root as one read-only bind, and bubblewrap 0.8 (Debian 12) has no
// overlay to stack a chain of layer trees (docs/images.md).
type Store struct {
	dir    string
	limit  int64
	bounds Bounds
	// Statfs, when set, replaces the free-space probe of the appliers.
	Statfs func() (int64, error)
}

// OpenStore creates dir (0711: the sandbox's uid may traverse to a tree it
// is given, never list the others) and returns its store, bounded to
// limitBytes (<= 0: DefaultCacheMB).
func OpenStore(dir string, limitBytes int64, b Bounds) (*Store, error) {
	if limitBytes <= 0 {
		limitBytes = DefaultCacheMB << 20
	}
	b = b.withDefaults()
	if b.Unpacked > limitBytes {
		b.Unpacked = limitBytes
	}
	for _, d := range []string{dir, filepath.Join(dir, ".locks")} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return nil, fmt.Errorf("image: the store: %w", err)
		}
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, fmt.Errorf("image: the store: %w", err)
	}
	return &Store{dir: dir, limit: limitBytes, bounds: b}, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Config is what a run needs of an image's configuration.
type Config struct {
	Digest     string              `json:"digest"`
	Env        []string            `json:"env,omitempty"`
	Entrypoint []string            `json:"entrypoint,omitempty"`
	Cmd        []string            `json:"cmd,omitempty"`
	WorkingDir string              `json:"working_dir,omitempty"`
	User       string              `json:"user,omitempty"`
	Volumes    []string            `json:"volumes,omitempty"`
	Ports      map[string]struct{} `json:"ports,omitempty"`
	// Size is the tree's bytes (its regular files), for eviction.
	Size int64 `json:"size"`
}

// Lease is an image in use: its tree stays until Close.
type Lease struct {
	// Root is the unpacked tree, the sandbox's root.
	Root   string
	Config Config
	lock   *os.File
}

// Close releases the image (it may be evicted again).
func (l *Lease) Close() error {
	if l == nil || l.lock == nil {
		return nil
	}
	err := l.lock.Close()
	l.lock = nil
	return err
}

var digestRE = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)

func entryName(digest string) string { return "sha256-" + strings.TrimPrefix(digest, "sha256:") }

// Has reports whether digest is unpacked in the store.
func (s *Store) Has(digest string) bool {
	_, err := os.Stat(filepath.Join(s.dir, entryName(digest), "image.json"))
	return err == nil
}

// Open returns digest's tree, unpacking it first (from the image open
// returns) when the store does not hold it. Two callers of one digest,
// in this process or another, unpack it once.
func (s *Store) Open(ctx context.Context, digest string, open func(context.Context) (v1.Image, error)) (*Lease, error) {
	if !digestRE.MatchString(digest) {
		return nil, fmt.Errorf("%w: %q is not a sha256 digest", ErrBadRef, clip(digest))
	}
	name := entryName(digest)
	final := filepath.Join(s.dir, name)
	// An image already there is shared: a run that holds it (a service and
	// a step of one image) must not block another's use of it.
	lock, err := s.lock(ctx, name, syscall.LOCK_SH)
	if err != nil {
		return nil, err
	}
	if cfg, err := readConfig(final); err == nil {
		now := time.Now()
		_ = os.Chtimes(filepath.Join(final, "image.json"), now, now)
		return &Lease{Root: filepath.Join(final, "rootfs"), Config: cfg, lock: lock}, nil
	}
	// Not there: build it under the exclusive lock (flock converts by
	// releasing first, so two converters never wait on each other).
	if err := flock(ctx, lock, syscall.LOCK_EX); err != nil {
		lock.Close()
		return nil, err
	}
	cfg, err := readConfig(final)
	if err != nil {
		cfg, err = s.build(ctx, digest, final, open)
	}
	if err != nil {
		lock.Close()
		return nil, err
	}
	now := time.Now()
	_ = os.Chtimes(filepath.Join(final, "image.json"), now, now) // last used: eviction's order
	// Keep a shared lock while the run uses it: eviction needs the
	// exclusive one.
	if err := flock(ctx, lock, syscall.LOCK_SH); err != nil {
		lock.Close()
		return nil, err
	}
	s.evict(name)
	return &Lease{Root: filepath.Join(final, "rootfs"), Config: cfg, lock: lock}, nil
}

func readConfig(dir string) (Config, error) {
	b, err := os.ReadFile(filepath.Join(dir, "image.json"))
	if err != nil {
		return Config{}, err
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, err
	}
	return c, nil
}

func (s *Store) lock(ctx context.Context, name string, how int) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(s.dir, ".locks", name+".lock"), os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("image: lock: %w", err)
	}
	if err := flock(ctx, f, how); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// flock takes (or converts to) a lock, waiting for it without blocking a
// thread past ctx.
func flock(ctx context.Context, f *os.File, how int) error {
	for wait := time.Millisecond; ; {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return fmt.Errorf("image: lock: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		if wait < 100*time.Millisecond {
			wait *= 2
		}
	}
}

// build unpacks the image into a temporary tree and renames it into
// final; the caller holds the digest's exclusive lock.
func (s *Store) build(ctx context.Context, digest, final string, open func(context.Context) (v1.Image, error)) (Config, error) {
	tmp := filepath.Join(s.dir, ".tmp-"+filepath.Base(final))
	_ = os.RemoveAll(tmp) // a worker that died while unpacking
	_ = os.RemoveAll(final)
	if err := os.MkdirAll(filepath.Join(tmp, "rootfs"), 0o711); err != nil {
		return Config{}, fmt.Errorf("image: %w", err)
	}
	cfg, err := s.unpack(ctx, digest, tmp, open)
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return Config{}, err
	}
	return cfg, nil
}

func (s *Store) unpack(ctx context.Context, digest, tmp string, open func(context.Context) (v1.Image, error)) (Config, error) {
	img, err := open(ctx)
	if err != nil {
		return Config{}, err
	}
	got, err := img.Digest()
	if err != nil {
		return Config{}, fmt.Errorf("image: %w", err)
	}
	if got.String() != digest {
		return Config{}, fmt.Errorf("%w: the registry served manifest %s for %s", ErrHostile, got, digest)
	}
	m, err := img.Manifest()
	if err != nil {
		return Config{}, fmt.Errorf("image: the manifest: %w", err)
	}
	if len(m.Layers) > s.bounds.Layers {
		return Config{}, fmt.Errorf("%w: %d layers, at most %d", ErrTooBig, len(m.Layers), s.bounds.Layers)
	}
	var total int64
	for _, l := range m.Layers {
		if l.Size < 0 {
			return Config{}, fmt.Errorf("%w: a layer of negative size", ErrHostile)
		}
		total += l.Size
	}
	if total > s.bounds.Compressed {
		return Config{}, fmt.Errorf("%w: the layers weigh %d MiB compressed, at most %d MiB", ErrTooBig, total>>20, s.bounds.Compressed>>20)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return Config{}, fmt.Errorf("image: the config: %w", err)
	}
	if cf.OS != "" && cf.OS != "linux" {
		return Config{}, fmt.Errorf("image: %s is an image for %s", digest, cf.OS)
	}
	if len(cf.RootFS.DiffIDs) != len(m.Layers) {
		return Config{}, fmt.Errorf("%w: the config names %d layers, the manifest %d", ErrHostile, len(cf.RootFS.DiffIDs), len(m.Layers))
	}
	layers, err := img.Layers()
	if err != nil {
		return Config{}, fmt.Errorf("image: the layers: %w", err)
	}
	a, err := NewApplier(filepath.Join(tmp, "rootfs"), s.bounds)
	if err != nil {
		return Config{}, err
	}
	a.Statfs = s.Statfs
	for i, l := range layers {
		if ctx.Err() != nil {
			a.Close()
			return Config{}, ctx.Err()
		}
		if err := applyBlob(a, l, m.Layers[i], cf.RootFS.DiffIDs[i]); err != nil {
			a.Close()
			return Config{}, err
		}
	}
	size := a.unpacked
	if err := a.Close(); err != nil {
		return Config{}, fmt.Errorf("image: %w", err)
	}
	var vols []string
	for v := range cf.Config.Volumes {
		if n, err := cleanName(v); err == nil && n != "" {
			vols = append(vols, n)
		}
	}
	if err := Prepare(filepath.Join(tmp, "rootfs"), vols...); err != nil {
		return Config{}, err
	}
	c := Config{Digest: digest, Env: cf.Config.Env, Entrypoint: cf.Config.Entrypoint, Cmd: cf.Config.Cmd,
		WorkingDir: cf.Config.WorkingDir, User: cf.Config.User, Ports: cf.Config.ExposedPorts, Size: size}
	for v := range cf.Config.Volumes {
		c.Volumes = append(c.Volumes, v)
	}
	sort.Strings(c.Volumes)
	b, _ := json.Marshal(c)
	if err := os.WriteFile(filepath.Join(tmp, "image.json"), b, 0o644); err != nil {
		return Config{}, fmt.Errorf("image: %w", err)
	}
	return c, nil
}

// Mount points a sandbox needs on a read-only root (bubblewrap cannot
// create them there), and files it binds over.
var (
	mountDirs  = []string{"proc", "dev", "tmp", "workspace", "run", "cache", "var/tmp", "root"}
	mountFiles = []string{"etc/hosts", "etc/resolv.conf"}
)

// Prepare creates in a tree the mount points of a sandbox: proc dev tmp
// workspace run cache var/tmp root (HOME), the image's volumes, and empty etc/hosts and etc/resolv.conf
// (what the image had there is replaced: the sandbox's names are anvil's).
func Prepare(root string, volumes ...string) error {
	if err := os.Chmod(root, 0o755); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	a, err := NewApplier(root, Bounds{})
	if err != nil {
		return err
	}
	defer a.Close()
	for _, d := range append(append([]string{}, mountDirs...), volumes...) {
		fd, err := a.parent(d + "/x")
		if err != nil {
			return err
		}
		syscall.Close(fd)
	}
	for _, f := range mountFiles {
		pfd, err := a.parent(f)
		if err != nil {
			return err
		}
		base := filepath.Base(f)
		err = removeAt(pfd, base)
		if err == nil {
			var fd int
			fd, err = syscall.Openat(pfd, base, syscall.O_CREAT|syscall.O_EXCL|syscall.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
			if err == nil {
				syscall.Close(fd)
			}
		}
		syscall.Close(pfd)
		if err != nil {
			return fmt.Errorf("image: create %s: %w", f, err)
		}
	}
	return nil
}

// countingHash hashes and counts what passes through it.
type countingHash struct {
	r io.Reader
	h hash.Hash
	n int64
}

func (c *countingHash) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	return n, err
}

// maxTrailer bounds what may follow a layer's tar trailer: tar pads to a
// record (10 KiB); more is a stream hiding something.
const maxTrailer = 1 << 20

// maxZstdWindow bounds the window of a zstd layer, the history its
// decoder holds: 16 MiB, twice what zstd's levels up to 19 and the
// compressors of Docker, BuildKit and podman use (8 MiB at most); a
// window of 32 to 128 MiB (zstd --ultra -20 to -22, --long) would be the
// most of a pull's memory.
const maxZstdWindow = 16 << 20

// window reports whether err is the zstd decoder refusing a window above
// maxZstdWindow.
func window(err error) bool {
	return errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded)
}

func zstdTooBig(d v1.Descriptor) error {
	return fmt.Errorf("%w: layer %s is zstd with a window over %d MiB; anvil decodes a layer within %d MiB (compress it at a level up to 19, without --long)",
		ErrTooBig, d.Digest, maxZstdWindow>>20, maxZstdWindow>>20)
}

// applyBlob reads one layer's blob, checks its digest and size to its
// very end (never only to the tar trailer: a stream that stops there
// could be a tampered blob cached under the genuine digest), decompresses
// it, checks the uncompressed digest the config names, and applies it.
func applyBlob(a *Applier, l v1.Layer, d v1.Descriptor, diffID v1.Hash) error {
	rc, err := l.Compressed()
	if err != nil {
		return fmt.Errorf("image: layer %s: %w", d.Digest, err)
	}
	defer rc.Close()
	if d.Digest.Algorithm != "sha256" {
		return fmt.Errorf("%w: layer digest %s is not sha256", ErrHostile, d.Digest)
	}
	raw := &countingHash{r: io.LimitReader(rc, d.Size+1), h: sha256.New()}
	br := bufio.NewReaderSize(raw, 64<<10)
	var plain io.Reader
	magic, _ := br.Peek(4)
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		gz, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("%w: layer %s: %w", ErrHostile, d.Digest, err)
		}
		defer gz.Close()
		plain = gz
	case len(magic) == 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd:
		// The decoder holds the frame's window: a layer that declares a
		// bigger one than maxZstdWindow is refused, not decoded in as much
		// memory as it asks (docs/images.md, "What a pull holds in
		// memory").
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxZstdWindow), zstd.WithDecoderMaxMemory(maxZstdWindow))
		if err != nil {
			return fmt.Errorf("%w: layer %s: %w", ErrHostile, d.Digest, err)
		}
		defer zr.Close()
		plain = zr
	default:
		plain = br
	}
	un := &countingHash{r: plain, h: sha256.New()}
	if err := a.Layer(un); err != nil {
		if window(err) {
			return zstdTooBig(d)
		}
		return fmt.Errorf("layer %s: %w", d.Digest, err)
	}
	// Drain: what follows the trailer is hashed too, within a bound.
	before := un.n
	if _, err := io.Copy(io.Discard, io.LimitReader(un, maxTrailer+1)); err != nil {
		if window(err) {
			return zstdTooBig(d)
		}
		return fmt.Errorf("%w: layer %s: %w", ErrHostile, d.Digest, err)
	}
	if un.n-before > maxTrailer {
		return fmt.Errorf("%w: layer %s carries more than %d bytes after its end", ErrHostile, d.Digest, maxTrailer)
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		return fmt.Errorf("image: layer %s: %w", d.Digest, err)
	}
	if raw.n != d.Size {
		return fmt.Errorf("%w: layer %s is %d bytes, the manifest says %d", ErrHostile, d.Digest, raw.n, d.Size)
	}
	if got := hex.EncodeToString(raw.h.Sum(nil)); got != d.Digest.Hex {
		return fmt.Errorf("%w: layer %s does not match its digest (got sha256:%s)", ErrHostile, d.Digest, got)
	}
	if got := hex.EncodeToString(un.h.Sum(nil)); diffID.Algorithm != "sha256" || got != diffID.Hex {
		return fmt.Errorf("%w: layer %s does not unpack to %s", ErrHostile, d.Digest, diffID)
	}
	return nil
}

// Entry is one image of the store, for the settings page.
type Entry struct {
	Digest   string
	Size     int64
	LastUsed time.Time
}

// List returns the store's images, most recently used first.
func (s *Store) List() []Entry {
	ents, _ := os.ReadDir(s.dir)
	var out []Entry
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "sha256-") {
			continue
		}
		fi, err := os.Stat(filepath.Join(s.dir, e.Name(), "image.json"))
		if err != nil {
			continue
		}
		c, err := readConfig(filepath.Join(s.dir, e.Name()))
		if err != nil {
			continue
		}
		out = append(out, Entry{Digest: "sha256:" + strings.TrimPrefix(e.Name(), "sha256-"), Size: c.Size, LastUsed: fi.ModTime()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LastUsed.After(out[j].LastUsed) })
	return out
}

// Figures is the store in numbers, for the settings page (never which
// images: the store is shared by every organisation): how many images,
// their bytes, and the bound.
func (s *Store) Figures() (images int, bytes, limit int64) {
	for _, e := range s.List() {
		images++
		bytes += e.Size
	}
	return images, bytes, s.limit
}

// evict removes the least recently used images while the store is above
// its bound, never keep nor one in use.
func (s *Store) evict(keep string) {
	list := s.List()
	var total int64
	for _, e := range list {
		total += e.Size
	}
	for i := len(list) - 1; i >= 0 && total > s.limit; i-- {
		name := entryName(list[i].Digest)
		if name == keep {
			continue
		}
		if s.remove(name) {
			total -= list[i].Size
		}
	}
}

// remove deletes an image unless it is in use; it reports whether it did.
func (s *Store) remove(name string) bool {
	f, err := os.OpenFile(filepath.Join(s.dir, ".locks", name+".lock"), os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return false
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return false
	}
	// Out of the store's names first, so that no one opens half of it.
	trash := filepath.Join(s.dir, ".trash-"+name)
	_ = os.RemoveAll(trash)
	if err := os.Rename(filepath.Join(s.dir, name), trash); err != nil {
		return false
	}
	_ = os.RemoveAll(trash)
	return true
}

// Clear removes every image not in use and returns how many it removed
// and their bytes.
func (s *Store) Clear() (n int, bytes int64) {
	for _, e := range s.List() {
		if s.remove(entryName(e.Digest)) {
			n++
			bytes += e.Size
		}
	}
	return n, bytes
}
