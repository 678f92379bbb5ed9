package static_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"anvil/static"
)

// Files are served; a directory — the root included — is the notFound
// handler's to answer, never a listing of the assets.
func TestHandlerServesFilesNeverListings(t *testing.T) {
	t.Parallel()
	h := http.StripPrefix("/static/", static.Handler(http.NotFoundHandler()))
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/static/app.css", http.StatusOK},
		{"/static/htmx.min.js", http.StatusOK},
		{"/static/", http.StatusNotFound},
		{"/static/.", http.StatusNotFound},
		{"/static/src/", http.StatusNotFound},
		{"/static/src", http.StatusNotFound},
		{"/static/index.html", http.StatusNotFound},
		{"/static/no-such.js", http.StatusNotFound},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		body, _ := io.ReadAll(rec.Result().Body)
		if rec.Code != tc.status {
			t.Errorf("GET %s = %d, want %d", tc.path, rec.Code, tc.status)
		}
		if strings.Contains(string(body), `href="app.css"`) || strings.Contains(string(body), "<pre>") {
			t.Errorf("GET %s lists the directory: %.200s", tc.path, body)
		}
	}
}
