package dbutil

import (
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"anvil/db"
)

func IsNoRows(err error) bool                    { return db.IsNoRows(err) }
func IsUnique(err error, constraint string) bool { return db.IsUniqueViolation(err, constraint) }

// Parameters for pgx, whose own types it encodes without reflection or a
// detour through driver.Valuer and text: a nil pointer is NULL.

func PgUUID(id uuid.UUID) pgtype.UUID { return pgtype.UUID{Bytes: id, Valid: true} }

// pgUUIDs is ids as a uuid[] parameter.
func PgUUIDs(ids []uuid.UUID) []pgtype.UUID {
	out := make([]pgtype.UUID, len(ids))
	for i, id := range ids {
		out[i] = PgUUID(id)
	}
	return out
}

func PgUUIDPtr(id *uuid.UUID) pgtype.UUID {
	if id == nil {
		return pgtype.UUID{}
	}
	return PgUUID(*id)
}

func PgText(s *string) pgtype.Text {
	if s == nil {
		return pgtype.Text{}
	}
	return pgtype.Text{String: *s, Valid: true}
}

func PgInt8(v *int64) pgtype.Int8 {
	if v == nil {
		return pgtype.Int8{}
	}
	return pgtype.Int8{Int64: *v, Valid: true}
}

// rowSource is what the scanners read: *sql.Rows and pgx.Rows alike.
type RowSource interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// stmt is one parameterized statement.
type Stmt struct {
	SQL  string
	Args []any
}
