// Package doccheck checks the project's Markdown documentation: every
// relative link resolves to a file of the repository, and every #anchor to a
// heading of the file it names, by the rules GitHub uses for heading anchors
// (README.md, "Documentation"). Links with a scheme (https:, mailto:) are
// left alone: they are not fetched.
//
// Markdown is parsed by goldmark (CommonMark with GitHub's tables), so a link
// in a code span or a fenced block is text, as on GitHub.
package doccheck

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"
)

// Problem is one link that does not resolve.
type Problem struct {
	File   string // the Markdown file holding the link, relative to the root
	Line   int    // 1-based
	Target string // the link's destination as written
	Reason string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: link %q: %s", p.File, p.Line, p.Target, p.Reason)
}

// Link is one link or image of a Markdown document.
type Link struct {
	Line   int
	Target string
}

var markdown = goldmark.New(goldmark.WithExtensions(extension.Table))

// Links returns every link and image destination of a Markdown document, in
// order, with the line it starts on.
func Links(src []byte) []Link {
	var links []Link
	doc := markdown.Parser().Parse(text.NewReader(src))
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		var dest []byte
		switch l := n.(type) {
		case *ast.Link:
			dest = l.Destination
		case *ast.Image:
			dest = l.Destination
		default:
			return ast.WalkContinue, nil
		}
		links = append(links, Link{Line: lineOf(src, n), Target: string(dest)})
		return ast.WalkContinue, nil
	})
	return links
}

// lineOf is the 1-based line a node starts on: its own position, else that of
// its first text, else its block's first line.
func lineOf(src []byte, n ast.Node) int {
	off := n.Pos()
	for c := n.FirstChild(); off < 0 && c != nil; c = c.FirstChild() {
		if t, ok := c.(*ast.Text); ok {
			off = t.Segment.Start
		}
	}
	for p := n; off < 0 && p != nil; p = p.Parent() {
		if p.Type() == ast.TypeBlock && p.Lines().Len() > 0 {
			off = p.Lines().At(0).Start
		}
	}
	if off < 0 {
		return 1
	}
	return bytes.Count(src[:min(off, len(src))], []byte("\n")) + 1
}

// Headings returns the text of a Markdown document's headings, in order,
// as rendered (code spans and links without their markup).
func Headings(src []byte) []string {
	var hs []string
	doc := markdown.Parser().Parse(text.NewReader(src))
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		h, ok := n.(*ast.Heading)
		if !entering || !ok {
			return ast.WalkContinue, nil
		}
		hs = append(hs, plainText(src, h))
		return ast.WalkSkipChildren, nil
	})
	return hs
}

// Anchors returns the anchors GitHub gives a Markdown document's headings:
// each heading's Slug, and slug-1, slug-2, … for later headings of the same
// slug.
func Anchors(src []byte) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, h := range Headings(src) {
		slug := Slug(h)
		if k := seen[slug]; k > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, k)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

// plainText is a heading's text as rendered: the text of its code spans,
// links and emphasis without their markup; raw HTML left out.
func plainText(src []byte, n ast.Node) string {
	var b strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch t := c.(type) {
		case *ast.Text:
			b.Write(t.Value(src))
			if t.SoftLineBreak() || t.HardLineBreak() {
				b.WriteByte(' ')
			}
		case *ast.String:
			b.Write(t.Value)
		case *ast.RawHTML:
		default:
			b.WriteString(plainText(src, c))
		}
	}
	return b.String()
}

// Slug is GitHub's anchor for a heading's text: lower case, every character
// that is not a letter, a digit, a mark, '-', '_' or a space dropped, each
// space made a '-'.
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Check checks the links of the Markdown files named (relative to root): a
// relative link must name a file or directory inside root, and its
// #fragment, when the target is a Markdown file (or the link is the bare
// #fragment of its own file), one of the target's Anchors.
func Check(root string, files []string) ([]Problem, error) {
	var problems []Problem
	anchors := map[string]map[string]bool{} // by path relative to root
	anchorsOf := func(rel string) (map[string]bool, error) {
		if a, ok := anchors[rel]; ok {
			return a, nil
		}
		src, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return nil, err
		}
		anchors[rel] = Anchors(src)
		return anchors[rel], nil
	}
	for _, file := range files {
		file = filepath.ToSlash(filepath.Clean(file))
		src, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			return nil, fmt.Errorf("doccheck: %w", err)
		}
		for _, l := range Links(src) {
			target, reason := resolve(root, file, l.Target)
			if reason == "" && target.fragment != "" && strings.HasSuffix(target.path, ".md") {
				a, err := anchorsOf(target.path)
				if err != nil {
					return nil, fmt.Errorf("doccheck: %s:%d: %w", file, l.Line, err)
				}
				if !a[target.fragment] {
					reason = fmt.Sprintf("%s has no heading with the anchor #%s", target.path, target.fragment)
				}
			}
			if reason != "" {
				problems = append(problems, Problem{File: file, Line: l.Line, Target: l.Target, Reason: reason})
			}
		}
	}
	return problems, nil
}

type resolved struct {
	path     string // relative to root, slash-separated; "" for an external link
	fragment string
}

// resolve finds the file a link of file names; the reason is why it does not
// resolve ("" when it does, and for an external link).
func resolve(root, file, dest string) (resolved, string) {
	u, err := url.Parse(dest)
	if err != nil {
		return resolved{}, fmt.Sprintf("not a URL: %v", err)
	}
	if u.Scheme != "" || u.Host != "" {
		return resolved{}, ""
	}
	rel := file
	if u.Path != "" {
		base := filepath.Dir(file)
		if strings.HasPrefix(u.Path, "/") {
			base = "."
		}
		rel = filepath.ToSlash(filepath.Clean(filepath.Join(base, u.Path)))
	}
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return resolved{}, "leaves the repository"
	}
	if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
		return resolved{}, fmt.Sprintf("%s does not exist", rel)
	}
	return resolved{path: rel, fragment: u.Fragment}, ""
}
