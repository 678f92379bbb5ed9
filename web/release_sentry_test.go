package web_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// sentryCLI is the real sentry-cli from node_modules (npm @sentry/cli);
// the test skips, saying so, where it is not installed.
func sentryCLI(t *testing.T) string {
	t.Helper()
	cli, _ := filepath.Abs("../node_modules/.bin/sentry-cli")
	if _, err := os.Stat(cli); err != nil {
		t.Skipf("sentry-cli is not installed (%v); `npm ci` installs it", err)
	}
	return cli
}

// runSentryCLI runs sentry-cli against the test's cockpit as a deploy
// script would, and returns its output and whether it succeeded.
func (b *testBundle) runSentryCLI(t *testing.T, cli string, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command(cli, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "SENTRY_URL="+b.srv.URL, "SENTRY_AUTH_TOKEN="+b.owner.Token, "SENTRY_ORG=acme", "SENTRY_PROJECT=shop",
		"SENTRY_LOAD_DOTENV=0", "SENTRY_DISABLE_UPDATE_CHECK=true", "SENTRY_NO_PROGRESS_BAR=1", "HOME="+cmd.Dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err == nil
}

// The real sentry-cli declares a release, ties it to a commit and deploys
// it (docs/releases.md, "sentry-cli"): `releases new`, `releases
// set-commits --commit <repo>@<sha>`, `deploys new`; the release of the
// deployed environment has the commit, and events from it are judged by it.
func TestSentryCLIReleases(t *testing.T) {
	t.Parallel()
	cli := sentryCLI(t)
	b := setup(t)
	p := validProject("shop")
	p["provider"], p["provider_repo"], p["provider_api_url"] = "github", "acme/shop", "https://api.github.com"
	status, out := b.api(t, b.owner.Token, "POST", "/api/private/projects", p)
	if status != 201 {
		t.Fatalf("project: %d %v", status, out)
	}
	pid := out["id"].(string)
	const version = "shop@2.4.0+build.7"
	const sha = "3f9c1e2d4b5a69788796a5b4c3d2e1f0a9b8c7d6"
	releases := func() map[string]map[string]any {
		t.Helper()
		_, out := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+pid+"/releases", nil)
		m := map[string]map[string]any{}
		for _, r := range out["releases"].([]any) {
			r := r.(map[string]any)
			m[r["version"].(string)+"|"+r["environment"].(string)] = r
		}
		return m
	}

	if out, ok := b.runSentryCLI(t, cli, "releases", "new", version); !ok || !strings.Contains(out, "Created release "+version) {
		t.Fatalf("releases new: %s", out)
	}
	if r := releases()[version+"|"]; r == nil || r["commit_sha"] != "" {
		t.Fatalf("after releases new: %v", releases())
	}
	if out, ok := b.runSentryCLI(t, cli, "releases", "set-commits", version, "--commit", "acme/shop@"+sha); !ok {
		t.Fatalf("set-commits: %s", out)
	}
	if r := releases()[version+"|"]; r == nil || r["commit_sha"] != sha || r["commit_from"] != "declared" {
		t.Fatalf("after set-commits: %v", releases())
	}
	if out, ok := b.runSentryCLI(t, cli, "deploys", "new", "-r", version, "-e", "production"); !ok || !strings.Contains(out, "'production'") {
		t.Fatalf("deploys new: %s", out)
	}
	r := releases()[version+"|production"]
	if r == nil || r["commit_sha"] != sha || r["deployed_at"] == nil {
		t.Fatalf("after deploys new: %v", releases())
	}

	// A repository no project has, and a commit that is not one: refused.
	if out, ok := b.runSentryCLI(t, cli, "releases", "set-commits", version, "--commit", "acme/elsewhere@"+sha); ok || !strings.Contains(out, "Unknown repo") {
		t.Fatalf("unknown repository: %v %s", ok, out)
	}
	if out, ok := b.runSentryCLI(t, cli, "releases", "set-commits", version, "--commit", "acme/shop@main"); ok {
		t.Fatalf("a branch name as the commit was accepted: %s", out)
	}
	if out, ok := b.runSentryCLI(t, cli, "deploys", "new", "-r", "shop@never", "-e", "production"); ok {
		t.Fatalf("a deploy of an unknown release was accepted: %s", out)
	}
	// Another organisation's slug in the path is a 404.
	status, _ = b.api(t, b.owner.Token, "POST", "/api/0/organizations/other/releases/", map[string]any{"version": "x", "projects": []string{"shop"}})
	if status != 404 {
		t.Fatalf("another organisation: %d", status)
	}
}
