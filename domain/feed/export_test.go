package feed

// SetAfterLookup installs Feed.afterLookup for the tests of package
// domain_test.
func (f *Feed) SetAfterLookup(hook func(general bool)) { f.afterLookup = hook }

// PolicyFor exposes a sender's binding lookup to the external tests.
func (snd *FeedSender) PolicyFor(env string) (string, bool) { return snd.policyFor(env) }

// TakeGeneralPath sends every group of the feed down its general path
// (storeBatch), for the differential test; call it before the first ingest.
func (f *Feed) TakeGeneralPath() { f.generalOnly = true }

// SetDuringFold installs Feed.duringFold: hook runs inside each fold
// transaction after its deltas are deleted and before they are added,
// with the fold's backend pid.
func (f *Feed) SetDuringFold(hook func(pid int)) { f.duringFold = hook }
