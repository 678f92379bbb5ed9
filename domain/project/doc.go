// Package project is the projects: their settings, branch filters, the
// checkout policy and probe applied when one is saved, and the provider
// token (table projects; the Project type itself is the base's, as every
// capability reads it). It imports only the base domain.
package project
