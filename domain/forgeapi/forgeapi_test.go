package forgeapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"anvil/domain"
	"anvil/domain/forgeapi"
	"anvil/domain/forgestatus"
	"anvil/domain/repourl"
)

const sha = "0123456789abcdef0123456789abcdef01234567"

// recorder is an HTTP server that records the paths it is asked for and
// answers with answer (nil: a forge's documented success shapes).
type recorder struct {
	srv    *httptest.Server
	mu     sync.Mutex
	paths  []string
	answer func(w http.ResponseWriter, r *http.Request)
}

// newRecorder listens on addr ("127.0.0.1:0", "127.0.0.2:0").
func newRecorder(t *testing.T, addr string, answer func(w http.ResponseWriter, r *http.Request)) *recorder {
	t.Helper()
	rc := &recorder{answer: answer}
	rc.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rc.mu.Lock()
		rc.paths = append(rc.paths, r.Method+" "+r.URL.EscapedPath())
		rc.mu.Unlock()
		if rc.answer != nil {
			rc.answer(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.Method {
		case http.MethodGet:
			fmt.Fprintf(w, `{"name":"main","commit":{"sha":%q,"id":%q}}`, sha, sha)
		default:
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"id":1,"state":"pending","status":"pending","number":7,"iid":7,"html_url":"https://forge.example/pr/7","web_url":"https://forge.example/pr/7"}`)
		}
	}))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	rc.srv.Listener = l
	rc.srv.Start()
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *recorder) got() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.paths...)
}

// threeCalls makes the three calls anvil makes to a forge, each as its own
// path makes it: "run the latest commit" (forgestatus.LatestCommit), a
// commit status (forgestatus.Post, the Reporter's call) and a repair's pull
// request (forgeapi.OpenPullRequest, jobs.Repair's call). It returns their
// errors.
func threeCalls(hc *http.Client, f forgeapi.Forge) []error {
	ctx := context.Background()
	latest := forgestatus.LatestCommit(hc, nil)
	_, e1 := latest(ctx, &domain.Project{Provider: f.Provider, ProviderAPIURL: f.APIURL, ProviderRepo: f.Repo, DefaultBranch: "main"}, f.Token)
	e2 := forgestatus.Post(ctx, hc, f, forgestatus.Status{SHA: sha, State: "pending", Context: "anvil/app"}, time.Now())
	_, e3 := forgeapi.OpenPullRequest(ctx, hc, f, forgeapi.PullRequest{Head: "anvil/repair/x", Base: "main", Title: "t", Body: "b"})
	return []error{e1, e2, e3}
}

// allowLocal is the operator's ANVIL_CHECKOUT_ALLOW_LOCAL=true: the fake
// forges of these tests listen on loopback.
var allowLocal = repourl.Policy{AllowLocal: true}

// onlyDotTwoIsPublic narrows the private addresses so that 127.0.0.2 plays
// a public forge while 127.0.0.1 stays the server's private network.
var onlyDotTwoIsPublic = repourl.Policy{IsLocal: func(a netip.Addr) bool {
	return a != netip.MustParseAddr("127.0.0.2") && repourl.IsLocalAddr(a)
}}

// TestOnePrefixForEveryPath: provider_api_url means one thing for the three
// calls. GitHub's is the API root: an API served at the root of its host
// gets /repos/… from all three (go-github's WithEnterpriseURLs sent
// statuses and the latest commit to /api/v3/repos/… while pull requests
// went to /repos/…), one at /api/v3 gets /api/v3/repos/…; GitLab's and
// Gitea's are the instance.
func TestOnePrefixForEveryPath(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ provider, suffix, prefix string }{
		{"github", "", "/repos/acme/app/"},
		{"github", "/", "/repos/acme/app/"},
		{"github", "/api/v3", "/api/v3/repos/acme/app/"},
		{"github", "/ghe/api", "/ghe/api/repos/acme/app/"},
		{"gitlab", "", "/api/v4/projects/acme%2Fapp/"},
		{"gitlab", "/api/v4", "/api/v4/projects/acme%2Fapp/"},
		{"gitea", "", "/api/v1/repos/acme/app/"},
		{"gitea", "/", "/api/v1/repos/acme/app/"},
	} {
		t.Run(c.provider+c.suffix, func(t *testing.T) {
			t.Parallel()
			rc := newRecorder(t, "127.0.0.1:0", nil)
			f := forgeapi.Forge{Provider: c.provider, APIURL: rc.srv.URL + c.suffix, Repo: "acme/app", Token: "tok"}
			for i, err := range threeCalls(forgeapi.NewHTTPClient(allowLocal), f) {
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			got := rc.got()
			if len(got) != 3 {
				t.Fatalf("requests %q, want 3", got)
			}
			for _, r := range got {
				if _, path, _ := strings.Cut(r, " "); !strings.HasPrefix(path, c.prefix) {
					t.Errorf("%s: want every path under %s; all: %q", r, c.prefix, got)
				}
			}
		})
	}
}

// TestPrivateForgeNeverReached: with ANVIL_CHECKOUT_ALLOW_LOCAL off, an
// internal server on loopback is reached by none of the three calls —
// named directly, through a redirect from a public forge, or through
// HTTP_PROXY in the environment (the child process below).
func TestPrivateForgeNeverReached(t *testing.T) {
	t.Parallel()
	internal := newRecorder(t, "127.0.0.1:0", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"message":"internal-service-secret"}`)
	})
	check := func(t *testing.T, errs []error, want string) {
		t.Helper()
		for i, err := range errs {
			if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "internal-service-secret") {
				t.Errorf("call %d: %v, want an error naming %q", i, err, want)
			}
		}
		if got := internal.got(); len(got) != 0 {
			t.Fatalf("the internal server was reached: %q", got)
		}
	}
	for _, provider := range []string{"github", "gitlab", "gitea"} {
		t.Run("direct/"+provider, func(t *testing.T) {
			f := forgeapi.Forge{Provider: provider, APIURL: internal.srv.URL, Repo: "acme/app", Token: "tok"}
			errs := threeCalls(forgeapi.NewHTTPClient(repourl.Policy{}), f)
			for _, err := range errs {
				if !errors.Is(err, forgeapi.ErrPrivateForge) {
					t.Errorf("%v does not wrap ErrPrivateForge", err)
				}
			}
			check(t, errs, "private")
		})
		t.Run("redirect/"+provider, func(t *testing.T) {
			public := newRecorder(t, "127.0.0.2:0", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, internal.srv.URL+r.URL.Path, http.StatusTemporaryRedirect)
			})
			f := forgeapi.Forge{Provider: provider, APIURL: public.srv.URL, Repo: "acme/app", Token: "tok"}
			check(t, threeCalls(forgeapi.NewHTTPClient(onlyDotTwoIsPublic), f), "307")
			if len(public.got()) != 3 {
				t.Fatalf("the public forge saw %q", public.got())
			}
		})
	}
	t.Run("proxy", func(t *testing.T) {
		// Go reads the proxy variables once per process: the calls run in
		// a child with HTTP_PROXY and HTTPS_PROXY naming the internal
		// server, against a forge whose name does not resolve.
		cmd := exec.Command(os.Args[0], "-test.run=^TestProxyChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "FORGEAPI_PROXY_CHILD=1", "HTTP_PROXY="+internal.srv.URL, "HTTPS_PROXY="+internal.srv.URL,
			"http_proxy="+internal.srv.URL, "https_proxy="+internal.srv.URL, "NO_PROXY=", "no_proxy=")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "PASS") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		if got := internal.got(); len(got) != 0 {
			t.Fatalf("the internal server was reached through the proxy: %q", got)
		}
	})
}

// TestProxyChild is the proxy case's child (it does nothing on its own).
func TestProxyChild(t *testing.T) {
	if os.Getenv("FORGEAPI_PROXY_CHILD") == "" {
		t.Skip("run by TestPrivateForgeNeverReached")
	}
	for _, provider := range []string{"github", "gitlab", "gitea"} {
		f := forgeapi.Forge{Provider: provider, APIURL: "http://forge.anvil-test.invalid/api", Repo: "acme/app", Token: "tok"}
		for i, err := range threeCalls(forgeapi.NewHTTPClient(repourl.Policy{}), f) {
			if err == nil || !strings.Contains(err.Error(), "does not resolve") {
				t.Errorf("%s call %d: %v, want the forge's name unresolved (no proxy)", provider, i, err)
			}
		}
	}
}

// TestForgeBodyNeverEchoed: a forge's refusal is named by its status and
// GitHub's validation code; its message, its body and the token never
// reach an error's text, whatever shape the body has.
func TestForgeBodyNeverEchoed(t *testing.T) {
	t.Parallel()
	bodies := map[string]string{
		"json":  `{"message":"SECRET-from-the-forge","error":"SECRET-error","errors":[{"resource":"PullRequest","code":"already_exists","message":"SECRET-detail"}]}`,
		"text":  `SECRET-plain-text internal answer`,
		"code?": `{"message":"x","errors":[{"code":"SECRET_code_like_value"}]}`,
	}
	for name, body := range bodies {
		for _, provider := range []string{"github", "gitlab", "gitea"} {
			t.Run(name+"/"+provider, func(t *testing.T) {
				t.Parallel()
				rc := newRecorder(t, "127.0.0.1:0", func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusUnprocessableEntity)
					fmt.Fprint(w, body)
				})
				f := forgeapi.Forge{Provider: provider, APIURL: rc.srv.URL, Repo: "acme/app", Token: "tok-SECRET"}
				for i, err := range threeCalls(forgeapi.NewHTTPClient(allowLocal), f) {
					if err == nil || strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), "HTTP 422") {
						t.Errorf("call %d: %v", i, err)
					}
					// go-github reads no body on a branch's refusal (call 0).
					if provider == "github" && name == "json" && i > 0 && !strings.Contains(err.Error(), "(already_exists)") {
						t.Errorf("call %d: %v does not name GitHub's code", i, err)
					}
				}
			})
		}
	}
}

// TestWebURL: a pull request's address is kept only when it is https://, or
// http:// where private forges are allowed.
func TestWebURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		raw       string
		allowHTTP bool
		want      string
	}{
		{"https://github.com/acme/app/pull/7", false, "https://github.com/acme/app/pull/7"},
		{"http://gitea.lan/acme/app/pulls/7", false, ""},
		{"http://gitea.lan/acme/app/pulls/7", true, "http://gitea.lan/acme/app/pulls/7"},
		{"javascript:alert(1)", true, ""},
		{"data:text/html,<script>alert(1)</script>", true, ""},
		{"//evil.example/x", true, ""},
		{"/relative/pull/7", true, ""},
		{"https://user:pass@github.com/x", true, ""},
		{"https://github.com/a b", true, ""},
		{"ftp://forge.example/x", true, ""},
		{"", true, ""},
	} {
		if got := forgeapi.WebURL(c.raw, c.allowHTTP); got != c.want {
			t.Errorf("WebURL(%q, %v) = %q, want %q", c.raw, c.allowHTTP, got, c.want)
		}
	}
}

// fixedResolver answers every name with one address.
type fixedResolver string

func (r fixedResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr(string(r))}, nil
}

// TestCheckAPIURL: the save-time check refuses an address that is, or
// resolves to, a private one, unless local checkouts are allowed.
func TestCheckAPIURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	public, private := repourl.Policy{Resolver: fixedResolver("93.184.216.34")}, repourl.Policy{Resolver: fixedResolver("10.1.2.3")}
	for _, c := range []struct {
		policy repourl.Policy
		raw    string
		want   error
	}{
		{public, "https://ghe.example/api/v3", nil},
		{public, "http://127.0.0.1:8080/api/v3", repourl.ErrLocal},
		{public, "http://[::1]/", repourl.ErrLocal},
		{public, "http://169.254.169.254/latest", repourl.ErrLocal},
		{private, "https://gitea.internal.example", repourl.ErrLocal},
		{repourl.Policy{AllowLocal: true}, "http://127.0.0.1:3000", nil},
		{public, "", nil},
	} {
		err := forgeapi.CheckAPIURL(ctx, c.policy, c.raw)
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("CheckAPIURL(%q) = %v, want %v", c.raw, err, c.want)
		}
	}
}
