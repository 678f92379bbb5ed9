// Package static embeds the cockpit's built CSS, htmx, its SSE extension, an
// icon and a little JavaScript into the binary: no CDN, no files beside the binary.
package static

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed app.css app.js htmx.min.js sse.min.js
var files embed.FS

//go:embed favicon.svg
var favicon []byte

// Favicon serves the icon at /favicon.ico, where browsers look for it
// unasked; it is an SVG, and says so.
func Favicon() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/svg+xml")
		w.Header().Set("Cache-Control", "public, max-age=86400")
		_, _ = w.Write(favicon)
	})
}

// IsFile reports whether name (a path below /static/, without the prefix)
// is one of the embedded files. A directory is not: http.FileServer would
// answer it with a listing of the assets, which nobody needs to read.
func IsFile(name string) bool {
	name = strings.TrimPrefix(name, "/")
	if !fs.ValidPath(name) || name == "." {
		return false
	}
	st, err := fs.Stat(files, name)
	return err == nil && st.Mode().IsRegular()
}

// Handler serves the embedded files — files only, never a directory
// listing: anything but a file is notFound's to answer — with a cache
// lifetime that suits assets which change only with the binary.
func Handler(notFound http.Handler) http.Handler {
	fsrv := http.FileServer(http.FS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !IsFile(r.URL.Path) {
			notFound.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=3600")
		fsrv.ServeHTTP(w, r)
	})
}
