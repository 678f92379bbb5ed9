package domain

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain/internal/dbutil"
)

// Tombstones (docs/erasure.md). A deleted project keeps its row, with
// deleted_at set, until its erasure has removed everything of it. Which of
// those rows a read sees is decided here, once, and not by a filter each
// query repeats: every read of projects names one of the FROM items below
// (raw SQL) or goes through SelectLiveProjects / WithProject (bun), and a
// guard test (tombstone_guard_test.go) fails on a query that names the
// table itself anywhere else. One forgotten filter can no longer leak a
// deleted project.

// LiveProjects is the projects a person or a client may reach — the table
// without its tombstoned rows — as a FROM item:
//
//	`SELECT … FROM ` + domain.LiveProjects + ` p WHERE p.org_id = ?`
//
// Postgres flattens the sub-select and a locking clause (FOR UPDATE) locks
// the rows of the table beneath, but its deleted_at filter enters the
// planner's row estimates: as the driving side of a join over many rows it
// can turn an index walk into a scan and a sort. A list that has already
// left out the tombstoned projects' rows joins AllProjects only to name
// each row's project (the inbox: docs/figures.md, "Round three on a quiet
// machine").
const LiveProjects = `(SELECT * FROM projects WHERE deleted_at IS NULL)`

// DeletedProjects is the tombstoned projects (their erasure pending), as
// a FROM item: for the reads that hide what belongs to them.
const DeletedProjects = `(SELECT * FROM projects WHERE deleted_at IS NOT NULL)`

// AllProjects is every project row, tombstoned ones included, as a FROM
// item: only for the erasure, for a run's own transitions (a deleted
// project's running run still stops and reports), and for reads that
// follow a row already reached (an incident's or a run's project).
const AllProjects = `projects`

// SelectLiveProjects is a bun select of live projects into model (a
// *Project or a *[]Project): the bun twin of LiveProjects.
func SelectLiveProjects(db bun.IDB, model any) *bun.SelectQuery {
	return db.NewSelect().Model(model).ModelTableExpr(LiveProjects + ` AS project`)
}

// lockProject is the row lock of WithProject and WithAnyProject.
func (s *Store) lockProject(ctx context.Context, tx bun.Tx, projectID uuid.UUID, from string) (*Project, error) {
	p := new(Project)
	err := tx.NewSelect().Model(p).ModelTableExpr(from+` AS project`).Where("id = ?", projectID).For("UPDATE").Scan(ctx)
	if err != nil {
		if dbutil.IsNoRows(err) {
			return nil, NotFound("project")
		}
		return nil, fmt.Errorf("lock project %s: %w", projectID, err)
	}
	return p, nil
}
