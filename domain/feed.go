package domain

// Feed owns the Anvil Feed ingest: connections, bindings and event storage
// (seed 004).
type Feed struct {
	s *Store
}

// NewFeed builds the service.
func NewFeed(s *Store) *Feed { return &Feed{s: s} }
