// Package otlp is the pure half of anvil's OpenTelemetry door (docs/otlp.md):
// it decodes what an unmodified OTLP/HTTP exporter posts to
// /api/otlp/v1/traces and /api/otlp/v1/logs — protobuf or OTLP/JSON, with the
// official OTLP Go types — picks out the exceptions (span events named
// "exception", error logs and logs with exception.* attributes), and
// translates each into the Anvil Feed event of the feed's wire contract
// (docs/contracts/feed.md), which then goes through the feed's own
// validation, bounds, scrubbing, bindings, dedupe and storage unchanged, as
// the Sentry door's do. Everything else is counted and dropped: anvil keeps
// no traces.
//
// No HTTP, no database, no clock: everything is a function of its
// arguments, so it is cheap to fuzz. It owns no tables and imports only the
// event package of the domain.
package otlp
