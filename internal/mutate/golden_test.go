package mutate

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var hexRun = regexp.MustCompile(`^[0-9a-f]{16,}$`)

// isRecordedHash reports a literal that looks like a recorded hex digest
// (16+ hex digits, at least one a-f: a long decimal number is not one).
func isRecordedHash(s string) bool {
	return hexRun.MatchString(s) && strings.ContainsAny(s, "abcdef")
}

// goldenTests returns the Test functions under dir that compare recorded
// bytes: they name a .golden file, hold a recorded hex hash, or use the
// conventional -update flag that rewrites recorded output.
func goldenTests(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Body == nil {
				continue
			}
			golden := false
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.BasicLit:
					if s, err := strconv.Unquote(n.Value); err == nil && n.Kind == token.STRING &&
						(strings.Contains(s, ".golden") || isRecordedHash(s)) {
						golden = true
					}
				case *ast.Ident:
					if n.Name == "update" {
						golden = true
					}
				}
				return !golden
			})
			if golden {
				out = append(out, fn.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestSimGoldenTestsSkipped: every test under sim/ that compares recorded
// golden bytes is skipped by the simulator layer (SimGoldenSkip), and no
// other test is. The detector is checked on the golden tests that exist
// elsewhere, so it cannot silently find nothing.
func TestSimGoldenTestsSkipped(t *testing.T) {
	for dir, want := range map[string]string{"../../kernel/trace": "TestWriterGolden", "../simcli": "TestSimTableGolden"} {
		if got := goldenTests(t, dir); !slices.Contains(got, want) {
			t.Fatalf("the golden-test detector misses %s in %s (found %v)", want, dir, got)
		}
	}
	found := goldenTests(t, "../../sim")
	var skip *regexp.Regexp
	if SimGoldenSkip != "" {
		skip = regexp.MustCompile(SimGoldenSkip)
	}
	for _, name := range found {
		if skip == nil || !skip.MatchString(name) {
			t.Errorf("%s under sim/ compares golden bytes but the simulator layer runs it: add it to SimGoldenSkip", name)
		}
	}
	if skip != nil && len(found) == 0 {
		t.Errorf("SimGoldenSkip is %q but sim/ has no golden test: clear it", SimGoldenSkip)
	}
}
