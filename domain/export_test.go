package domain

// SetAfterLookup installs Feed.afterLookup for the tests of package
// domain_test.
func (f *Feed) SetAfterLookup(hook func(general bool)) { f.afterLookup = hook }
