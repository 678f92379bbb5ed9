package run_test

import (
	"testing"

	"anvil/db/testdb"
	"anvil/domain/internal/domaintest"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// The harness of every capability package's tests (domain/internal/domaintest).
type testBundle struct{ *domaintest.Bundle }

func setup(t testing.TB) *testBundle   { return &testBundle{domaintest.Setup(t)} }
func setupTB(t testing.TB) *testBundle { return setup(t) }

var (
	strp    = domaintest.Strp
	errCode = domaintest.ErrCode
)

func countRows(t *testing.T, b *testBundle, table string, where string, args ...any) int {
	t.Helper()
	return b.CountRows(t, table, where, args...)
}
