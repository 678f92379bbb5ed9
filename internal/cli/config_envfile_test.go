package cli

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"anvil/internal/envfile"
)

// packagedEnv is the environment file the .deb installs as
// /etc/anvil/anvil.env (internal/packaging/deb).
const packagedEnv = "../packaging/deb/anvil.env"

// TestPackagedEnvFileListsEveryVariable holds the packaged environment file
// to Config: every variable loadConfig reads is in it exactly once — set by
// the package, or commented out with its true default (or empty where there
// is none) — and it names no variable anvil does not read. A new ANVIL_*
// variable fails here until the file documents it.
func TestPackagedEnvFileListsEveryVariable(t *testing.T) {
	t.Parallel()
	var read []string
	if _, err := loadConfig(func(k string) string { read = append(read, k); return "" }); err != nil {
		t.Fatalf("defaults do not load: %v", err)
	}
	set, err := envfile.Read(packagedEnv)
	if err != nil {
		t.Fatal(err)
	}
	// The commented-out settings: "#ANVIL_X=default".
	commented, err := envfile.Parse(strings.NewReader(uncomment(t, packagedEnv)))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, v := range append(slices.Clone(set), commented...) {
		seen[v.Key]++
	}
	for _, k := range read {
		if seen[k] != 1 {
			t.Errorf("%s: in %s %d times, want once (set, or commented out with its default)", k, packagedEnv, seen[k])
		}
	}
	for k := range seen {
		if !slices.Contains(read, k) {
			t.Errorf("%s names %s, which anvil does not read", packagedEnv, k)
		}
	}

	// Each default written down is the default: setting it changes nothing.
	base := map[string]string{"ANVIL_DATABASE_URL": "postgres://anvil@127.0.0.1/anvil", "ANVIL_SECRET_KEY": testKey}
	load := func(extra map[string]string) *Config {
		t.Helper()
		cfg, err := loadConfig(func(k string) string {
			if v, ok := extra[k]; ok {
				return v
			}
			return base[k]
		})
		if err != nil {
			t.Fatalf("%v: %v", extra, err)
		}
		if err := cfg.validate(true); err != nil {
			t.Fatalf("%v: %v", extra, err)
		}
		// "" and "bwrap" choose the same executor (sandbox.New).
		if cfg.Sandbox == "" {
			cfg.Sandbox = "bwrap"
		}
		return cfg
	}
	want := load(nil)
	for _, v := range commented {
		if v.Value == "" {
			continue
		}
		if got := load(map[string]string{v.Key: v.Value}); !reflect.DeepEqual(got, want) {
			t.Errorf("%s line %d: #%s=%s is not the default", packagedEnv, v.Line, v.Key, v.Value)
		}
	}
}

// uncomment returns the file's commented-out assignments ("#ANVIL_…=") as
// assignments, every other line blank (so line numbers still match).
func uncomment(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if rest, ok := strings.CutPrefix(l, "#ANVIL_"); ok && strings.Contains(rest, "=") {
			lines[i] = "ANVIL_" + rest
		} else {
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}
