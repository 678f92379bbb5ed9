package feed

// SetAfterLookup installs Feed.afterLookup for the tests of package
// domain_test.
func (f *Feed) SetAfterLookup(hook func(general bool)) { f.afterLookup = hook }

// PolicyFor exposes a sender's binding lookup to the external tests.
func (snd *FeedSender) PolicyFor(env string) (string, bool) { return snd.policyFor(env) }
