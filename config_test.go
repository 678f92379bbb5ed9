package main

import (
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
