package sandbox

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProbeDoesNotWaitForAnOrphan: a bwrap that fails and leaves a child
// holding its output open — as bwrap does when a unit's system-call filter
// refuses capset(2) after it forked the sandbox's init — makes the probe
// fail with bwrap's message, not wait for the child. Without a WaitDelay
// the probe waited for ever, and a worker starting under systemd stayed
// "activating" for its unit's whole start timeout.
func TestProbeDoesNotWaitForAnOrphan(t *testing.T) {
	t.Parallel()
	// As root the probe runs bwrap as the sandbox uid: it must reach the
	// script (t.TempDir's parent is private).
	dir, err := os.MkdirTemp("", "anvil-probe-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(dir, "bwrap")
	script := "#!/bin/sh\nsleep 600 &\necho \"orphan $!\" >&2\necho 'bwrap: capset failed: Operation not permitted' >&2\nexit 1\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- probeBwrapArgs(fake, []string{"--", "/bin/true"}) }()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the probe is still waiting for the orphan's output a minute later")
	}
	if m := regexp.MustCompile(`orphan (\d+)`).FindStringSubmatch(errString(err)); m != nil {
		if pid, _ := strconv.Atoi(m[1]); pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if err == nil || !strings.Contains(err.Error(), "capset failed") {
		t.Fatalf("probe error %v, want bwrap's message", err)
	}
	if strings.Contains(err.Error(), "process") {
		t.Errorf("the error points at the unsandboxed mode: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
