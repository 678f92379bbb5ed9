package release

import "strings"

// CommitOf reads the commit a release version names (docs/releases.md,
// "A release's commit"): the whole version when it is a commit SHA
// (sentry-go sends the build's vcs.revision by default), or its last part
// after "+", "@", "-", "_", "/" or "." when that is one — "shop@2.4.0+3f9c1e2",
// "api-3f9c1e2d", and git describe's "v1.2.0-4-g3f9c1e2" (the "g" is git's
// marker, not part of the SHA). A version without one ("2.4.0",
// "2026.9.3") has no commit; a deploy script may declare it.
//
// A short SHA must be 7 to 40 hexadecimal digits with at least one letter:
// a run of digits is a build number far more often than a SHA, and a wrong
// commit would make a release "contain" a fix it does not.
func CommitOf(version string) (string, bool) {
	v := strings.ToLower(strings.TrimSpace(version))
	if sha, ok := shaOf(v, false); ok {
		return sha, true
	}
	i := strings.LastIndexAny(v, "+@-_/.")
	if i < 0 || i == len(v)-1 {
		return "", false
	}
	tail := v[i+1:]
	if sha, ok := shaOf(tail, false); ok {
		return sha, true
	}
	if v[i] == '-' && strings.HasPrefix(tail, "g") {
		return shaOf(tail[1:], false)
	}
	return "", false
}

// shaOf accepts s as a (possibly abbreviated) commit SHA.
func shaOf(s string, digitsOnly bool) (string, bool) {
	if len(s) < 7 || len(s) > 40 {
		return "", false
	}
	letter := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
		case c >= 'a' && c <= 'f':
			letter = true
		default:
			return "", false
		}
	}
	if !letter && !digitsOnly && len(s) < 40 {
		return "", false
	}
	return s, true
}

// NormalizeSHA checks a commit SHA given by a person or a forge: 7 to 40
// hexadecimal digits, lower-cased.
func NormalizeSHA(s string) (string, bool) {
	return shaOf(strings.ToLower(strings.TrimSpace(s)), true)
}
