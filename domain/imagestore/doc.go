// Package imagestore keeps what the server knows of the workers' image
// stores (docs/images.md, "The store"): the stores themselves are
// directories on the workers' hosts (domain/image's Store, machinery that
// never queries); the table image_stores holds one row per store — its
// host, how many images and bytes it holds, its bound, when it last
// reported — and image_store_clear the last clear requested, through which
// a clear asked of any process (a web-only one included) reaches every
// worker: each worker's Reporter reports its store every few seconds and
// carries out a clear requested after the last one it carried out.
//
// It is a capability of its own rather than a part of domain/image
// because it owns tables and roles, and domain/image is machinery below
// the database (its depguard rule forbids db and bun); rather than a part
// of domain/account (which owns the settings page's other sections)
// because the store is the host's, shared by every organisation, not an
// organisation's setting. It imports only the base domain; the worker's
// store is handed to the Reporter as the narrow Local interface.
//
// The store is shared by every organisation whose runs the worker runs:
// what this package shows is figures (counts and bytes), never which
// images.
package imagestore
