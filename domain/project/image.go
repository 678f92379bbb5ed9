package project

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"anvil/domain"
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

// pullSecretNameRE is a run secret's name (domain/runsecret's rule, which
// this package does not import), here at most 64 bytes.
var pullSecretNameRE = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// pullSecretNameProblem checks the name of a project's pull secret
// (docs/images.md, "Private registries"): a run secret's name, or "".
func pullSecretNameProblem(s string) (string, string) {
	if s == "" || pullSecretNameRE.MatchString(s) {
		return "", ""
	}
	return "invalid_image_pull_secret", fmt.Sprintf("%q must be the name of one of the project's run secrets: upper-case letters, digits and _, not starting with a digit", clipRef(s))
}

// pullSecretUnknown adds to pre that the pull secret in names no run
// secret of the project, when it names one; a malformed name is reported
// by apply instead.
func pullSecretUnknown(pre domain.FieldErrors, in *ProjectInput) domain.FieldErrors {
	v := trimmed(in.ImagePullSecret)
	if v == "" {
		return pre
	}
	out := append(domain.FieldErrors{}, pre...)
	out.Add("image_pull_secret", "unknown_image_pull_secret", "is unknown: no run secret named %s in this project (add it under Secrets first)", clipRef(v))
	return out
}

// pullSecretWords is a pull secret as the audit log says it: its name,
// never its value.
func pullSecretWords(s string) string {
	if s == "" {
		return "none (anonymous pulls)"
	}
	return s
}
