package doccheck

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// root is the repository, from this package's directory.
const root = "../.."

// readmeMaxLines bounds the README: what escapement is, the quick start, one
// example of each kind, the layout and links; the rest belongs in docs/.
const readmeMaxLines = 450

// docFiles are README.md and every Markdown file under docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.ToSlash(rel))
	}
	if len(files) < 5 {
		t.Fatalf("found only %v: the docs moved?", files)
	}
	return files
}

// TestDocsLinksResolve: every relative link of README.md and docs/*.md names
// a file that exists, and its #anchor a heading of that file.
func TestDocsLinksResolve(t *testing.T) {
	files := docFiles(t)
	problems, err := Check(root, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	n := 0
	for _, f := range files {
		src, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		n += len(Links(src))
	}
	if n < 50 {
		t.Fatalf("only %d links in %d files: the parser no longer finds them", n, len(files))
	}
}

// TestReadmeIsShort: the README stays a page people finish.
func TestReadmeIsShort(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(src, []byte("\n")); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail to docs/", n, readmeMaxLines)
	}
}
