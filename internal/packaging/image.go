package packaging

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: a fixed, unprivileged id, so that a platform's
// runAsNonRoot can verify it without reading /etc/passwd.
const (
	ImageUID  = 10001
	imageUser = "anvil"
	// ImagePort is where the image's web tier listens.
	ImagePort = 8080
)

// What the image's base copies from the build machine's Debian packages
// (ca-certificates and tzdata): no registry is pulled.
const (
	hostCerts    = "/etc/ssl/certs/ca-certificates.crt"
	hostZoneinfo = "/usr/share/zoneinfo"
)

// file is one entry of a layer.
type file struct {
	name     string // without a leading slash
	mode     int64  // permission bits (and sticky)
	uid      int
	dir      bool
	linkname string // a symbolic link when set
	data     []byte
}

// layerOf is a reproducible layer: entries sorted by name, every time t,
// numeric owners only.
func layerOf(files []file, t time.Time) (v1.Layer, error) {
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.uid, ModTime: t, Format: tar.FormatPAX}
		switch {
		case f.dir:
			h.Typeflag, h.Name = tar.TypeDir, f.name+"/"
		case f.linkname != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, f.linkname
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(9))
}

// dirs adds the parent folders of every entry (root-owned, 0755) that the
// entries do not name themselves.
func dirs(files []file) []file {
	have := map[string]bool{}
	for _, f := range files {
		if f.dir {
			have[f.name] = true
		}
	}
	out := files
	for _, f := range files {
		for d := filepath.Dir(f.name); d != "." && !have[d]; d = filepath.Dir(d) {
			have[d] = true
			out = append(out, file{name: d, mode: 0o755, dir: true})
		}
	}
	return out
}

// baseFiles is the minimal system: CA certificates, time zones, the
// anvil user, name resolution's order, /tmp and the state folder.
func baseFiles() ([]file, error) {
	certs, err := os.ReadFile(hostCerts)
	if err != nil {
		return nil, fmt.Errorf("image base: %w (install ca-certificates)", err)
	}
	files := []file{
		{name: strings.TrimPrefix(hostCerts, "/"), mode: 0o644, data: certs},
		{name: "etc/passwd", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:anvil:/var/lib/anvil:/sbin/nologin\n", imageUser, ImageUID, ImageUID)},
		{name: "etc/group", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:\n%s:x:%d:\n", imageUser, ImageUID)},
		// Go's resolver reads it: the hosts file first, then DNS.
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "tmp", mode: 0o1777, dir: true},
		{name: "var/lib/anvil", mode: 0o750, uid: ImageUID, dir: true},
	}
	err = filepath.WalkDir(hostZoneinfo, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "/")
		switch {
		case d.IsDir():
			files = append(files, file{name: name, mode: 0o755, dir: true})
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			files = append(files, file{name: name, mode: 0o777, linkname: target})
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files = append(files, file{name: name, mode: 0o644, data: b})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("image base: %w (install tzdata)", err)
	}
	return dirs(files), nil
}

// basePackages names the Debian packages the base was copied from, with
// their versions, for the image's labels ("" where dpkg cannot say).
func basePackages() string {
	out, err := exec.Command("dpkg-query", "-W", "-f", "${Package}=${Version} ", "ca-certificates", "tzdata").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// Image builds the web tier's image from the static binary — a base layer
// (see baseFiles) and a layer with /usr/bin/anvil — and writes it as an
// OCI image layout in a tarball at out (`skopeo inspect oci-archive:OUT`
// reads it). Every timestamp is the commit's, so one commit gives one
// digest, which it returns (the manifest's).
func Image(binary, out, goarch string, info Info) (v1.Hash, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return v1.Hash{}, err
	}
	base, err := baseFiles()
	if err != nil {
		return v1.Hash{}, err
	}
	baseLayer, err := layerOf(base, info.Time)
	if err != nil {
		return v1.Hash{}, err
	}
	appLayer, err := layerOf(dirs([]file{{name: "usr/bin/anvil", mode: 0o755, data: bin}}), info.Time)
	if err != nil {
		return v1.Hash{}, err
	}
	created := v1.Time{Time: info.Time}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: baseLayer, History: v1.History{Created: created, CreatedBy: "anvil: CA certificates, time zones, the anvil user (" + basePackages() + ")"}},
		mutate.Addendum{Layer: appLayer, History: v1.History{Created: created, CreatedBy: "anvil: /usr/bin/anvil " + info.Version}})
	if err != nil {
		return v1.Hash{}, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return v1.Hash{}, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", goarch, created
	labels := map[string]string{
		"org.opencontainers.image.title":       "anvil",
		"org.opencontainers.image.description": "anvil's web tier: a self-hostable cockpit for software teams",
		"org.opencontainers.image.version":     info.Version,
		"org.opencontainers.image.revision":    info.Commit,
		"org.opencontainers.image.created":     info.Time.Format(time.RFC3339),
	}
	if p := basePackages(); p != "" {
		labels["dev.anvil.base.packages"] = p
	}
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", ImageUID, ImageUID),
		Entrypoint: []string{"/usr/bin/anvil"},
		// The web tier: the workers need bubblewrap, git and a build
		// toolchain, which this image does not carry (docs/install.md).
		Cmd:          []string{"serve", "--role", "web"},
		Env:          []string{"PATH=/usr/bin:/bin", fmt.Sprintf("ANVIL_ADDR=0.0.0.0:%d", ImagePort), "ANVIL_WORK_DIR=/var/lib/anvil/work", "TZ=UTC"},
		ExposedPorts: map[string]struct{}{fmt.Sprintf("%d/tcp", ImagePort): {}},
		Volumes:      map[string]struct{}{"/var/lib/anvil": {}},
		WorkingDir:   "/var/lib/anvil",
		StopSignal:   "SIGTERM",
		Labels:       labels,
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return v1.Hash{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, err
	}

	dir, err := os.MkdirTemp(filepath.Dir(out), ".anvil-oci-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": info.Tag()})); err != nil {
		return v1.Hash{}, err
	}
	if err := tarDir(dir, out, info.Time); err != nil {
		return v1.Hash{}, err
	}
	return digest, nil
}

// tarDir writes the folder dir as a tarball at out, reproducibly (sorted,
// time t, root-owned).
func tarDir(dir, out string, t time.Time) error {
	var files []file
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			files = append(files, file{name: rel, mode: 0o755, dir: true})
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, file{name: rel, mode: 0o644, data: b})
		return nil
	})
	if err != nil {
		return err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	f, err := os.Create(out + ".tmp")
	if err != nil {
		return err
	}
	defer os.Remove(out + ".tmp")
	tw := tar.NewWriter(f)
	for _, e := range files {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: t, Typeflag: tar.TypeReg, Size: int64(len(e.data)), Format: tar.FormatPAX}
		if e.dir {
			h.Name, h.Typeflag, h.Size = e.name+"/", tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			f.Close()
			return err
		}
		if !e.dir {
			if _, err := tw.Write(e.data); err != nil {
				f.Close()
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(out+".tmp", out)
}
