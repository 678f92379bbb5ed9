// Package anviltest holds the helpers every test package needs alike: a
// buffer a process writes while the test reads it, and a call of anvil's
// JSON API. It imports nothing of anvil, so any package's tests (and the
// bench command) may use it.
package anviltest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// SyncBuffer is an io.Writer that a process (or a goroutine) may write
// while the test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// NewRequest builds a call of the JSON API: body is sent as is when it is a
// string and JSON-encoded otherwise (with Content-Type: application/json),
// and token, when not empty, as the bearer token.
func NewRequest(t testing.TB, method, url, token string, body any) *http.Request {
	t.Helper()
	var r io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(v)
	default:
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s %s: encode body: %v", method, url, err)
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// Do sends req with c and returns the status and the answer: the decoded
// JSON object when the answer is JSON (malformed JSON fails the test),
// otherwise {"_body": the text}.
func Do(t testing.TB, c *http.Client, req *http.Request) (int, map[string]any) {
	t.Helper()
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read answer: %v", req.Method, req.URL.Path, err)
	}
	out := map[string]any{}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: bad JSON %q", req.Method, req.URL.Path, raw)
		}
	} else {
		out["_body"] = string(raw)
	}
	return res.StatusCode, out
}

// CallJSON calls the JSON API with the default client (see NewRequest and
// Do).
func CallJSON(t testing.TB, token, method, url string, body any) (int, map[string]any) {
	t.Helper()
	return Do(t, http.DefaultClient, NewRequest(t, method, url, token, body))
}

// MustJSON is CallJSON for calls that must succeed: a status of 300 or
// more fails the test.
func MustJSON(t testing.TB, token, method, url string, body any) map[string]any {
	t.Helper()
	status, out := CallJSON(t, token, method, url, body)
	if status >= 300 {
		t.Fatalf("%s %s: %d %v", method, url, status, out)
	}
	return out
}

// WebhookFixtures is shared/fixtures/webhooks in the nearest parent
// directory that has it (the main checkout's ../shared, a worktree's or a
// CI clone's further up); where none has it the test skips, saying so.
// The captures are read in place, never copied into the project.
func WebhookFixtures(t testing.TB) string {
	t.Helper()
	dir, _ := filepath.Abs(".")
	for {
		p := filepath.Join(dir, "shared", "fixtures", "webhooks")
		if _, err := os.Stat(filepath.Join(p, "SOURCES.txt")); err == nil {
			return p
		} else if !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		if filepath.Dir(dir) == dir {
			t.Skip("webhook fixtures (shared/fixtures/webhooks) not present in any parent directory; skipping")
		}
		dir = filepath.Dir(dir)
	}
}
