package web_test

import (
	"anvil/domain"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestSecurityHeadersOnEveryResponse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, path := range []string{"/login", "/", "/healthz", "/api/private/projects", "/no/such/page", "/static/app.css"} {
		res, err := http.Get(b.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		h := res.Header
		if h.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") || h.Get("Referrer-Policy") == "" {
			t.Errorf("%s: security headers missing: %v", path, h)
		}
		if h.Get("X-Request-Id") == "" {
			t.Errorf("%s: no request id", path)
		}
	}
}

func TestUnknownPathsAreCleanNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	res, body := br.get("/definitely/not/here")
	if res.StatusCode != http.StatusNotFound || !strings.Contains(body, `data-testid="error-page"`) || !strings.Contains(body, "Page not found") {
		t.Fatalf("page 404: %d", res.StatusCode)
	}
	status, out := b.api(t, b.owner.Token, "GET", "/api/private/nothing", nil)
	if status != http.StatusNotFound || out["error"] != "not_found" {
		t.Fatalf("api 404: %d %v", status, out)
	}
}

func TestHealthReadyMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for path, want := range map[string]string{"/healthz": `"ok"`, "/readyz": `"ready"`} {
		res, err := http.Get(b.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(raw), want) {
			t.Fatalf("%s: %d %s", path, res.StatusCode, raw)
		}
	}
	_, _ = http.Get(b.srv.URL + "/login")
	if _, err := b.river.Insert(context.Background(), domain.PurgeSessionsArgs{}, nil); err != nil {
		t.Fatal(err)
	}
	res, err := http.Get(b.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{"go_goroutines", `anvil_http_requests_total{method="GET",route="/login",status="200"}`, "anvil_http_request_duration_seconds_bucket", `anvil_river_jobs{kind="purge_sessions",state="available"} 1`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestStaticAssetsAreServedFromTheBinary(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, f := range []string{"htmx.min.js", "sse.min.js", "app.css", "app.js"} {
		res, err := http.Get(b.srv.URL + "/static/" + f)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("%s: %d", f, res.StatusCode)
		}
	}
	_, body := b.browser(t).get("/login")
	if strings.Contains(body, "https://") {
		t.Fatal("the login page loads something from another origin")
	}
}
