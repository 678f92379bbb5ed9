package domain_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The guard of domain/tombstone.go: no code outside it
// reads the projects table by its own name or repeats the tombstone filter.
// A read names domain.LiveProjects, domain.DeletedProjects or
// domain.AllProjects, or goes through domain.SelectLiveProjects or
// Store.WithProject; writes (INSERT INTO, UPDATE, DELETE FROM projects) are
// not reads and stay as they are.
var (
	// A FROM or JOIN of the table itself, not after DELETE.
	readsProjects = regexp.MustCompile(`(?i)(^|[^a-z_])(from|join)\s+projects\b`)
	deleteFrom    = regexp.MustCompile(`(?i)delete\s+from\s+projects\b`)
	// The filter a read would otherwise repeat.
	tombstoneFilter = regexp.MustCompile(`(?i)deleted_at\s+is\s+(not\s+)?null`)
	// bun's table of domain.Project, by name.
	tableExprProjects = regexp.MustCompile(`TableExpr\("projects\b`)
	// A bun select whose model is a project, without the FROM item chosen.
	selectModel = regexp.MustCompile(`NewSelect\(\)\.Model\(&?([A-Za-z_][A-Za-z0-9_]*)\)`)
)

// projectDecl matches a declaration of name as a project (or a slice of
// them) in the lines before its use.
func projectDecl(name string) *regexp.Regexp {
	n := regexp.QuoteMeta(name)
	return regexp.MustCompile(`\b` + n + `\s*(:=\s*(new\((domain\.)?Project\)|&(domain\.)?Project\{)|\s+\[\]\*?(domain\.)?Project\b|\s+\*(domain\.)?Project\b)`)
}

func TestNoReadOfProjectsBypassesTheTombstone(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch rel {
			case "node_modules", ".git", "e2e", ".e2e":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || rel == filepath.Join("domain", "tombstone.go") {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		lines := strings.Split(string(raw), "\n")
		for i, line := range lines {
			code := line
			if c := strings.Index(code, "//"); c >= 0 && !strings.Contains(code[:c], "`") && !strings.Contains(code[:c], `"`) {
				code = code[:c] // a comment may name the table
			}
			where := rel + ":" + strconv.Itoa(i+1) + ": " + strings.TrimSpace(line)
			if readsProjects.MatchString(code) && !deleteFrom.MatchString(code) {
				problems = append(problems, where+" (a read of the projects table by its name)")
			}
			if tombstoneFilter.MatchString(code) {
				problems = append(problems, where+" (the tombstone filter repeated)")
			}
			if tableExprProjects.MatchString(code) {
				problems = append(problems, where+" (bun's TableExpr of projects)")
			}
			if m := selectModel.FindStringSubmatch(code); m != nil && !strings.Contains(code, "ModelTableExpr(") {
				decl := projectDecl(m[1])
				for j := i; j >= 0 && j >= i-60; j-- {
					if decl.MatchString(lines[j]) {
						problems = append(problems, where+" (a bun select of projects without domain.SelectLiveProjects)")
						break
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}
