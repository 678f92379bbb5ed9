package jobs

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
)

// MirrorDir is where a worker process keeps its mirror of a project's
// repository for the ancestry checks (docs/releases.md, "Shipped"):
// WorkRoot/mirrors/<project>, WorkRoot being the process's own folder.
func MirrorDir(workRoot string, projectID uuid.UUID) string {
	return filepath.Join(workRoot, "mirrors", projectID.String())
}

// pruneMirrors removes the mirrors of projects that are no longer live
// (deleted, being erased, or gone) — this process's, and those of the
// other worker processes of this host, whose folders are siblings of
// workRoot under the shared work folder. A mirror holds the repository's
// code: it goes with the project. It returns how many it removed.
func pruneMirrors(ctx context.Context, s *domain.Store, workRoot string) (int, error) {
	if workRoot == "" {
		return 0, nil
	}
	dirs, err := filepath.Glob(filepath.Join(filepath.Dir(workRoot), "*", "mirrors", "*"))
	if err != nil || len(dirs) == 0 {
		return 0, err
	}
	byID := map[uuid.UUID][]string{}
	ids := make([]uuid.UUID, 0, len(dirs))
	for _, d := range dirs {
		id, err := uuid.Parse(filepath.Base(d))
		if err != nil {
			continue // not a mirror of ours
		}
		if byID[id] == nil {
			ids = append(ids, id)
		}
		byID[id] = append(byID[id], d)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	var live []uuid.UUID
	if err := s.DB.NewRaw(`SELECT id FROM `+domain.LiveProjects+` p WHERE id IN (?)`, bun.List(ids)).Scan(ctx, &live); err != nil {
		return 0, fmt.Errorf("mirrors: live projects: %w", err)
	}
	for _, id := range live {
		delete(byID, id)
	}
	n := 0
	for _, ds := range byID {
		for _, d := range ds {
			if err := removeTree(d); err != nil {
				return n, fmt.Errorf("mirrors: remove %s: %w", d, err)
			}
			n++
		}
	}
	return n, nil
}
