package retention

// SetAfterBatch runs fn after every committed clean-up batch (tests stop a
// clean-up between two batches with it).
func (r *Service) SetAfterBatch(fn func()) { r.afterBatch = fn }
