package sandbox

import (
	"io"
	"os"
	"strings"
	"syscall"
)

// readHead returns the commit a fresh checkout's HEAD points at, read from
// the files git wrote, without starting git again: each confined git is a
// bubblewrap launch, and the checkout is on every run's critical path
// (docs/architecture.md, "Checkout"). It handles the two shapes a fresh
// checkout has — a detached HEAD holding the commit id, or a symbolic HEAD
// ("ref: refs/heads/NAME") whose branch is a loose ref file — and answers
// ok=false for anything else (a packed ref, another ref storage, a .git
// file), when the caller asks git instead.
//
// The checkout belongs to the sandbox user, and the host process may be
// root: the files are read through an os.Root at dir, so no symlink in the
// checkout can lead the read outside it, and only regular files are read
// (opened non-blocking, so that a FIFO cannot hang the worker), at most a
// few bytes each. The answer is a full hex commit id or nothing.
func readHead(dir string) (string, bool) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", false
	}
	defer root.Close()
	head, ok := readSmall(root, ".git/HEAD")
	if !ok {
		return "", false
	}
	if shaRE.MatchString(head) {
		return strings.ToLower(head), true
	}
	ref, found := strings.CutPrefix(head, "ref: ")
	if !found || !strings.HasPrefix(ref, "refs/heads/") || strings.Contains(ref, "..") {
		return "", false
	}
	sha, ok := readSmall(root, ".git/"+ref)
	if !ok || !shaRE.MatchString(sha) {
		return "", false
	}
	return strings.ToLower(sha), true
}

// readSmall reads a short regular file below root, without its trailing
// newline.
func readSmall(root *os.Root, name string) (string, bool) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return "", false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	b, err := io.ReadAll(io.LimitReader(f, 512))
	if err != nil || len(b) == 512 {
		return "", false
	}
	return strings.TrimRight(string(b), "\n"), true
}
