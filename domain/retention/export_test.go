package retention

// SetAfterBatch runs fn after every committed clean-up batch (tests stop a
// clean-up between two batches with it).
func (r *Service) SetAfterBatch(fn func()) { r.afterBatch = fn }

// SetBeforeFinish runs fn in a project's finish, between its re-read of the
// policy and its write of the sampling mark.
func (r *Service) SetBeforeFinish(fn func()) { r.beforeFinish = fn }
