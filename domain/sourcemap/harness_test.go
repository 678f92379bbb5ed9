package sourcemap_test

import (
	"testing"

	"anvil/db/testdb"
	"anvil/domain/internal/domaintest"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// The harness of every capability package's tests (domain/internal/domaintest).
type testBundle struct{ *domaintest.IncidentBundle }

func setup(t testing.TB) *testBundle { return &testBundle{domaintest.SetupIncidents(t, "observe")} }

var errCode = domaintest.ErrCode
