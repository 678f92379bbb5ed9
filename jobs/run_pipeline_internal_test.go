package jobs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadPipeline: the file is read from the checkout's own files only —
// a symlink (to a host file, or a symlinked .anvil) is refused, never
// followed — and within its bound.
func TestReadPipeline(t *testing.T) {
	t.Parallel()
	ws := func(t *testing.T, files map[string]string) string {
		t.Helper()
		dir := t.TempDir()
		for name, body := range files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	if got, err := readPipeline(ws(t, map[string]string{"README": "x"})); got != nil || err != nil {
		t.Fatalf("no file: %v %v", got, err)
	}
	got, err := readPipeline(ws(t, map[string]string{".anvil/b.yaml": "b", ".anvil/a.yaml": "a", ".anvil/notes.txt": "n"}))
	if err != nil || len(got) != 2 || got[0].Path != ".anvil/a.yaml" || string(got[1].Data) != "b" {
		t.Fatalf("workflows: %+v %v", got, err)
	}
	for name, setup := range map[string]func(dir string) error{
		"symlinked file":   func(dir string) error { return os.Symlink("/etc/passwd", filepath.Join(dir, ".anvil.yaml")) },
		"symlinked folder": func(dir string) error { return os.Symlink("/etc", filepath.Join(dir, ".anvil")) },
		"symlinked workflow": func(dir string) error {
			if err := os.Mkdir(filepath.Join(dir, ".anvil"), 0o755); err != nil {
				return err
			}
			return os.Symlink("/etc/passwd", filepath.Join(dir, ".anvil", "x.yaml"))
		},
		"too large": func(dir string) error {
			return os.WriteFile(filepath.Join(dir, ".anvil.yaml"), []byte(strings.Repeat("#", 256<<10+1)), 0o644)
		},
		"both": func(dir string) error {
			if err := os.WriteFile(filepath.Join(dir, ".anvil.yaml"), []byte("steps: []"), 0o644); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, ".anvil.yml"), []byte("steps: []"), 0o644)
		},
	} {
		dir := t.TempDir()
		if err := setup(dir); err != nil {
			t.Fatal(err)
		}
		if got, err := readPipeline(dir); err == nil || strings.Contains(err.Error(), "root:") {
			t.Errorf("%s: %v %+v", name, err, got)
		}
	}
}
