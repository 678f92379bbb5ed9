// Package static embeds the cockpit's built CSS, htmx, its SSE extension, an
// icon and a little JavaScript into the binary: no CDN, no files beside the binary.
package static

import (
	"embed"
	"net/http"
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

// Handler serves the embedded files with a cache lifetime that suits
// assets which change only with the binary.
func Handler() http.Handler {
	fs := http.FileServer(http.FS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		fs.ServeHTTP(w, r)
	})
}
