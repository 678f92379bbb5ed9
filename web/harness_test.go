package web_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/riverqueue/river"

	"anvil/db"
	"anvil/db/testdb"
	"anvil/domain"
	"anvil/domain/account"
	"anvil/domain/feed"
	"anvil/domain/project"
	"anvil/domain/repourl"
	"anvil/domain/run"
	"anvil/domain/secret"
	"anvil/domain/webhook"
	"anvil/domain/wiring"
	"anvil/internal/anviltest"
	"anvil/web"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// testBundle is a real cockpit on its own database.
type testBundle struct {
	srv      *httptest.Server
	db       *db.DB
	services *wiring.Services
	store    *domain.Store
	accounts *account.Accounts
	projects *project.Projects
	queue    *run.Queue
	webhooks *webhook.Webhooks
	feed     *feed.Feed
	logs     *run.Logs
	hub      *domain.Hub
	keys     *secret.Keyring
	owner    account.BootstrapResult // org "acme", owner@acme.test
	password string
	river    *river.Client[*sql.Tx]
}

const testPassword = "correct horse battery"

func setup(t *testing.T) *testBundle { return setupWith(t, testOptions()) }

// setupWith is setup with other web options (not armed, other proxies).
func setupWith(t testing.TB, opts web.Options) *testBundle {
	t.Helper()
	return setupFull(t, opts, testDomainOptions())
}

// publicResolver answers every host name with one public address: tests
// never leave the machine, yet their repository hosts pass the checkout
// policy.
type publicResolver struct{}

func (publicResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
}

// testDomainOptions: the strict checkout policy over publicResolver, and a
// prober under which only repositories whose address contains "missing" do
// not answer.
func testDomainOptions() wiring.Options {
	return wiring.Options{CheckoutPolicy: repourl.Policy{Resolver: publicResolver{}},
		ProbeRepo: func(_ context.Context, repoURL, _ string) error {
			if strings.Contains(repoURL, "missing") {
				return errors.New("fatal: repository '" + repoURL + "' not found")
			}
			return nil
		}}
}

// setupFull is setup with other web and domain options.
func setupFull(t testing.TB, opts web.Options, dopts wiring.Options) *testBundle {
	t.Helper()
	d := testdb.New(t)
	keys, err := secret.NewKeyring(make32(1), nil)
	if err != nil {
		t.Fatal(err)
	}
	if dopts.PublicURL == "" {
		dopts.PublicURL = opts.PublicURL // the links in alerts, as serve does
	}
	sv := wiring.NewServices(d, keys, nil, dopts)
	// Counts are read right after ingests: fold before answering (the
	// folds' own tests: domain/feed/deltas_test.go, web/feed_fold_test.go).
	sv.Feed.SyncFold = true
	client, err := sv.Start(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sv.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	b := &testBundle{db: d, services: sv, store: sv.Store, accounts: sv.Accounts, projects: sv.Projects, queue: sv.Queue,
		webhooks: sv.Webhooks, feed: sv.Feed, logs: sv.Logs, hub: sv.Hub, keys: keys, password: testPassword, river: client}
	hubCtx, stopHub := context.WithCancel(context.Background())
	go b.hub.Run(hubCtx)
	t.Cleanup(stopHub)
	done := make(chan struct{})
	b.srv = httptest.NewServer(web.New(web.Deps{DB: d, Services: sv, Keys: keys, Options: opts, Done: done}))
	t.Cleanup(func() { close(done); b.srv.Close() })
	b.owner, err = b.accounts.Bootstrap(context.Background(), "acme", "owner@acme.test", testPassword)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func make32(seed byte) []byte {
	k := make([]byte, 32)
	for i := range k {
		k[i] = seed + byte(i)
	}
	return k
}

// api calls the private API with a bearer token.
func (b *testBundle) api(t testing.TB, token, method, path string, body any) (int, map[string]any) {
	t.Helper()
	return anviltest.CallJSON(t, token, method, b.srv.URL+path, body)
}

// do sends req and returns the status and the decoded answer.
var do = anviltest.Do

// browser is a cookie-keeping client that does not follow redirects.
type browser struct {
	t    *testing.T
	c    *http.Client
	base string
}

func (b *testBundle) browser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: b.srv.URL, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

var csrfRE = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

func (br *browser) get(path string) (*http.Response, string) {
	br.t.Helper()
	res, err := br.c.Get(br.base + path)
	if err != nil {
		br.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res, string(raw)
}

func (br *browser) post(path string, form url.Values) (*http.Response, string) {
	br.t.Helper()
	res, err := br.c.PostForm(br.base+path, form)
	if err != nil {
		br.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res, string(raw)
}

// htmx posts form as htmx does (HX-Request, the CSRF token in
// X-CSRF-Token) and returns the status and the body.
func (br *browser) htmx(path, csrf string, form url.Values) (int, string) {
	br.t.Helper()
	req, _ := http.NewRequest("POST", br.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("HX-Request", "true")
	req.Header.Set("X-CSRF-Token", csrf)
	res, err := br.c.Do(req)
	if err != nil {
		br.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(raw)
}

// csrf reads the CSRF token from a page.
func (br *browser) csrf(path string) string {
	br.t.Helper()
	_, body := br.get(path)
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		br.t.Fatalf("no CSRF token on %s", path)
	}
	return m[1]
}

func (br *browser) login(email, password string) {
	br.t.Helper()
	tok := br.csrf("/login")
	res, body := br.post("/login", url.Values{"_csrf": {tok}, "email": {email}, "password": {password}})
	if res.StatusCode != http.StatusSeeOther {
		br.t.Fatalf("login: status %d: %s", res.StatusCode, body)
	}
}

var regexpToken = regexp.MustCompile(`anv_pat_[0-9A-Za-z]{32}`)

// testOptions arms the feed with the documented default limits.
func testOptions() web.Options {
	return web.Options{PublicURL: "http://anvil.test", FeedArmed: true, FeedMaxBody: 262144, FeedMaxBatch: 50,
		FeedRatePerMin: 600, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
}
