package jobs_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"anvil/jobs"
)

// A deleted project's repository mirrors (docs/releases.md, "Shipped") go
// with it — this worker's and those of the other worker processes of the
// host — while a live project's stay.
func TestDeletingAProjectRemovesItsMirrors(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	repo, _, _ := gitRepo(t)
	doomed := b.project(t, "doomed", repo, "true", 0)
	kept := b.project(t, "kept", repo, "true", 0)
	sibling := filepath.Join(filepath.Dir(b.workRoot), "otherhost-1")
	mirror := func(root string, p string) string {
		dir := filepath.Join(root, "mirrors", p)
		if err := os.MkdirAll(filepath.Join(dir, "objects", "pack"), 0o700); err != nil {
			t.Fatal(err)
		}
		// Git's objects are read-only.
		if err := os.WriteFile(filepath.Join(dir, "objects", "pack", "pack-1.pack"), []byte("PACK"), 0o444); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	gone := []string{mirror(b.workRoot, doomed.ID.String()), mirror(sibling, doomed.ID.String())}
	if got := jobs.MirrorDir(b.workRoot, doomed.ID); got != gone[0] {
		t.Fatalf("MirrorDir = %s, want %s", got, gone[0])
	}
	stay := []string{mirror(b.workRoot, kept.ID.String()), mirror(sibling, kept.ID.String()), mirror(b.workRoot, "not-a-project")}

	if _, err := b.services.Erasure.DeleteProject(ctx, b.owner, doomed.ID, "doomed"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the deleted project's mirrors to be removed", func() bool {
		for _, d := range gone {
			if _, err := os.Stat(d); err == nil {
				return false
			}
		}
		return true
	})
	for _, d := range stay {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("%s was removed: %v", d, err)
		}
	}
}

// An erased organisation's projects' mirrors go with it.
func TestDeletingAnOrganizationRemovesItsMirrors(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	repo, _, _ := gitRepo(t)
	p := b.project(t, "shop", repo, "true", 0)
	dir := jobs.MirrorDir(b.workRoot, p.ID)
	if err := os.MkdirAll(filepath.Join(dir, "objects"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := b.services.Erasure.DeleteOrganization(ctx, b.owner, b.owner.OrgID, "acme"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the organisation's mirrors to be removed", func() bool {
		_, err := os.Stat(dir)
		return errors.Is(err, fs.ErrNotExist)
	})
}
