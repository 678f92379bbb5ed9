package packaging

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestComposeFileShape holds docs/compose.yaml to the image: docker compose
// is not on this machine, so the file is read as YAML and its shape checked
// — anvil beside Postgres, started once Postgres is healthy, on the image's
// port, command and volume, with every secret required from .env.
func TestComposeFileShape(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Services map[string]struct {
			Image       string
			Command     []string
			DependsOn   map[string]struct{ Condition string } `yaml:"depends_on"`
			Environment map[string]string
			Ports       []string
			Volumes     []string
			Healthcheck struct{ Test []string }
			ReadOnly    bool `yaml:"read_only"`
			Tmpfs       []string
		}
		Volumes map[string]any
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("docs/compose.yaml: %v", err)
	}
	pg, ok := c.Services["postgres"]
	if !ok || !strings.HasPrefix(pg.Image, "postgres:") || len(pg.Healthcheck.Test) == 0 {
		t.Fatalf("postgres service: %+v", pg)
	}
	a, ok := c.Services["anvil"]
	if !ok {
		t.Fatal("no anvil service")
	}
	if a.DependsOn["postgres"].Condition != "service_healthy" {
		t.Errorf("anvil does not wait for a healthy postgres: %+v", a.DependsOn)
	}
	if strings.Join(a.Command, " ") != "serve --role web" {
		t.Errorf("command %v, want the image's web tier", a.Command)
	}
	if u := a.Environment["ANVIL_DATABASE_URL"]; !strings.Contains(u, "@postgres:5432/"+pg.Environment["POSTGRES_DB"]) ||
		!strings.Contains(u, "postgres://"+pg.Environment["POSTGRES_USER"]+":${POSTGRES_PASSWORD}@") {
		t.Errorf("ANVIL_DATABASE_URL %q does not lead to the postgres service", u)
	}
	if len(a.Ports) != 1 || !strings.HasSuffix(a.Ports[0], fmt.Sprintf(":%d", ImagePort)) {
		t.Errorf("ports %v, want the image's %d", a.Ports, ImagePort)
	}
	if len(a.Volumes) != 1 || !strings.HasSuffix(a.Volumes[0], ":/var/lib/anvil") {
		t.Errorf("volumes %v, want one at /var/lib/anvil", a.Volumes)
	} else if _, ok := c.Volumes[strings.Split(a.Volumes[0], ":")[0]]; !ok {
		t.Errorf("volume %s is not declared", a.Volumes[0])
	}
	if !a.ReadOnly || len(a.Tmpfs) == 0 {
		t.Errorf("anvil's root file system should be read-only with a /tmp: %v %v", a.ReadOnly, a.Tmpfs)
	}
	// Secrets come from .env and are required: no default password ships.
	for _, v := range []string{"POSTGRES_PASSWORD", "ANVIL_SECRET_KEY"} {
		if !regexp.MustCompile(`\$\{` + v + `:\?[^}]+\}`).Match(b) {
			t.Errorf("${%s:?…} missing: the secret must be required", v)
		}
	}
}
