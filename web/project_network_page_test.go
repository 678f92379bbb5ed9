package web_test

import (
	"net/http"
	"strings"
	"testing"
)

// The project page shows what its runs and its repair runs may reach (or
// that they have no network), and the dashboard's sparkline says what it
// draws, visibly and to a screen reader.
func TestProjectPageShowsNetworkListsAndSparklineLabel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	st, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("shop"))
	if st != http.StatusCreated {
		t.Fatalf("create: %d %v", st, p)
	}
	if st, out := b.api(t, b.owner.Token, "PATCH", "/api/private/projects/"+p["id"].(string), map[string]any{"network_allow": []string{"@npm", "registry.example.com:8443"}}); st != http.StatusOK {
		t.Fatalf("network: %d %v", st, out)
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	_, page := br.get("/projects/shop")
	net, _, _ := strings.Cut(page[strings.Index(page, `data-testid="project-network"`):], "</div>")
	repair, _, _ := strings.Cut(page[strings.Index(page, `data-testid="project-repair-network"`):], "</div>")
	if !strings.Contains(net, `data-testid="network-entry">@npm<`) || !strings.Contains(net, `>registry.example.com:8443<`) {
		t.Errorf("the project page lacks the runs' network list: %s", net)
	}
	if !strings.Contains(repair, `data-testid="network-none"`) {
		t.Errorf("the project page does not say repair runs have no network: %s", repair)
	}
	_, dash := br.get("/")
	if !strings.Contains(dash, `data-testid="sparkline-label"`) || !strings.Contains(dash, `aria-labelledby="spark-shop"`) || !strings.Contains(dash, `id="spark-shop"`) {
		t.Errorf("the dashboard's sparkline has no label:\n%s", dash)
	}
}
