package sandbox

import (
	"net/netip"

	"anvil/domain/repourl"
)

// SSHCommand is GIT_SSH_COMMAND for a repository the policy checked: ssh in
// batch mode (no prompts), and — while local checkouts are refused — pinned
// to the first checked address (HostName) while the host key is still
// looked up under the host's name (HostKeyAlias), so that a DNS answer that
// changes between the check and git's connection (rebinding) cannot send
// git to a private address. The checkout and a repair's push use it alike;
// http(s) is pinned with [CurlResolve].
func SSHCommand(chk repourl.Checked, allowLocal bool) string {
	cmd := "ssh -o BatchMode=yes"
	if allowLocal || chk.Kind != repourl.KindSSH || len(chk.Addrs) == 0 {
		return cmd
	}
	if _, err := netip.ParseAddr(chk.Host); err == nil {
		return cmd // an IP literal: what was checked is what ssh dials
	}
	return cmd + " -o HostName=" + chk.Addrs[0].String() + " -o HostKeyAlias=" + chk.Host
}
