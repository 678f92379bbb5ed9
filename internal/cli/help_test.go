package cli

import (
	"flag"
	"strings"
	"testing"
)

// `anvil help` lists every subcommand with every one of its flags, and
// `anvil COMMAND --help` (for admin commands `anvil admin NAME --help`)
// lists the command's own — both from the declarations that parse them,
// so neither can forget one.
func TestHelpListsEveryCommandAndFlag(t *testing.T) {
	t.Parallel()
	if len(commands) < len(order) {
		t.Fatalf("%d commands registered, %d in the help's order", len(commands), len(order))
	}
	code, all, stderr := anvil(t, nil, "", "help")
	if code != 0 {
		t.Fatalf("anvil help: %d %s", code, stderr)
	}
	for _, c := range commands {
		if !strings.Contains(all, "anvil "+c.name) || !strings.Contains(all, c.summary) {
			t.Errorf("anvil help does not list %q", c.name)
		}
		if rank(c.name) == len(order) {
			t.Errorf("%q is not in the help's order", c.name)
		}
		code, own, stderr := anvil(t, nil, "", append(strings.Fields(c.name), "--help")...)
		if code != 0 || !strings.Contains(own, "Usage: anvil "+c.name) {
			t.Errorf("anvil %s --help: %d %q %s", c.name, code, own, stderr)
		}
		flagsOf(c).VisitAll(func(f *flag.Flag) {
			if !strings.Contains(all, "--"+f.Name+" ") {
				t.Errorf("anvil help does not list %s's --%s", c.name, f.Name)
			}
			if !strings.Contains(own, "-"+f.Name) || !strings.Contains(own, f.Usage) {
				t.Errorf("anvil %s --help does not list -%s", c.name, f.Name)
			}
		})
	}
	for _, want := range []string{"--addr", "--role", "--org", "--password-file", "--env-file", "--force", "--now", "--json", "--dir"} {
		if !strings.Contains(all, want) {
			t.Errorf("anvil help lacks %s", want)
		}
	}
	// `anvil admin` alone is a usage error listing the admin commands.
	code, _, stderr = anvil(t, nil, "", "admin")
	if code != 2 || !strings.Contains(stderr, "anvil admin restore") || strings.Contains(stderr, "anvil serve") {
		t.Errorf("anvil admin: %d %s", code, stderr)
	}
	if code, _, stderr := anvil(t, nil, "", "admin", "explode"); code != 2 || !strings.Contains(stderr, `unknown admin command "explode"`) {
		t.Errorf("anvil admin explode: %d %s", code, stderr)
	}
	if code, out, _ := anvil(t, nil, "", "help", "admin", "backup"); code != 0 || !strings.Contains(out, "Usage: anvil admin backup") {
		t.Errorf("anvil help admin backup: %d %s", code, out)
	}
}
