package anviltest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"anvil/internal/anviltest"
)

func TestSyncBufferConcurrentWrites(t *testing.T) {
	t.Parallel()
	var b anviltest.SyncBuffer
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				_, _ = b.Write([]byte("x"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if n := len(b.String()); n != 800 {
		t.Fatalf("len = %d, want 800", n)
	}
}

func TestCallJSON(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/text" {
			_, _ = w.Write([]byte("plain"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"auth": r.Header.Get("Authorization"),
			"type": r.Header.Get("Content-Type"), "body": string(body)})
	}))
	t.Cleanup(srv.Close)

	status, out := anviltest.CallJSON(t, "tok", "POST", srv.URL+"/json", map[string]int{"a": 1})
	if status != 200 || out["auth"] != "Bearer tok" || out["type"] != "application/json" || out["body"] != `{"a":1}` {
		t.Fatalf("POST: %d %v", status, out)
	}
	if _, out := anviltest.CallJSON(t, "", "GET", srv.URL+"/json", nil); out["auth"] != "" || out["type"] != "" {
		t.Fatalf("GET without token or body sent headers: %v", out)
	}
	if out := anviltest.MustJSON(t, "", "PUT", srv.URL+"/json", "raw"); out["body"] != "raw" {
		t.Fatalf("a string body is sent as is: %v", out)
	}
	if _, out := anviltest.CallJSON(t, "", "GET", srv.URL+"/text", nil); out["_body"] != "plain" {
		t.Fatalf("a text answer is kept under _body: %v", out)
	}
}
