// Package image is anvil's machinery for container images without a
// container daemon (docs/images.md): a [Puller] resolves a reference
// (node:22, ghcr.io/acme/ci:3, repo@sha256:…) to the manifest digest of
// the worker's platform and opens the image over the project's network
// list; a [Store] unpacks it once per digest, layer by layer through an
// [Applier] that confines every file operation to the tree, and keeps the
// trees under a bound, least recently used first out.
//
// What it guards: an image is input from the internet. Its layers must not
// write outside the tree (absolute and relative symlinks, ../ names, hard
// links), create what a sandbox must not have (device nodes, setuid and
// setgid files, xattrs), fill the disk (bounds read before writing), or
// pass off tampered bytes under a genuine digest (every blob hashed to its
// end); its registry must be one the project listed, reached as the
// project's runs reach the network (domain/netpolicy's list, private
// addresses refused unless ANVIL_RUNS_ALLOW_PRIVATE=true).
//
// The package holds no state but the store's directory and never queries:
// its callers (jobs/) resolve, record the digest on the run, and hand the
// tree to the sandbox.
package image
