package release_test

import (
	"testing"

	"anvil/domain/release"
)

func TestCommitOf(t *testing.T) {
	t.Parallel()
	full := "3f9c1e2d4b5a69788796a5b4c3d2e1f0a9b8c7d6"
	cases := []struct {
		version, sha string
	}{
		{full, full},
		{"3F9C1E2D4B5A69788796A5B4C3D2E1F0A9B8C7D6", full},
		{"3f9c1e2", "3f9c1e2"},
		{"shop@2.4.0+3f9c1e2", "3f9c1e2"},
		{"shop@2.4.0+" + full, full},
		{"shop@" + full, full},
		{"api-3f9c1e2d", "3f9c1e2d"},
		{"v1.2.0-4-g3f9c1e2", "3f9c1e2"},
		{"build_3f9c1e2aa", "3f9c1e2aa"},
		{"releases/3f9c1e2", "3f9c1e2"},
		// versions without commits
		{"2.4.0", ""},
		{"2026.9.3", ""},
		{"shop@2.4.0", ""},
		{"1234567", ""}, // digits: a build number, not a SHA
		{"shop@2.4.0+1234567", ""},
		{"3f9c1e", ""}, // too short
		{"shop@2.4.0+", ""},
		{"", ""},
		{"deadbeefcafe-g", ""}, // the SHA is not the last part
		{"v1.2.0-4-gzz9c1e2", ""},
		{full + "0", ""}, // 41 digits
		{"release-candidate", ""},
	}
	for _, c := range cases {
		got, ok := release.CommitOf(c.version)
		if got != c.sha || ok != (c.sha != "") {
			t.Errorf("CommitOf(%q) = %q, %v; want %q", c.version, got, ok, c.sha)
		}
	}
}

func TestNormalizeSHA(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"ABCDEF1": "abcdef1", " 1234567 ": "1234567", "xyz1234": "", "abc": ""} {
		if got, _ := release.NormalizeSHA(in); got != want {
			t.Errorf("NormalizeSHA(%q) = %q, want %q", in, got, want)
		}
	}
}
