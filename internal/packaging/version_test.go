package packaging

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestDebianVersion(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 4, 9, 30, 0, 0, time.UTC)
	for _, c := range []struct{ describe, want string }{
		{"v1.4.0-0-gabc1234", "1.4.0"},
		{"1.4.0-0-gabc1234", "1.4.0"},
		{"v1.4.0-rc.1-0-gabc1234", "1.4.0~rc.1"},
		{"v1.4.0-rc-1-0-gabc1234", "1.4.0~rc.1"},
		{"v1.4.0-3-gabc1234", "1.4.0+git20261204093000.3.abc1234"},
		{"v1.4.0-3-gabc1234-dirty", "1.4.0+git20261204093000.3.abc1234+dirty"},
		{"abc1234", "0.0.0~git20261204093000.abc1234"},
		{"abc1234-dirty", "0.0.0~git20261204093000.abc1234+dirty"},
	} {
		got, dirty, err := DebianVersion(c.describe, at)
		if err != nil || got != c.want || dirty != (c.describe[len(c.describe)-5:] == "dirty") {
			t.Errorf("DebianVersion(%q) = %q, %v, %v; want %q", c.describe, got, dirty, err, c.want)
		}
	}
	for _, bad := range []string{"", "release-candidate", "v1.x-0-gabc"} {
		if v, _, err := DebianVersion(bad, at); err == nil {
			t.Errorf("DebianVersion(%q) = %q, want an error", bad, v)
		}
	}
}

// TestVersionsSortAsHistory: dpkg orders the versions the way the history
// goes — an untagged build before the first tag, a later commit after an
// earlier one, a release candidate before its release, a commit after a
// tag before the next tag — so an upgrade is always an upgrade.
func TestVersionsSortAsHistory(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("dpkg"); err != nil {
		t.Skip("dpkg is not installed")
	}
	early := time.Date(2026, 12, 4, 9, 30, 0, 0, time.UTC)
	late := early.Add(time.Second)
	v := func(d string, at time.Time) string {
		s, _, err := DebianVersion(d, at)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	order := []string{
		v("fffffff", early), v("0000000", late), v("v0.1.0-rc.1-0-gabc1234", late), v("v0.1.0-0-gabc1234", late),
		v("v0.1.0-1-gabc1234", late), v("v0.1.1-0-gabc1234", late),
	}
	for i := 1; i < len(order); i++ {
		if err := exec.Command("dpkg", "--compare-versions", order[i-1], "lt", order[i]).Run(); err != nil {
			t.Errorf("dpkg: %s is not before %s", order[i-1], order[i])
		}
	}
}

// TestDescribeFollowsTags: an untagged history gets the 0.0.0~git version;
// a v-tag gives its version; a commit after the tag sorts after it.
func TestDescribeFollowsTags(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	g := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	describe := func() Info {
		t.Helper()
		info, err := Describe(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	g("init", "-q", "-b", "main")
	g("commit", "-q", "--allow-empty", "-m", "one")
	if v := describe().Version; !strings.HasPrefix(v, "0.0.0~git") {
		t.Errorf("untagged: %s", v)
	}
	g("tag", "-a", "-m", "0.3.0", "v0.3.0")
	tagged := describe()
	if tagged.Version != "0.3.0" || tagged.PackageVersion() != "0.3.0-1" {
		t.Errorf("on the tag: %s (%s)", tagged.Version, tagged.PackageVersion())
	}
	g("commit", "-q", "--allow-empty", "-m", "two")
	if v := describe().Version; !strings.HasPrefix(v, "0.3.0+git") || !strings.Contains(v, ".1.") {
		t.Errorf("one commit after the tag: %s", v)
	}
}
