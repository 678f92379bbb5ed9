package project

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// imageRefProblem checks an image reference as the worker will read it
// (docs/images.md): a name, a tag or a digest, no scheme.
func imageRefProblem(s string) (string, string) {
	if s == "" {
		return "", ""
	}
	if strings.Contains(s, "://") || strings.ContainsAny(s, " \t\r\n") {
		return "invalid_image", fmt.Sprintf("%q must be an image reference such as node:22, ghcr.io/acme/ci:3 or repo@sha256:…, without a scheme", clipRef(s))
	}
	if _, err := name.ParseReference(s); err != nil {
		return "invalid_image", fmt.Sprintf("%q is not an image reference (node:22, ghcr.io/acme/ci:3, repo@sha256:…)", clipRef(s))
	}
	return "", ""
}

func clipRef(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// imageWords is an image as the audit log says it.
func imageWords(s string) string {
	if s == "" {
		return "none (the host's tools)"
	}
	return s
}
