// Package imagetest builds images and serves them from a real OCI registry
// on loopback, for the tests of images (docs/images.md, "Tests"): nothing
// is downloaded; the images are made here from Debian's static busybox
// and from files the tests write.
package imagetest

import (
	"archive/tar"
	"bytes"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"sort"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Busybox is Debian's static busybox (package busybox-static).
const Busybox = "/bin/busybox"

// Applets are the busybox commands a test image links.
var Applets = []string{"sh", "ls", "cat", "echo", "env", "true", "false", "test", "sleep", "wget", "nc",
	"touch", "mkdir", "id", "pwd", "grep", "head", "tail", "rm", "printf", "hostname", "kill", "ps", "seq", "wc", "which"}

// Entry is one file of a layer.
type Entry struct {
	Name     string
	Type     byte // tar.TypeReg when 0
	Body     string
	Size     int64 // for a header that lies, or a body of zeros when Body is ""
	Mode     int64
	Linkname string
}

// Epoch is the modification time of every entry (reproducible images).
var Epoch = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

// Tar writes entries as a tar stream.
func Tar(t testing.TB, entries ...Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.Name, Typeflag: e.Type, Mode: e.Mode, Linkname: e.Linkname, ModTime: Epoch, Format: tar.FormatPAX}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if h.Typeflag == tar.TypeDir {
				h.Mode = 0o755
			}
		}
		var body io.Reader
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.Body))
			body = bytes.NewReader([]byte(e.Body))
			if e.Body == "" && e.Size > 0 {
				h.Size = e.Size
				body = io.LimitReader(zeros{}, e.Size)
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if body != nil {
			if _, err := io.Copy(tw, body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// Layer makes a gzip layer of entries.
func Layer(t testing.TB, entries ...Entry) v1.Layer {
	t.Helper()
	b := Tar(t, entries...)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// BusyboxEntries are /bin/busybox and its applets' symlinks, plus extra.
func BusyboxEntries(t testing.TB) []Entry {
	t.Helper()
	bb, err := os.ReadFile(Busybox)
	if err != nil {
		t.Skipf("Debian's busybox-static is needed: %v", err)
	}
	es := []Entry{{Name: "bin/", Type: tar.TypeDir}, {Name: "bin/busybox", Body: string(bb), Mode: 0o755},
		{Name: "etc/", Type: tar.TypeDir}, {Name: "etc/passwd", Body: "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n"}}
	for _, a := range Applets {
		es = append(es, Entry{Name: path.Join("bin", a), Type: tar.TypeSymlink, Linkname: "busybox"})
	}
	return es
}

// Image builds a linux/amd64 image of layers with env.
func Image(t testing.TB, env []string, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Env = env
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// BusyboxImage builds the busybox image with one more layer of files.
func BusyboxImage(t testing.TB, files ...Entry) v1.Image {
	t.Helper()
	ls := []v1.Layer{Layer(t, BusyboxEntries(t)...)}
	if len(files) > 0 {
		ls = append(ls, Layer(t, files...))
	}
	return Image(t, []string{"PATH=/bin:/usr/bin", "IMAGE_SAYS=hello"}, ls...)
}

// Registry is a real registry on 127.0.0.2 (a loopback address the
// network list accepts: 127.0.0.1 is the sandbox's own).
type Registry struct {
	Addr string // 127.0.0.2:port
	srv  *httptest.Server
	auth authn.Authenticator
}

// NewRegistry starts a registry for the test.
func NewRegistry(t testing.TB) *Registry { return NewPrivateRegistry(t, "", "") }

// NewPrivateRegistry starts a registry that answers only requests with
// user:pass (HTTP Basic), when user is set.
func NewPrivateRegistry(t testing.TB, user, pass string) *Registry {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	h := http.Handler(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	r := &Registry{auth: authn.Anonymous}
	if user != "" {
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if u, p, ok := req.BasicAuth(); !ok || u != user || p != pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			inner.ServeHTTP(w, req)
		})
		r.auth = &authn.Basic{Username: user, Password: pass}
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	r.Addr, r.srv = ln.Addr().String(), srv
	return r
}

// Push writes img as repo:tag and returns the reference.
func (r *Registry) Push(t testing.TB, repoTag string, img v1.Image) string {
	t.Helper()
	ref, err := name.ParseReference(r.Addr+"/"+repoTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithAuth(r.auth)); err != nil {
		t.Fatal(err)
	}
	return ref.String()
}

// PushIndex writes an index of images (each with its platform) as
// repo:tag.
func (r *Registry) PushIndex(t testing.TB, repoTag string, imgs map[string]v1.Image) string {
	t.Helper()
	var adds []mutate.IndexAddendum
	keys := make([]string, 0, len(imgs))
	for k := range imgs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, arch := range keys {
		adds = append(adds, mutate.IndexAddendum{Add: imgs[arch], Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	idx := mutate.AppendManifests(empty.Index, adds...)
	ref, err := name.ParseReference(r.Addr+"/"+repoTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx, remote.WithAuth(r.auth)); err != nil {
		t.Fatal(err)
	}
	return ref.String()
}

// PostgresRoot is a Debian bookworm root with PostgreSQL 15 (mmdebstrap,
// about a minute), cached between test runs in ~/.cache/anvil; the test
// is skipped when it is neither cached nor can be made.
func PostgresRoot(t testing.TB) string {
	t.Helper()
	home, _ := os.UserHomeDir()
	path := home + "/.cache/anvil/pg15-image.tar"
	if _, err := os.Stat(path); err == nil {
		return path
	}
	mm, err := exec.LookPath("mmdebstrap")
	if err != nil || os.Getenv("ANVIL_TEST_BUILD_ROOTS") == "" {
		t.Skipf("no cached %s (set ANVIL_TEST_BUILD_ROOTS=1 to build it with mmdebstrap, about a minute)", path)
	}
	_ = os.MkdirAll(home+"/.cache/anvil", 0o755)
	out, err := exec.Command(mm, "--variant=apt", "--mode=root", "--format=tar", "--include=postgresql-15", "bookworm", path+".part").CombinedOutput()
	if err != nil {
		t.Skipf("mmdebstrap: %v: %s", err, out)
	}
	if err := os.Rename(path+".part", path); err != nil {
		t.Fatal(err)
	}
	return path
}

// RootImage is an image of one layer made of a root's tar file.
func RootImage(t testing.TB, tarPath string, env []string) v1.Image {
	t.Helper()
	l, err := tarball.LayerFromFile(tarPath, tarball.WithCompressionLevel(1))
	if err != nil {
		t.Fatal(err)
	}
	return Image(t, env, l)
}
