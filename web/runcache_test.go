package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"anvil/domain"
)

// The project page's Cache card shows the cache's size and bound and, to
// members, a Clear button; clearing (the form with its CSRF token, or the
// API) is audited and starts the next generation; a viewer cannot clear,
// and a clear without the token changes nothing.
func TestCacheCardAndClear(t *testing.T) {
	t.Parallel()
	opts := testOptions()
	opts.RunCacheMaxBytes = 2048 << 20
	b := setupWith(t, opts)
	id := b.newProject(t, "cached", "main")

	viewerTok, viewer := b.person(t, domain.RoleViewer)
	_, vbody := viewer.get("/projects/cached")
	if !strings.Contains(vbody, `data-testid="project-cache"`) || !strings.Contains(vbody, "0 B</span> of 2.0 GiB") ||
		strings.Contains(vbody, `data-testid="cache-clear"`) {
		t.Fatalf("a viewer's card:\n%s", vbody)
	}
	if st, _ := b.api(t, viewerTok, "DELETE", "/api/private/projects/"+id+"/cache", nil); st != http.StatusForbidden {
		t.Fatalf("a viewer cleared: %d", st)
	}

	memberTok, member := b.person(t, domain.RoleMember)
	_, body := member.get("/projects/cached")
	if !strings.Contains(body, `data-testid="cache-clear"`) || !strings.Contains(body, "not written since it was last cleared") {
		t.Fatalf("a member's card:\n%s", body)
	}
	if res, _ := member.post("/projects/cached/cache/clear", url.Values{}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("a clear without the CSRF token: %d", res.StatusCode)
	}
	if n := b.countAudit(t, domain.AuditRunCacheCleared); n != 0 {
		t.Fatalf("%d audit entries after a refused clear", n)
	}
	res, _ := member.post("/projects/cached/cache/clear", url.Values{"_csrf": {member.csrf("/projects/cached")}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/projects/cached" {
		t.Fatalf("clear: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	_, body = member.get("/projects/cached")
	if !strings.Contains(body, "Cache cleared") || !strings.Contains(body, `data-testid="cache-cleared"`) {
		t.Fatalf("after the clear:\n%s", body)
	}

	st, got := b.api(t, memberTok, "DELETE", "/api/private/projects/"+id+"/cache", nil)
	if st != http.StatusAccepted || got["generation"] != float64(2) || got["bytes"] != float64(0) {
		t.Fatalf("API clear: %d %v", st, got)
	}
	st, got = b.api(t, viewerTok, "GET", "/api/private/projects/"+id+"/cache", nil)
	if st != http.StatusOK || got["generation"] != float64(2) || got["max_bytes"] != float64(2048<<20) || got["cleared_at"] == nil {
		t.Fatalf("API status: %d %v", st, got)
	}
	if n := b.countAudit(t, domain.AuditRunCacheCleared); n != 2 {
		t.Fatalf("%d audit entries", n)
	}
	if n := b.count(t, "river_job", "kind = 'clear_run_cache'"); n != 2 {
		t.Fatalf("%d clear jobs", n)
	}
	if st, _ := b.api(t, memberTok, "GET", "/api/private/projects/00000000-0000-0000-0000-000000000000/cache", nil); st != http.StatusNotFound {
		t.Fatalf("an unknown project: %d", st)
	}
}

// An anvil whose operator turned caches off says so, with no button.
func TestCacheCardWhenCachesAreOff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.newProject(t, "plain", "main")
	_, br := b.person(t, domain.RoleMember)
	_, body := br.get("/projects/plain")
	if !strings.Contains(body, `data-testid="cache-off"`) || strings.Contains(body, `data-testid="cache-clear"`) {
		t.Fatalf("card:\n%s", body)
	}
}
