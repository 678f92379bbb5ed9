package domain

// Webhooks owns webhook configuration, secret custody and the delivery
// ledger (seed 000 §7–11).
type Webhooks struct {
	s     *Store
	queue *Queue
}

// NewWebhooks builds the service.
func NewWebhooks(s *Store, q *Queue) *Webhooks { return &Webhooks{s: s, queue: q} }
