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
	gone, err := notLive(ctx, s, ids)
	if err != nil {
		return 0, fmt.Errorf("mirrors: %w", err)
	}
	n := 0
	for _, id := range gone {
		for _, d := range byID[id] {
			if err := removeTree(d); err != nil {
				return n, fmt.Errorf("mirrors: remove %s: %w", d, err)
			}
			n++
		}
	}
	return n, nil
}

// notLive returns those of ids that are not live projects.
func notLive(ctx context.Context, s *domain.Store, ids []uuid.UUID) ([]uuid.UUID, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var live []uuid.UUID
	if err := s.DB.NewRaw(`SELECT id FROM `+domain.LiveProjects+` p WHERE id IN (?)`, bun.List(ids)).Scan(ctx, &live); err != nil {
		return nil, fmt.Errorf("live projects: %w", err)
	}
	isLive := make(map[uuid.UUID]bool, len(live))
	for _, id := range live {
		isLive[id] = true
	}
	var gone []uuid.UUID
	for _, id := range ids {
		if !isLive[id] {
			gone = append(gone, id)
		}
	}
	return gone, nil
}
