package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strings"
	"time"

	securejoin "github.com/cyphar/filepath-securejoin"
	"golang.org/x/sys/unix"
)

// ErrHostile is an image refused because a layer tries to leave its tree
// or to create what a sandbox must not see (docs/images.md, "Extraction").
var ErrHostile = errors.New("image: refused layer")

// ErrTooBig is an image refused by a bound before anything of it was
// written past that bound.
var ErrTooBig = errors.New("image: over a bound")

// Bounds limit what one image may cost; zero fields take the defaults.
type Bounds struct {
	// Compressed bounds the sum of the layers' sizes in the manifest.
	Compressed int64
	// Unpacked bounds the sum of the regular files' sizes in the tar
	// headers.
	Unpacked int64
	// Entries bounds the number of tar entries of all layers together.
	Entries int
	// Layers bounds the number of layers.
	Layers int
	// FreeReserve is the free space the disk keeps after every file.
	FreeReserve int64
}

// Defaults of [Bounds].
const (
	DefaultCompressed  = 4 << 30
	DefaultUnpacked    = 8 << 30
	DefaultEntries     = 500_000
	DefaultLayers      = 128
	DefaultFreeReserve = 256 << 20
)

func (b Bounds) withDefaults() Bounds {
	if b.Compressed <= 0 {
		b.Compressed = DefaultCompressed
	}
	if b.Unpacked <= 0 {
		b.Unpacked = DefaultUnpacked
	}
	if b.Entries <= 0 {
		b.Entries = DefaultEntries
	}
	if b.Layers <= 0 {
		b.Layers = DefaultLayers
	}
	if b.FreeReserve < 0 {
		b.FreeReserve = 0
	}
	return b
}

// Applier applies layers, in order, to one tree. Every file operation is
// confined to the tree with openat2's RESOLVE_IN_ROOT: an absolute symlink
// of the image (Debian's var/run → /run) resolves inside the tree, as it
// would inside a container, and nothing resolves above it. On top of that
// the applier refuses, rather than clamps, what only a hostile image does:
// a name with a .. component, a symlink whose target climbs above the root,
// a hard link to outside the tree or to a directory. Device nodes and FIFOs
// are dropped, setuid, setgid and xattrs too, ownership is that of the
// worker (squashed), modification times are kept.
//
// It is pure machinery over a directory: no network, no database; the
// store (store.go) feeds it blobs whose digests it checks.
type Applier struct {
	root   int    // O_PATH descriptor of the tree
	dir    string // the tree's path
	bounds Bounds
	// Statfs reports the free bytes of the tree's disk; nil uses statfs(2)
	// (tests give a small disk).
	Statfs func() (int64, error)

	entries  int
	unpacked int64
	dirTimes map[string]time.Time
	// buf carries every file's bytes from the tar to its descriptor: one
	// buffer for the applier, not one per file (io.CopyN's), so a layer of
	// many files allocates no more than one of few (docs/images.md, "What
	// a pull holds in memory").
	buf []byte
}

// NewApplier opens dir (an existing, empty directory) as the tree.
func NewApplier(dir string, b Bounds) (*Applier, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("image: open the tree: %w", err)
	}
	return &Applier{root: fd, dir: dir, bounds: b.withDefaults(), dirTimes: map[string]time.Time{}}, nil
}

// Close releases the tree's descriptor after setting the directories'
// modification times (kept until the end: every entry written into a
// directory changes its time).
func (a *Applier) Close() error {
	if a.root < 0 {
		return nil
	}
	for p, t := range a.dirTimes {
		ts := []unix.Timespec{unix.NsecToTimespec(t.UnixNano()), unix.NsecToTimespec(t.UnixNano())}
		if p == "." {
			_ = unix.UtimesNanoAt(a.root, ".", ts, 0)
			continue
		}
		if fd, err := a.openIn(path.Dir(p), unix.O_PATH|unix.O_DIRECTORY); err == nil {
			_ = unix.UtimesNanoAt(fd, path.Base(p), ts, unix.AT_SYMLINK_NOFOLLOW)
			unix.Close(fd)
		}
	}
	err := unix.Close(a.root)
	a.root = -1
	return err
}

func hostile(name, format string, args ...any) error {
	if len(name) > 200 {
		name = name[:200] + "…"
	}
	return fmt.Errorf("%w: %q %s", ErrHostile, strings.ToValidUTF8(name, "?"), fmt.Sprintf(format, args...))
}

// cleanName returns a tar entry's name relative to the root ("" for the
// root itself), refusing a .. component anywhere and a NUL.
func cleanName(raw string) (string, error) {
	if strings.ContainsRune(raw, 0) || len(raw) > 4096 {
		return "", hostile(raw, "is not a file name")
	}
	n := strings.TrimLeft(raw, "/")
	var parts []string
	for _, c := range strings.Split(n, "/") {
		switch c {
		case "", ".":
		case "..":
			return "", hostile(raw, "climbs with ..")
		default:
			parts = append(parts, c)
		}
	}
	return strings.Join(parts, "/"), nil
}

// openIn opens dir (relative to the root) confined to the tree.
func (a *Applier) openIn(dir string, flags int) (int, error) {
	if dir == "" || dir == "." {
		dir = "."
	}
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV}
	for {
		fd, err := unix.Openat2(a.root, dir, &how)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		return fd, err
	}
}

// parent opens the directory that holds name, creating missing directories
// (0755) on the way, each confined to the tree. A missing directory behind
// a symlink (var/run → /run before run exists) is created where the link
// leads inside the tree, as a container's extraction would.
func (a *Applier) parent(name string) (int, error) {
	dir := path.Dir(name)
	fd, err := a.openIn(dir, unix.O_PATH|unix.O_DIRECTORY)
	if err == nil {
		return fd, nil
	}
	if !errors.Is(err, unix.ENOENT) {
		return -1, hostile(name, "has a parent that is not a directory in the tree (%v)", err)
	}
	// The path the symlinks lead to, scoped to the tree (a hint only:
	// every step below is confined again by openat2).
	joined, err := securejoin.SecureJoin(a.dir, dir)
	if err != nil {
		return -1, hostile(name, "has a parent outside the tree (%v)", err)
	}
	rel, err := filepath.Rel(a.dir, joined)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return -1, hostile(name, "has a parent outside the tree")
	}
	cur := "."
	for _, c := range strings.Split(rel, "/") {
		if c == "." || c == "" {
			continue
		}
		pfd, err := a.openIn(cur, unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			return -1, hostile(name, "has a parent that is not a directory in the tree (%v)", err)
		}
		err = unix.Mkdirat(pfd, c, 0o755)
		unix.Close(pfd)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, fmt.Errorf("image: create %q: %w", dir, err)
		}
		cur = path.Join(cur, c)
	}
	fd, err = a.openIn(dir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return -1, hostile(name, "has a parent that is not a directory in the tree (%v)", err)
	}
	return fd, nil
}

// symlinkEscapes reports whether a symlink at name pointing to target
// would climb above the root: an absolute target whose .. rises above /,
// a relative one whose .. rises above the root from name's directory.
func symlinkEscapes(name, target string) bool {
	var p string
	if strings.HasPrefix(target, "/") {
		p = target
	} else {
		p = path.Dir(name) + "/" + target
	}
	depth := 0
	for _, c := range strings.Split(p, "/") {
		switch c {
		case "", ".":
		case "..":
			depth--
			if depth < 0 {
				return true
			}
		default:
			depth++
		}
	}
	return false
}

// Layer applies one uncompressed layer tar. The caller checks the blob's
// digest to its end (store.go); an error leaves the tree to be thrown
// away.
func (a *Applier) Layer(r io.Reader) error {
	tr := tar.NewReader(r)
	created := map[string]bool{} // names this layer wrote: an opaque marker spares them
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: the layer is not a tar archive: %w", ErrHostile, err)
		}
		a.entries++
		if a.entries > a.bounds.Entries {
			return fmt.Errorf("%w: more than %d entries", ErrTooBig, a.bounds.Entries)
		}
		name, err := cleanName(h.Name)
		if err != nil {
			return err
		}
		if err := a.entry(tr, h, name, created); err != nil {
			return err
		}
	}
}

const (
	whiteoutPrefix = ".wh."
	opaqueMarker   = ".wh..wh..opq"
)

func (a *Applier) entry(r io.Reader, h *tar.Header, name string, created map[string]bool) error {
	base := path.Base(name)
	if name == "" {
		if h.Typeflag == tar.TypeDir {
			a.dirTimes["."] = h.ModTime
			return nil
		}
		return hostile(h.Name, "replaces the root")
	}
	if base == opaqueMarker {
		return a.opaque(path.Dir(name), created)
	}
	if strings.HasPrefix(base, whiteoutPrefix) {
		victim := path.Join(path.Dir(name), strings.TrimPrefix(base, whiteoutPrefix))
		pfd, err := a.parent(victim)
		if err != nil {
			return err
		}
		defer unix.Close(pfd)
		return removeAt(pfd, path.Base(victim))
	}
	switch h.Typeflag {
	case tar.TypeDir, tar.TypeReg, tar.TypeSymlink, tar.TypeLink:
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return nil // dropped: no device nodes and no FIFOs in a sandbox's root
	case tar.TypeXGlobalHeader:
		return nil
	default:
		return nil // other kinds (sparse, GNU extensions) carry nothing a root needs
	}
	pfd, err := a.parent(name)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	created[name] = true
	mode := uint32(h.Mode) & 0o777
	switch h.Typeflag {
	case tar.TypeDir:
		if h.Mode&0o1000 != 0 {
			mode |= unix.S_ISVTX
		}
		var st unix.Stat_t
		if err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				if err := removeAt(pfd, base); err != nil {
					return err
				}
			}
		}
		if err := unix.Mkdirat(pfd, base, 0o700); err != nil && err != unix.EEXIST {
			return fmt.Errorf("image: create %q: %w", name, err)
		}
		if err := unix.Fchmodat(pfd, base, mode|0o700, 0); err != nil {
			// The worker (the owner: ownership is squashed) keeps access to
			// its own tree to apply later layers and to evict it; the
			// sandbox sees the tree read-only whatever the bits say.
			return fmt.Errorf("image: chmod %q: %w", name, err)
		}
		a.dirTimes[name] = h.ModTime
		return nil
	case tar.TypeSymlink:
		if h.Linkname == "" || strings.ContainsRune(h.Linkname, 0) || len(h.Linkname) > 4096 {
			return hostile(h.Name, "is a symlink without a target")
		}
		if symlinkEscapes(name, h.Linkname) {
			return hostile(h.Name, "is a symlink that leaves the image (→ %q)", h.Linkname)
		}
		if err := removeAt(pfd, base); err != nil {
			return err
		}
		if err := unix.Symlinkat(h.Linkname, pfd, base); err != nil {
			return fmt.Errorf("image: symlink %q: %w", name, err)
		}
		return setTime(pfd, base, h.ModTime)
	case tar.TypeLink:
		target, err := cleanName(h.Linkname)
		if err != nil || target == "" {
			return hostile(h.Name, "is a hard link that leaves the image (→ %q)", h.Linkname)
		}
		tfd, err := a.openIn(path.Dir(target), unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			return hostile(h.Name, "is a hard link to a file the image does not have (→ %q)", h.Linkname)
		}
		defer unix.Close(tfd)
		var st unix.Stat_t
		if err := unix.Fstatat(tfd, path.Base(target), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return hostile(h.Name, "is a hard link to a file the image does not have (→ %q)", h.Linkname)
		}
		if err := removeAt(pfd, base); err != nil {
			return err
		}
		if err := unix.Linkat(tfd, path.Base(target), pfd, base, 0); err != nil {
			return fmt.Errorf("image: link %q: %w", name, err)
		}
		return nil
	}
	// A regular file: bounds first, then a new file (never through what
	// the name held before: it is removed, and the file is created with
	// O_EXCL|O_NOFOLLOW in the confined parent).
	if h.Size < 0 || h.Size > a.bounds.Unpacked-a.unpacked {
		return fmt.Errorf("%w: unpacked, the image would be larger than %d MiB (%q holds %d bytes)", ErrTooBig, a.bounds.Unpacked>>20, h.Name, h.Size)
	}
	a.unpacked += h.Size
	if free, err := a.free(); err == nil && h.Size > free-a.bounds.FreeReserve {
		return fmt.Errorf("%w: the disk has %d MiB free, %q needs %d MiB and the disk keeps %d MiB", ErrTooBig, free>>20, h.Name, h.Size>>20, a.bounds.FreeReserve>>20)
	}
	if err := removeAt(pfd, base); err != nil {
		return err
	}
	fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("image: create %q: %w", name, err)
	}
	if a.buf == nil {
		a.buf = make([]byte, copyBufBytes)
	}
	n, err := io.CopyBuffer(fdWriter(fd), io.LimitReader(r, h.Size), a.buf)
	if err == nil && n != h.Size {
		err = io.ErrUnexpectedEOF
	}
	if err == nil {
		// No setuid, no setgid, no sticky bit on a file: the mode's
		// permission bits only.
		err = unix.Fchmod(fd, mode)
	}
	if err == nil {
		ts := unix.NsecToTimespec(h.ModTime.UnixNano())
		err = unix.UtimesNanoAt(pfd, base, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
	}
	unix.Close(fd)
	if err != nil {
		return fmt.Errorf("image: write %q: %w", name, err)
	}
	return nil
}

func setTime(dirfd int, name string, t time.Time) error {
	ts := unix.NsecToTimespec(t.UnixNano())
	if err := unix.UtimesNanoAt(dirfd, name, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("image: set the time of %q: %w", name, err)
	}
	return nil
}

func (a *Applier) free() (int64, error) {
	if a.Statfs != nil {
		return a.Statfs()
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(a.root, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// opaque empties dir of what earlier layers put there (an opaque
// directory); what this layer already wrote into it stays.
func (a *Applier) opaque(dir string, created map[string]bool) error {
	fd, err := a.openIn(dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return hostile(dir, "is an opaque directory that is not a directory in the tree (%v)", err)
	}
	defer unix.Close(fd)
	names, err := readDirNames(fd)
	if err != nil {
		return err
	}
	for _, n := range names {
		if created[path.Join(dir, n)] {
			continue
		}
		if err := removeAt(fd, n); err != nil {
			return err
		}
	}
	return nil
}

// removeAt removes name in dirfd and everything under it, never following
// a symlink; a missing name is no error.
func removeAt(dirfd int, name string) error {
	err := unix.Unlinkat(dirfd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("image: remove %q: %w", name, err)
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("image: remove %q: %w", name, err)
	}
	// The worker may have kept a directory it cannot enter (0500 in the
	// image): give itself the right to empty it.
	_ = unix.Fchmod(fd, 0o700)
	names, err := readDirNames(fd)
	if err == nil {
		for _, n := range names {
			if err = removeAt(fd, n); err != nil {
				break
			}
		}
	}
	unix.Close(fd)
	if err != nil {
		return err
	}
	if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT {
		return fmt.Errorf("image: remove %q: %w", name, err)
	}
	return nil
}

// readDirNames lists a directory's entries (without . and ..).
func readDirNames(fd int) ([]string, error) {
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	if _, err := unix.Seek(dup, 0, 0); err != nil {
		unix.Close(dup)
		return nil, err
	}
	var names []string
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(dup, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			unix.Close(dup)
			return nil, err
		}
		if n <= 0 {
			break
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
	unix.Close(dup)
	return names, nil
}

// copyBufBytes is the applier's copy buffer, io.Copy's size: a bigger one
// would save few write(2)s, as the gzip reader hands out at most its
// 32 KiB window at a time.
const copyBufBytes = 32 << 10

// fdWriter writes to a descriptor; it has no ReadFrom, so io.CopyBuffer
// uses the applier's buffer.
type fdWriter int

func (w fdWriter) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := unix.Write(int(w), p[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		n += m
	}
	return n, nil
}
