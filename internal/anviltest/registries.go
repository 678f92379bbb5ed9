package anviltest

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Stand-ins for the package registries a run's tools talk to: they speak
// the registries' documented protocols over plain HTTP from a local port,
// so that the real npm and go commands install from them in tests (and in
// the bench) where the real registries cannot be reached. A run reaches
// them through its network list like any registry (docs/network.md).

// NPMPackage is a package an [NPMRegistry] serves: its tarball holds
// package/package.json and Files (under package/).
type NPMPackage struct {
	Name, Version string
	Files         map[string]string
}

// NPMRegistry is an npm registry stand-in: GET /<name> answers the
// package's packument (abbreviated or whole, the same document), GET
// /<name>/-/<name>-<version>.tgz its tarball. Tarball links in packuments
// use the Host the request named, so the registry works under any name.
type NPMRegistry struct {
	*httptest.Server
	// Port is the port it listens on (127.0.0.1).
	Port     int
	pkgs     []NPMPackage
	tarballs map[string][]byte // by file name
	requests atomic.Int64
	mu       sync.Mutex
	paths    []string
}

// NewNPMRegistry builds the packages' tarballs and serves them until the
// test ends.
func NewNPMRegistry(t testing.TB, pkgs ...NPMPackage) *NPMRegistry {
	t.Helper()
	r := &NPMRegistry{pkgs: pkgs, tarballs: map[string][]byte{}}
	for _, p := range pkgs {
		r.tarballs[tarballName(p)] = npmTarball(t, p)
	}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	r.Port = r.Listener.Addr().(*net.TCPAddr).Port
	return r
}

func tarballName(p NPMPackage) string { return p.Name + "-" + p.Version + ".tgz" }

// Requests is how many requests the registry answered.
func (r *NPMRegistry) Requests() int64 { return r.requests.Load() }

// Paths lists the paths requested, in order.
func (r *NPMRegistry) Paths() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.paths...)
}

func (r *NPMRegistry) serve(w http.ResponseWriter, req *http.Request) {
	r.requests.Add(1)
	r.mu.Lock()
	r.paths = append(r.paths, req.URL.Path)
	r.mu.Unlock()
	path := strings.TrimPrefix(req.URL.Path, "/")
	if name, file, ok := strings.Cut(path, "/-/"); ok {
		body, found := r.tarballs[file]
		if !found || !strings.HasPrefix(file, name+"-") {
			http.NotFound(w, req)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		_, _ = w.Write(body)
		return
	}
	versions := map[string]any{}
	latest := ""
	for _, p := range r.pkgs {
		if p.Name != path {
			continue
		}
		body := r.tarballs[tarballName(p)]
		versions[p.Version] = map[string]any{"name": p.Name, "version": p.Version,
			"dist": map[string]any{"tarball": "http://" + req.Host + "/" + p.Name + "/-/" + tarballName(p),
				"integrity": integrity(body), "shasum": shasum(body)}}
		latest = p.Version
	}
	if latest == "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"Not found"}`))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"name": path, "dist-tags": map[string]string{"latest": latest}, "versions": versions})
}

// Project returns the package.json and package-lock.json (lockfile v3) of
// a project that depends on every package of the registry at its version,
// each resolved to base (the registry's address as the run names it, such
// as http://registry.test:4873), with the tarballs' integrity.
func (r *NPMRegistry) Project(base string) (packageJSON, lockfile string) {
	deps := map[string]string{}
	pkgs := map[string]any{}
	for _, p := range r.pkgs {
		deps[p.Name] = p.Version
		pkgs["node_modules/"+p.Name] = map[string]any{"version": p.Version,
			"resolved": strings.TrimSuffix(base, "/") + "/" + p.Name + "/-/" + tarballName(p), "integrity": integrity(r.tarballs[tarballName(p)])}
	}
	pkgs[""] = map[string]any{"name": "app", "version": "1.0.0", "dependencies": deps}
	pj, _ := json.MarshalIndent(map[string]any{"name": "app", "version": "1.0.0", "private": true, "dependencies": deps}, "", "  ")
	lock, _ := json.MarshalIndent(map[string]any{"name": "app", "version": "1.0.0", "lockfileVersion": 3, "requires": true, "packages": pkgs}, "", "  ")
	return string(pj) + "\n", string(lock) + "\n"
}

func integrity(b []byte) string {
	sum := sha512.Sum512(b)
	return "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
}

func shasum(b []byte) string {
	sum := sha1.Sum(b)
	return hex.EncodeToString(sum[:])
}

// npmTarball is the package as npm packs it: a gzipped tar under package/.
func npmTarball(t testing.TB, p NPMPackage) []byte {
	t.Helper()
	files := map[string]string{"package.json": fmt.Sprintf(`{"name":%q,"version":%q,"main":"index.js"}`, p.Name, p.Version)}
	for k, v := range p.Files {
		files[k] = v
	}
	names := make([]string, 0, len(files))
	for k := range files {
		names = append(names, k)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, n := range names {
		body := []byte(files[n])
		if err := tw.WriteHeader(&tar.Header{Name: "package/" + n, Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(499162500, 0), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// GoModule is a module version a [GoProxy] serves; Files are its files
// besides go.mod (which names Path).
type GoModule struct {
	Path, Version string
	Files         map[string]string
}

// GoProxy is a Go module proxy stand-in speaking the GOPROXY protocol
// (go help goproxy): /<module>/@v/list, @v/<version>.info, .mod, .zip and
// /@latest, for module paths in lower case.
type GoProxy struct {
	*httptest.Server
	// Port is the port it listens on (127.0.0.1).
	Port     int
	mods     []GoModule
	zips     map[string][]byte
	requests atomic.Int64
}

// NewGoProxy builds the modules' zips and serves them until the test ends.
func NewGoProxy(t testing.TB, mods ...GoModule) *GoProxy {
	t.Helper()
	g := &GoProxy{mods: mods, zips: map[string][]byte{}}
	for _, m := range mods {
		g.zips[m.Path+"@"+m.Version] = goZip(t, m)
	}
	g.Server = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(g.Close)
	g.Port = g.Listener.Addr().(*net.TCPAddr).Port
	return g
}

// Requests is how many requests the proxy answered.
func (g *GoProxy) Requests() int64 { return g.requests.Load() }

func (g *GoProxy) serve(w http.ResponseWriter, r *http.Request) {
	g.requests.Add(1)
	path := strings.TrimPrefix(r.URL.Path, "/")
	mod, rest, ok := strings.Cut(path, "/@")
	if !ok {
		http.NotFound(w, r)
		return
	}
	var versions []GoModule
	for _, m := range g.mods {
		if m.Path == mod {
			versions = append(versions, m)
		}
	}
	if len(versions) == 0 {
		http.Error(w, "not found: unknown module "+mod, http.StatusNotFound)
		return
	}
	info := func(m GoModule) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"Version": m.Version, "Time": "2026-01-02T03:04:05Z"})
	}
	if rest == "latest" {
		info(versions[len(versions)-1])
		return
	}
	file, ok := strings.CutPrefix(rest, "v/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	if file == "list" {
		for _, m := range versions {
			fmt.Fprintln(w, m.Version)
		}
		return
	}
	for _, m := range versions {
		switch file {
		case m.Version + ".info":
			info(m)
			return
		case m.Version + ".mod":
			fmt.Fprintf(w, "module %s\n\ngo 1.21\n", m.Path)
			return
		case m.Version + ".zip":
			w.Header().Set("Content-Type", "application/zip")
			_, _ = w.Write(g.zips[m.Path+"@"+m.Version])
			return
		}
	}
	http.Error(w, "not found: unknown version", http.StatusNotFound)
}

// goZip is a module zip as the go command expects it: every file under
// <module>@<version>/.
func goZip(t testing.TB, m GoModule) []byte {
	t.Helper()
	files := map[string]string{"go.mod": fmt.Sprintf("module %s\n\ngo 1.21\n", m.Path)}
	for k, v := range m.Files {
		files[k] = v
	}
	names := make([]string, 0, len(files))
	for k := range files {
		names = append(names, k)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range names {
		f, err := zw.Create(m.Path + "@" + m.Version + "/" + n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(files[n])); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
