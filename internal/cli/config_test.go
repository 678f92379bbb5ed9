package cli

import (
	"os"
	"strings"
	"testing"
)

func TestParseBytes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"512MiB": 512 << 20, "1073741824": 1 << 30, "2G": 2 << 30, "64 KiB": 64 << 10, "3M": 3 << 20} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "lots", "-1", "1.5G", "MiB", "99999999999999999999"} {
		if got, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) = %d, want an error", in, got)
		}
	}
	cfg, err := loadConfig(func(k string) string { return map[string]string{"ANVIL_CHECKOUT_ALLOW_LOCAL": "true"}[k] })
	if err != nil || !cfg.CheckoutAllowLocal || cfg.SandboxTmpMax != 512<<20 || cfg.AlertsAllowPrivate {
		t.Fatalf("defaults: %+v, %v", cfg, err)
	}
	cfg, err = loadConfig(func(k string) string { return map[string]string{"ANVIL_ALERTS_ALLOW_PRIVATE": "true"}[k] })
	if err != nil || !cfg.AlertsAllowPrivate {
		t.Fatalf("ANVIL_ALERTS_ALLOW_PRIVATE=true: %+v, %v", cfg, err)
	}
}

func TestRetentionShare(t *testing.T) {
	t.Parallel()
	env := func(v string) func(string) string {
		return func(k string) string { return map[string]string{"ANVIL_RETENTION_SHARE": v}[k] }
	}
	if cfg, err := loadConfig(env("")); err != nil || cfg.RetentionShare != 0.15 {
		t.Fatalf("default: %v, %v", cfg.RetentionShare, err)
	}
	if cfg, err := loadConfig(env("0.5")); err != nil || cfg.RetentionShare != 0.5 {
		t.Fatalf("0.5: %v, %v", cfg.RetentionShare, err)
	}
	for _, bad := range []string{"0", "1.5", "lots", "-0.2", "NaN"} {
		if _, err := loadConfig(env(bad)); err == nil {
			t.Errorf("ANVIL_RETENTION_SHARE=%s: accepted", bad)
		}
	}
}

func TestRunsAllowPrivate(t *testing.T) {
	t.Parallel()
	env := func(v string) func(string) string {
		return func(k string) string { return map[string]string{"ANVIL_RUNS_ALLOW_PRIVATE": v}[k] }
	}
	if cfg, err := loadConfig(env("")); err != nil || cfg.RunsAllowPrivate {
		t.Fatalf("default: %v, %v", cfg.RunsAllowPrivate, err)
	}
	if cfg, err := loadConfig(env("true")); err != nil || !cfg.RunsAllowPrivate {
		t.Fatalf("true: %v, %v", cfg.RunsAllowPrivate, err)
	}
	if _, err := loadConfig(env("sometimes")); err == nil || !strings.Contains(err.Error(), "ANVIL_RUNS_ALLOW_PRIVATE must be true or false") {
		t.Fatalf("sometimes: %v", err)
	}
}

func TestRunCacheMB(t *testing.T) {
	t.Parallel()
	env := func(v string) func(string) string {
		return func(k string) string { return map[string]string{"ANVIL_RUN_CACHE_MB": v}[k] }
	}
	if cfg, err := loadConfig(env("")); err != nil || cfg.RunCacheMB != 2048 {
		t.Fatalf("default: %v, %v", cfg.RunCacheMB, err)
	}
	for v, want := range map[string]int{"0": 0, "512": 512, "1048576": 1 << 20} {
		if cfg, err := loadConfig(env(v)); err != nil || cfg.RunCacheMB != want {
			t.Fatalf("%s: %v, %v", v, cfg.RunCacheMB, err)
		}
	}
	for _, bad := range []string{"-1", "1048577", "2GiB", "lots"} {
		if _, err := loadConfig(env(bad)); err == nil || !strings.Contains(err.Error(), "ANVIL_RUN_CACHE_MB must be a whole number between 0 and 1048576") {
			t.Errorf("ANVIL_RUN_CACHE_MB=%s: %v", bad, err)
		}
	}
}

// The runs' caches live under the data folder: ANVIL_DATA_DIR, else the
// work folder the operator chose, else the user's data folder — never the
// system's temporary folder.
func TestDataDir(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", "/home/someone/.local/share")
	for _, tc := range []struct{ data, work, want string }{
		{"/srv/anvil", "", "/srv/anvil"},
		{"/srv/anvil", "/var/lib/anvil/work", "/srv/anvil"},
		{"", "/var/lib/anvil/work", "/var/lib/anvil/work"},
		{"", "", "/home/someone/.local/share/anvil"},
	} {
		env := map[string]string{"ANVIL_DATA_DIR": tc.data, "ANVIL_WORK_DIR": tc.work}
		cfg, err := loadConfig(func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.validate(false); err != nil && !strings.Contains(err.Error(), "DATABASE") {
			t.Fatal(err)
		}
		if cfg.DataDir != tc.want || strings.HasPrefix(cfg.DataDir, os.TempDir()) {
			t.Errorf("data %q work %q: %q, want %q", tc.data, tc.work, cfg.DataDir, tc.want)
		}
	}
}
