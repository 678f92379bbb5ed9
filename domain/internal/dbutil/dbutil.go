// Package dbutil holds the small database helpers every capability
// package of the domain shares: error tests, pgx parameters, statements.
package dbutil

import (
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"anvil/db"
)

// IsNoRows reports whether err is "no rows".
func IsNoRows(err error) bool { return db.IsNoRows(err) }

// IsUnique reports whether err violates the unique constraint named.
func IsUnique(err error, constraint string) bool { return db.IsUniqueViolation(err, constraint) }

// Parameters for pgx, whose own types it encodes without reflection or a
// detour through driver.Valuer and text: a nil pointer is NULL.

// PgUUID is id as a uuid parameter.
func PgUUID(id uuid.UUID) pgtype.UUID { return pgtype.UUID{Bytes: id, Valid: true} }

// PgUUIDs is ids as a uuid[] parameter.
func PgUUIDs(ids []uuid.UUID) []pgtype.UUID {
	out := make([]pgtype.UUID, len(ids))
	for i, id := range ids {
		out[i] = PgUUID(id)
	}
	return out
}

// PgUUIDPtr is id as a uuid parameter, NULL for nil.
func PgUUIDPtr(id *uuid.UUID) pgtype.UUID {
	if id == nil {
		return pgtype.UUID{}
	}
	return PgUUID(*id)
}

// PgText is s as a text parameter, NULL for nil.
func PgText(s *string) pgtype.Text {
	if s == nil {
		return pgtype.Text{}
	}
	return pgtype.Text{String: *s, Valid: true}
}

// PgInt8 is v as a bigint parameter, NULL for nil.
func PgInt8(v *int64) pgtype.Int8 {
	if v == nil {
		return pgtype.Int8{}
	}
	return pgtype.Int8{Int64: *v, Valid: true}
}

// RowSource is what the scanners read: *sql.Rows and pgx.Rows alike.
type RowSource interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// Stmt is one parameterized statement.
type Stmt struct {
	SQL  string
	Args []any
}
