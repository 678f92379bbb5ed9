// Package release is a project's releases and the fixes they ship
// (docs/releases.md): releases learnt from every stored event and declared
// by deploy scripts, the commit each one was built from, and — on top of
// the incident lifecycle, which it moves only through incident's exported
// methods — the fix chain of an incident: merged, shipped, verified or
// recurred. It imports the base domain, project and incident; the feed's
// store calls TrackStmt inside its group transaction.
package release
