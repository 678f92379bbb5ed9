package feed_test

import (
	"testing"

	"anvil/db/testdb"
	"anvil/domain/internal/domaintest"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// The harness of every capability package's tests (domain/internal/domaintest).
type (
	testBundle     struct{ *domaintest.Bundle }
	incidentBundle = domaintest.IncidentBundle
)

func setup(t testing.TB) *testBundle   { return &testBundle{domaintest.Setup(t)} }
func setupTB(t testing.TB) *testBundle { return setup(t) }

var (
	setupIncidents = domaintest.SetupIncidents
	strp           = domaintest.Strp
	newFeed        = domaintest.NewFeed
	feedEvent      = domaintest.FeedEvent
)
