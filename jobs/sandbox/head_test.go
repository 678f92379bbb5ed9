package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadHead holds readHead to the two shapes of a fresh checkout and to
// refusing everything else — above all anything that leads outside the
// checkout, which belongs to the sandbox user while the reader may be root.
func TestReadHead(t *testing.T) {
	t.Parallel()
	const sha = "0123456789abcdef0123456789abcdef01234567"
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte(sha+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "HEAD"), []byte(sha+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	type file struct{ name, content, symlink string }
	for _, tc := range []struct {
		name  string
		files []file
		want  string // "" when readHead must answer ok=false
	}{
		{"symbolic", []file{{name: "HEAD", content: "ref: refs/heads/main\n"}, {name: "refs/heads/main", content: sha + "\n"}}, sha},
		{"nested branch", []file{{name: "HEAD", content: "ref: refs/heads/fix/a\n"}, {name: "refs/heads/fix/a", content: sha + "\n"}}, sha},
		{"detached", []file{{name: "HEAD", content: strings.ToUpper(sha) + "\n"}}, sha},
		{"sha256", []file{{name: "HEAD", content: sha + sha[:24] + "\n"}}, sha + sha[:24]},
		{"packed ref", []file{{name: "HEAD", content: "ref: refs/heads/main\n"}, {name: "packed-refs", content: sha + " refs/heads/main\n"}}, ""},
		{"not a branch", []file{{name: "HEAD", content: "ref: refs/remotes/origin/main\n"}, {name: "refs/remotes/origin/main", content: sha + "\n"}}, ""},
		{"escaping ref", []file{{name: "HEAD", content: "ref: refs/heads/../../../" + outside[1:] + "/secret\n"}}, ""},
		{"short id", []file{{name: "HEAD", content: sha[:12] + "\n"}}, ""},
		{"garbage", []file{{name: "HEAD", content: "ref: refs/heads/main\n"}, {name: "refs/heads/main", content: "ref: refs/heads/other\n"}}, ""},
		{"HEAD symlink out", []file{{name: "HEAD", symlink: secret}}, ""},
		{"ref symlink out", []file{{name: "HEAD", content: "ref: refs/heads/main\n"}, {name: "refs/heads/main", symlink: secret}}, ""},
		{"refs symlink out", []file{{name: "HEAD", content: "ref: refs/heads/main\n"}, {name: "refs/heads", symlink: outside}}, ""},
		{"no HEAD", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for _, f := range append([]file{{name: "config", content: "[core]\n"}}, tc.files...) {
				p := filepath.Join(dir, ".git", f.name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				var err error
				if f.symlink != "" {
					err = os.Symlink(f.symlink, p)
				} else {
					err = os.WriteFile(p, []byte(f.content), 0o644)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			got, ok := readHead(dir)
			if tc.want == "" && ok || tc.want != "" && (!ok || got != tc.want) {
				t.Fatalf("readHead = %q, %v; want %q", got, ok, tc.want)
			}
		})
	}

	t.Run("git a symlink out", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		if err := os.Symlink(outside, filepath.Join(dir, ".git")); err != nil {
			t.Fatal(err)
		}
		if got, ok := readHead(dir); ok {
			t.Fatalf("readHead followed .git out of the checkout: %q", got)
		}
	})

	t.Run("fifo", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, ".git"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(filepath.Join(dir, ".git", "HEAD"), 0o644); err != nil {
			t.Fatal(err)
		}
		done := make(chan bool, 1)
		go func() { _, ok := readHead(dir); done <- ok }()
		select {
		case ok := <-done:
			if ok {
				t.Fatal("readHead read a FIFO")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("readHead blocked on a FIFO")
		}
	})
}
