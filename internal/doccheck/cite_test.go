package doccheck

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// citation is a Go comment's reference to a section of a doc:
// `docs/oracle.md, "Exhaustive exploration"`.
var citation = regexp.MustCompile(`docs/([a-z0-9-]+\.md),?\s*\(?"([^"]+)"`)

// TestCodeCitesDocSections: every section of docs/ a Go comment cites
// exists: a heading of that file that is the cited text or starts with it
// and goes on after a space or a colon ("Remaining time" for "Remaining
// time across a crash").
func TestCodeCitesDocSections(t *testing.T) {
	headings := map[string][]string{}
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, cg := range f.Comments {
			text := strings.Join(strings.Fields(cg.Text()), " ")
			for _, m := range citation.FindAllStringSubmatch(text, -1) {
				n++
				file, cited := m[1], m[2]
				hs, ok := headings[file]
				if !ok {
					doc, err := os.ReadFile(filepath.Join(root, "docs", file))
					if err != nil {
						t.Errorf("%s cites docs/%s, which does not exist", path, file)
					}
					hs = Headings(doc)
					headings[file] = hs
				}
				if hs != nil && !hasSection(hs, cited) {
					t.Errorf("%s cites docs/%s, %q: no such section", path, file, cited)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 20 {
		t.Fatalf("only %d citations found: the pattern no longer matches them", n)
	}
}

func hasSection(headings []string, cited string) bool {
	for _, h := range headings {
		if h == cited || strings.HasPrefix(h, cited+" ") || strings.HasPrefix(h, cited+":") {
			return true
		}
	}
	return false
}
