package web_test

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/web"
)

// wantRoles is the specification of who may write what: the least role of
// every write route of the pages and the private API. A route the server
// has and this table lacks fails the test, so a new write route cannot slip
// in without a decision about its role.
var wantRoles = map[string]string{
	"POST /logout":                                 domain.RoleViewer,
	"POST /settings/tokens":                        domain.RoleViewer,
	"POST /settings/tokens/:tokenId/revoke":        domain.RoleViewer,
	"POST /settings/members/leave":                 domain.RoleViewer,
	"POST /settings/organization":                  domain.RoleViewer,
	"POST /settings/organizations":                 domain.RoleViewer,
	"POST /settings/account/name":                  domain.RoleViewer,
	"POST /settings/account/password":              domain.RoleViewer,
	"POST /settings/account/sessions/:id/end":      domain.RoleViewer,
	"POST /settings/account/sessions/end-others":   domain.RoleViewer,
	"POST /invite/:token/join":                     domain.RoleViewer,
	"POST /settings/alerts":                        domain.RoleAdmin,
	"POST /settings/alerts/:destinationId/test":    domain.RoleAdmin,
	"POST /settings/alerts/:destinationId/delete":  domain.RoleAdmin,
	"POST /settings/retention":                     domain.RoleAdmin,
	"POST /settings/retention/projects/:projectId": domain.RoleAdmin,
	"POST /projects/:projectId/delete":             domain.RoleAdmin,
	"POST /settings/organization/delete":           domain.RoleOwner,
	"POST /settings/images/clear":                  domain.RoleOwner,
	"POST /api/private/images/clear":               domain.RoleOwner,

	"POST /projects/:projectId/runs":                                                domain.RoleMember,
	"POST /runs/:runId/cancel":                                                      domain.RoleMember,
	"POST /incidents/:incidentId/decisions":                                         domain.RoleMember,
	"POST /inbox/bulk":                                                              domain.RoleMember,
	"POST /api/private/projects/:projectId/runs":                                    domain.RoleMember,
	"POST /api/private/runs/:runId/cancel":                                          domain.RoleMember,
	"POST /runs/:runId/rerun":                                                       domain.RoleMember,
	"POST /api/private/runs/:runId/rerun":                                           domain.RoleMember,
	"POST /api/private/incidents/:incidentId/decisions":                             domain.RoleMember,
	"POST /projects/:projectId/webhooks/:provider/deliveries/:deliveryId/redeliver": domain.RoleMember,
	"POST /api/private/projects/:projectId/webhooks/:provider/deliveries/:deliveryId/redeliver": domain.RoleMember,
	"POST /projects/:projectId/cache/clear":                                                     domain.RoleMember,
	"DELETE /api/private/projects/:projectId/cache":                                             domain.RoleMember,

	"POST /projects":                                                         domain.RoleAdmin,
	"POST /projects/:projectId/edit":                                         domain.RoleAdmin,
	"POST /projects/:projectId/webhooks/:provider":                           domain.RoleAdmin,
	"POST /projects/:projectId/webhooks/:provider/enabled":                   domain.RoleAdmin,
	"POST /projects/:projectId/webhooks/:provider/rotate":                    domain.RoleAdmin,
	"POST /projects/:projectId/webhooks/:provider/delete":                    domain.RoleAdmin,
	"POST /projects/:projectId/feed/connections":                             domain.RoleAdmin,
	"POST /projects/:projectId/feed/connections/:connectionId/revoke":        domain.RoleAdmin,
	"POST /projects/:projectId/feed/connections/:connectionId/origins":       domain.RoleAdmin,
	"POST /projects/:projectId/feed/bindings":                                domain.RoleAdmin,
	"POST /projects/:projectId/feed/bindings/delete":                         domain.RoleAdmin,
	"POST /projects/:projectId/feed/card":                                    domain.RoleAdmin,
	"POST /settings/members/:userId/role":                                    domain.RoleAdmin,
	"POST /settings/members/:userId/remove":                                  domain.RoleAdmin,
	"POST /settings/invitations":                                             domain.RoleAdmin,
	"POST /settings/invitations/:id/revoke":                                  domain.RoleAdmin,
	"POST /api/private/projects":                                             domain.RoleAdmin,
	"PATCH /api/private/projects/:projectId":                                 domain.RoleAdmin,
	"PUT /api/private/projects/:projectId/webhooks/:provider":                domain.RoleAdmin,
	"DELETE /api/private/projects/:projectId/webhooks/:provider":             domain.RoleAdmin,
	"POST /api/private/projects/:projectId/webhooks/:provider/rotate-secret": domain.RoleAdmin,
	"POST /api/private/projects/:projectId/connections":                      domain.RoleAdmin,
	"POST /api/private/projects/:projectId/sourcemaps":                       domain.RoleMember,
	"DELETE /api/private/connections/:connectionId":                          domain.RoleAdmin,
	"PATCH /api/private/projects/:projectId/connections/:connectionId":       domain.RoleAdmin,
	"PUT /api/private/projects/:projectId/bindings/:environment":             domain.RoleAdmin,
	"DELETE /api/private/projects/:projectId/bindings/:environment":          domain.RoleAdmin,
	"PUT /api/private/projects/:projectId/dashboard":                         domain.RoleAdmin,
	"PATCH /api/private/members/:userId":                                     domain.RoleAdmin,
	"DELETE /api/private/members/:userId":                                    domain.RoleAdmin,
	"POST /api/private/invitations":                                          domain.RoleAdmin,
	"DELETE /api/private/invitations/:id":                                    domain.RoleAdmin,
	"POST /api/private/alerts/destinations":                                  domain.RoleAdmin,
	"PATCH /api/private/alerts/destinations/:destinationId":                  domain.RoleAdmin,
	"DELETE /api/private/alerts/destinations/:destinationId":                 domain.RoleAdmin,
	"POST /api/private/alerts/destinations/:destinationId/test":              domain.RoleAdmin,
	"PUT /api/private/projects/:projectId/alert-rules":                       domain.RoleAdmin,
	"PUT /api/private/retention":                                             domain.RoleAdmin,
	"PUT /api/private/projects/:projectId/retention":                         domain.RoleAdmin,
	"DELETE /api/private/projects/:projectId":                                domain.RoleAdmin,
	"POST /api/private/projects/:projectId/releases":                         domain.RoleMember,
	"DELETE /api/private/orgs/:orgId":                                        domain.RoleOwner,
	"POST /projects/:projectId/secrets":                                      domain.RoleAdmin,
	"POST /projects/:projectId/secrets/:name/delete":                         domain.RoleAdmin,
	"PUT /api/private/projects/:projectId/secrets/:name":                     domain.RoleAdmin,
	"DELETE /api/private/projects/:projectId/secrets/:name":                  domain.RoleAdmin,
	// cron monitors (docs/monitors.md): pausing is a member's, the rest an admin's
	"POST /projects/:projectId/monitors":                              domain.RoleAdmin,
	"POST /projects/:projectId/monitors/:slug/pause":                  domain.RoleMember,
	"POST /projects/:projectId/monitors/:slug/rotate":                 domain.RoleAdmin,
	"POST /projects/:projectId/monitors/:slug/delete":                 domain.RoleAdmin,
	"POST /api/private/projects/:projectId/monitors":                  domain.RoleAdmin,
	"PATCH /api/private/projects/:projectId/monitors/:slug":           domain.RoleMember,
	"DELETE /api/private/projects/:projectId/monitors/:slug":          domain.RoleAdmin,
	"POST /api/private/projects/:projectId/monitors/:slug/ping-key":   domain.RoleAdmin,
	"DELETE /api/private/projects/:projectId/monitors/:slug/ping-key": domain.RoleAdmin,
	// the loop from the pages (docs/releases.md): a fix recorded by hand, a
	// release declared, an incident's events mapped again — a member's
	"POST /incidents/:incidentId/fix":               domain.RoleMember,
	"POST /api/private/incidents/:incidentId/fix":   domain.RoleMember,
	"POST /projects/:projectId/releases":            domain.RoleMember,
	"POST /incidents/:incidentId/reprocess":         domain.RoleMember,
	"POST /projects/:projectId/monitors/:slug/edit": domain.RoleMember,
}

// publicWrites are write routes outside the pages and the private API: they
// authenticate otherwise (login, invitation and reset links, webhook
// signatures, connection and dashboard tokens, the Sentry door's keys).
var publicWrites = map[string]bool{
	"POST /login": true, "POST /invite/:token": true, "POST /reset/:token": true,
}

func isPublicWrite(key string) bool {
	path := key[strings.Index(key, " ")+1:]
	return publicWrites[key] || strings.HasPrefix(path, "/api/public/") || strings.HasPrefix(path, "/api/feed") ||
		strings.HasPrefix(path, "/api/:number/") || path == "/api/:number/envelope" || path == "/api/:number/store" ||
		strings.HasPrefix(path, "/api/ingest/") || strings.HasPrefix(path, "/static/") ||
		strings.HasPrefix(path, "/api/monitors/") || // the ping URLs: the ping key in the path
		strings.HasPrefix(path, "/api/otlp") || // the OpenTelemetry door: a server connection's token
		// Sentry's web API for sentry-cli: the organisation in the path and
		// the role are the domain's checks (TestSourceMapUploadRefusals).
		strings.HasPrefix(path, "/api/0/")
}

var rank = map[string]int{domain.RoleViewer: 1, domain.RoleMember: 2, domain.RoleAdmin: 3, domain.RoleOwner: 4}

// fill puts fresh ids (or plausible values) into a route's parameters:
// an allowed role then meets a 404 or a validation error, never a 403.
func fill(path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		switch {
		case p == ":provider":
			parts[i] = "github"
		case p == ":environment":
			parts[i] = "production"
		case p == ":token":
			parts[i] = "anv_inv_nonsense"
		case p == ":id" && strings.Contains(path, "/sessions/"):
			parts[i] = "0000"
		case strings.HasPrefix(p, ":"):
			parts[i] = uuid.NewString()
		}
	}
	return strings.Join(parts, "/")
}

func TestEveryWriteRouteChecksTheRole(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	// Every write route the server has is in the table, and the server's own
	// table agrees with it.
	e := web.New(web.Deps{DB: b.db, Services: b.services, Keys: b.keys, Options: testOptions(), Done: make(chan struct{})})
	var routes []string
	seen := map[string]bool{}
	for _, r := range e.Routes() {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions, "echo_route_not_found":
			continue
		}
		if r.Path == "" || strings.HasSuffix(r.Path, "/*") {
			continue
		}
		key := r.Method + " " + r.Path
		if isPublicWrite(key) || seen[key] {
			continue
		}
		seen[key] = true
		if _, ok := wantRoles[key]; !ok {
			t.Errorf("write route %s has no expected role in wantRoles", key)
			continue
		}
		if got := web.RouteRoles()[key]; got != wantRoles[key] {
			t.Errorf("%s: the server requires %q, the specification %q", key, got, wantRoles[key])
		}
		routes = append(routes, key)
	}
	for key := range wantRoles {
		if !seen[key] {
			t.Errorf("wantRoles lists %s, which the server does not have", key)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	// Routes that end the caller's membership or session run last.
	last := map[string]int{"POST /settings/members/leave": 1, "POST /logout": 2}
	sort.SliceStable(routes, func(i, j int) bool { return last[routes[i]] < last[routes[j]] })

	for _, role := range []string{domain.RoleViewer, domain.RoleMember, domain.RoleAdmin, domain.RoleOwner} {
		email := role + "@acme.test"
		if role == domain.RoleOwner {
			email = "owner2@acme.test"
		}
		if _, err := b.accounts.AddMember(ctx, ownerPrincipal(t, b), email, testPassword, role); err != nil {
			t.Fatal(err)
		}
		_, p, err := b.accounts.Login(ctx, email, testPassword)
		if err != nil {
			t.Fatal(err)
		}
		token, err := b.accounts.CreateToken(ctx, p, "roles")
		if err != nil {
			t.Fatal(err)
		}
		br := b.browser(t)
		br.login(email, testPassword)
		csrf := br.csrf("/settings")
		for _, key := range routes {
			method, path, _ := strings.Cut(key, " ")
			allowed := rank[role] >= rank[wantRoles[key]]
			target := fill(path)
			if strings.HasPrefix(path, "/api/private/") {
				status, body := b.api(t, token, method, target, map[string]any{})
				switch {
				case !allowed && (status != http.StatusForbidden || body["error"] != "forbidden"):
					t.Errorf("%s as %s: %d %v, want 403 forbidden", key, role, status, body)
				case allowed && status == http.StatusForbidden:
					t.Errorf("%s as %s: refused: %v", key, role, body)
				}
				continue
			}
			res, body := br.post(target, url.Values{"_csrf": {csrf}})
			switch {
			case !allowed && (res.StatusCode != http.StatusForbidden || !strings.Contains(body, "this needs the "+wantRoles[key]+" role")):
				t.Errorf("%s as %s: %d, want 403 with a clear message; body %.300s", key, role, res.StatusCode, body)
			case allowed && res.StatusCode == http.StatusForbidden:
				t.Errorf("%s as %s: refused: %.300s", key, role, body)
			}
		}
	}
}

func ownerPrincipal(t *testing.T, b *testBundle) *domain.Principal {
	t.Helper()
	p, err := b.accounts.Authenticate(context.Background(), b.owner.Token)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
