// Package envfile reads environment files the way systemd's
// EnvironmentFile= does, so that `anvil admin … --env-file
// /etc/anvil/anvil.env` sees exactly the configuration the service sees
// (docs/install.md).
//
// A line is KEY=VALUE; blank lines and lines starting with # or ; are
// comments; whitespace around the key and an unquoted value is dropped; a
// value in double quotes may escape \" \\ \n \t \$, one in single quotes is
// taken as written; a backslash at the end of a line joins the next one.
// Nothing is expanded: systemd does not expand variables in these files.
package envfile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// Var is one assignment, in file order.
type Var struct {
	Key, Value string
	Line       int
}

var keyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Parse reads the assignments of r.
func Parse(r io.Reader) ([]Var, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var vars []Var
	n, start := 0, 0
	var pending strings.Builder
	for sc.Scan() {
		n++
		line := sc.Text()
		if pending.Len() == 0 {
			start = n
			t := strings.TrimSpace(line)
			if t == "" || t[0] == '#' || t[0] == ';' {
				continue
			}
		}
		if strings.HasSuffix(line, `\`) && !strings.HasSuffix(line, `\\`) {
			pending.WriteString(strings.TrimSuffix(line, `\`))
			continue
		}
		pending.WriteString(line)
		v, err := parseLine(pending.String())
		pending.Reset()
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", start, err)
		}
		v.Line = start
		vars = append(vars, v)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if pending.Len() > 0 {
		return nil, fmt.Errorf("line %d: the file ends inside a continued line", start)
	}
	return vars, nil
}

func parseLine(line string) (Var, error) {
	k, v, ok := strings.Cut(line, "=")
	k = strings.TrimSpace(k)
	if !ok || !keyRE.MatchString(k) {
		return Var{}, fmt.Errorf("not a KEY=VALUE assignment")
	}
	v = strings.TrimSpace(v)
	switch {
	case len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'':
		v = v[1 : len(v)-1]
	case len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"':
		var b strings.Builder
		in := v[1 : len(v)-1]
		for i := 0; i < len(in); i++ {
			c := in[i]
			if c == '\\' && i+1 < len(in) {
				i++
				switch in[i] {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				default:
					b.WriteByte(in[i])
				}
				continue
			}
			b.WriteByte(c)
		}
		v = b.String()
	case strings.ContainsAny(v[:min(1, len(v))], `"'`):
		return Var{}, fmt.Errorf("%s: unbalanced quote", k)
	}
	return Var{Key: k, Value: v}, nil
}

// Read parses the file at path.
func Read(path string) ([]Var, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	vars, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return vars, nil
}

// Getenv returns a lookup that answers from vars first (a later assignment
// wins, as in systemd) and from fallback otherwise.
func Getenv(vars []Var, fallback func(string) string) func(string) string {
	m := make(map[string]string, len(vars))
	for _, v := range vars {
		m[v.Key] = v.Value
	}
	return func(k string) string {
		if v, ok := m[k]; ok {
			return v
		}
		return fallback(k)
	}
}
