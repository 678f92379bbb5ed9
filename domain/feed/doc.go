// Package feed is the error feed: connections and bindings, token
// resolution, the ingest (validation, scrubbing, fingerprints) and its
// store — the COPY fast path and its slow twin (tables feed_connections,
// feed_bindings, feed_events, feed_outcomes). The store creates incidents and
// counts events on them inside its group transaction, and records their
// moves through incident.TransitionsStmt. It imports the base domain,
// incident and card.
package feed
