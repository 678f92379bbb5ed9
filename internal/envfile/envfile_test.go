package envfile

import (
	"strings"
	"testing"
)

func TestParseLikeSystemd(t *testing.T) {
	t.Parallel()
	in := "# comment\n; also a comment\n\nA=1\n  B = two words  \nC=\"quoted \\\"x\\\" \\$HOME\"\nD='single $X'\nE=long\\\nline\nF=\nA=again\n"
	vars, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	get := Getenv(vars, func(string) string { return "fallback" })
	for k, want := range map[string]string{"A": "again", "B": "two words", "C": `quoted "x" $HOME`, "D": "single $X", "E": "longline", "F": "", "G": "fallback"} {
		if got := get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if vars[0].Line != 4 {
		t.Errorf("A is on line %d, want 4", vars[0].Line)
	}
	for _, bad := range []string{"NOEQUALS\n", "1X=y\n", "X=\"open\n", "X=y\\\n"} {
		if _, err := Parse(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
