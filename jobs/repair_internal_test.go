package jobs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"anvil/domain"
	"anvil/domain/repourl"
	"anvil/jobs/jobstest"
)

// fixedResolver answers every name with one address.
type fixedResolver string

func (r fixedResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr(string(r))}, nil
}

// dotTwoIsPublic narrows the private addresses so that 127.0.0.2 plays a
// public host while the rest of loopback stays private.
func dotTwoIsPublic(a netip.Addr) bool {
	return a != netip.MustParseAddr("127.0.0.2") && repourl.IsLocalAddr(a)
}

// workTree is the work tree jobstest.GitRepo made beside its bare
// repository (it holds the objects of repo.Head, as a repair's workspace
// holds its checkout's).
func workTree(repo jobstest.Repo) string {
	return filepath.Join(filepath.Dir(strings.TrimPrefix(repo.URL, "file://")), "work")
}

// A repair's push over ssh is pinned to the address the checkout policy
// checked, as the checkout is: ssh dials the checked address (HostName)
// and looks the host key up under the name (HostKeyAlias); a name that
// resolves to a private address is refused before git runs.
func TestRepairPushOverSSHIsPinned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := jobstest.GitRepo(t)
	work := workTree(repo)
	public := repourl.Policy{Resolver: fixedResolver("93.184.216.34")}
	pinned := "GIT_SSH_COMMAND=ssh -o BatchMode=yes -o HostName=93.184.216.34 -o HostKeyAlias=git.example"
	for _, c := range []struct {
		url    string
		policy repourl.Policy
		want   string
	}{
		{"ssh://git@git.example/acme/shop.git", public, pinned},
		{"git@git.example:acme/shop.git", public, pinned},
		{"ssh://git@93.184.216.34:2222/acme/shop.git", public, "GIT_SSH_COMMAND=ssh -o BatchMode=yes"},
		{"ssh://git@git.example/acme/shop.git", repourl.Policy{AllowLocal: true}, "GIT_SSH_COMMAND=ssh -o BatchMode=yes"},
	} {
		g, err := newHostGit(ctx, work, repo.Head, c.url, "", c.policy)
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		if !slices.Contains(g.env, c.want) {
			t.Errorf("%s: env %q lacks %q", c.url, g.env, c.want)
		}
		g.close()
	}
	if _, err := newHostGit(ctx, work, repo.Head, "ssh://git@git.example/acme/shop.git", "",
		repourl.Policy{Resolver: fixedResolver("10.0.0.7")}); !errors.Is(err, repourl.ErrLocal) {
		t.Fatalf("a name resolving to a private address: %v", err)
	}

	// git's own ssh reaches the checked address: a name no DNS knows,
	// checked as 127.0.0.2, is dialled there (before the pin, ssh looked
	// the name up again and never connected).
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	banner := make(chan string, 1)
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprint(conn, "SSH-2.0-anvil-test\r\n")
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, _ := bufio.NewReader(conn).ReadString('\n')
		banner <- line
	}()
	port := l.Addr().(*net.TCPAddr).Port
	policy := repourl.Policy{Resolver: fixedResolver("127.0.0.2"), IsLocal: dotTwoIsPublic}
	url := fmt.Sprintf("ssh://git@git.anvil-test.invalid:%d/acme/shop.git", port)
	g, err := newHostGit(ctx, work, repo.Head, url, "", policy)
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := g.run(pctx, "push", "-q", "--", url, "HEAD:refs/heads/anvil/repair/x"); err == nil {
		t.Fatal("a push to a fake ssh server succeeded")
	}
	select {
	case line := <-banner:
		if !strings.HasPrefix(line, "SSH-2.0-") {
			t.Fatalf("the pinned address got %q, not ssh's banner", line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ssh never dialled the checked address")
	}
}

// The pull request's address a forge answers is kept only when it is
// https://, or http:// where private forges are allowed; a refusal's
// body never reaches the error the incident shows.
func TestRepairPullRequestAddress(t *testing.T) {
	t.Parallel()
	var answer func(w http.ResponseWriter)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		answer(w)
	}))
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	proj := &domain.Project{Provider: "github", ProviderAPIURL: srv.URL, ProviderRepo: "acme/shop", DefaultBranch: "main"}
	strict := &Repair{Policy: repourl.Policy{IsLocal: dotTwoIsPublic}}
	allowLocal := &Repair{Policy: repourl.Policy{AllowLocal: true}}
	for _, c := range []struct {
		r          *Repair
		html, want string
	}{
		{strict, "https://forge.example/acme/shop/pull/7", "https://forge.example/acme/shop/pull/7"},
		{strict, "http://forge.example/acme/shop/pull/7", ""},
		{allowLocal, "http://forge.example/acme/shop/pull/7", "http://forge.example/acme/shop/pull/7"},
		{allowLocal, "javascript:alert(document.cookie)", ""},
		{strict, "data:text/html,<script>alert(1)</script>", ""},
		{strict, "//evil.example/pull/7", ""},
	} {
		answer = func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"number":7,"html_url":%q}`, c.html)
		}
		got, err := c.r.openPR(context.Background(), proj, "ghp_tok", "anvil/repair/x", "t", "b")
		if err != nil || got != c.want {
			t.Errorf("%q (allow local %v): %q, %v; want %q", c.html, c.r.Policy.AllowLocal, got, err, c.want)
		}
	}
	answer = func(w http.ResponseWriter) {
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprint(w, `{"message":"SECRET body","errors":[{"code":"custom","message":"SECRET detail ghp_tok"}]}`)
	}
	_, err = strict.openPR(context.Background(), proj, "ghp_tok", "anvil/repair/x", "t", "b")
	if err == nil || strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "ghp_tok") || !strings.Contains(err.Error(), "HTTP 422") {
		t.Fatalf("refusal: %v", err)
	}
}
