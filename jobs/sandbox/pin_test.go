package sandbox_test

import (
	"net/netip"
	"testing"

	"anvil/domain/repourl"
	"anvil/jobs/sandbox"
)

// The ssh command the checkout and a repair's push share: pinned to the
// first checked address under the host's name for its key, unless the
// address is a literal (nothing to re-resolve) or local checkouts are
// allowed (nothing was checked).
func TestSSHCommand(t *testing.T) {
	t.Parallel()
	a := []netip.Addr{netip.MustParseAddr("2001:4860::8888"), netip.MustParseAddr("93.184.216.34")}
	ssh := repourl.Checked{Target: repourl.Target{Kind: repourl.KindSSH, Scheme: "ssh", Host: "git.example", Port: "22"}, Addrs: a}
	for _, c := range []struct {
		chk   repourl.Checked
		allow bool
		want  string
	}{
		{ssh, false, "ssh -o BatchMode=yes -o HostName=2001:4860::8888 -o HostKeyAlias=git.example"},
		{ssh, true, "ssh -o BatchMode=yes"},
		{repourl.Checked{Target: repourl.Target{Kind: repourl.KindSSH, Host: "93.184.216.34"}, Addrs: a[1:]}, false, "ssh -o BatchMode=yes"},
		{repourl.Checked{Target: repourl.Target{Kind: repourl.KindHTTP, Host: "git.example"}, Addrs: a}, false, "ssh -o BatchMode=yes"},
	} {
		if got := sandbox.SSHCommand(c.chk, c.allow); got != c.want {
			t.Errorf("%+v allow=%v: %q, want %q", c.chk, c.allow, got, c.want)
		}
	}
}
