package web

import "testing"

func TestSafeNext(t *testing.T) {
	t.Parallel()
	for next, want := range map[string]string{
		"/projects/x?y=1":       "/projects/x?y=1",
		"/runs/abc#log":         "/runs/abc#log",
		"/":                     "/",
		"":                      "/",
		"/\t/evil.example":      "/",
		"/\n/evil.example":      "/",
		"/\r/evil.example":      "/",
		"/x\x00y":               "/",
		"/x\x7fy":               "/",
		"//evil":                "/",
		"///evil":               "/",
		"/\\evil":               "/",
		"/x\\y":                 "/",
		"\\/evil":               "/",
		"https://evil":          "/",
		"http:/evil":            "/",
		"javascript:alert(1)":   "/",
		"%2F%2Fevil":            "/",
		"/%2F%2Fevil":           "/",
		"evil.example/projects": "/",
		" /projects":            "/",
		"/projects\u2028/x":     "/projects\u2028/x", // not a control character; stays a path
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}
