// Package sourcemap makes minified front-end stack traces readable (issue
// 28, docs/sourcemap.md). It keeps the source maps a build uploads — with
// the real `sentry-cli sourcemaps upload` (chunks, then an artifact bundle
// assembled from them) or a plain multipart upload — in Postgres,
// deduplicated by checksum and bounded per file, per bundle and per
// project; and at ingest, before the feed groups an event, it maps each
// minified frame back to its original file, line, column and function.
//
// The rules it guards:
//   - nothing half-stored: a bundle is checked whole (checksums, zip
//     entries, limits) before one row is written, and written in the
//     project's transaction (domain.Store.WithProject);
//   - an organisation or project the caller cannot see is "not found",
//     never a hint that it exists; members and above upload;
//   - symbolication never fails an event: a frame that cannot be mapped is
//     kept as it came, with the reason beside it.
//
// It writes its own SQL against its own tables (sourcemap_*) and imports
// of the domain only the base and the event shape.
package sourcemap
