package domain

import "anvil/db"

func isNoRows(err error) bool                    { return db.IsNoRows(err) }
func isUnique(err error, constraint string) bool { return db.IsUniqueViolation(err, constraint) }
