package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/internal/textcut"
)

// Bounds on what one call reads (a limit on everything).
const (
	maxGrepMatches  = 200
	maxGrepFileSize = 4 << 20
	maxGrepLine     = 300
	maxDirEntries   = 1000
)

// open opens p (a path from the model) in the workspace; see openRel.
func (b *Box) open(p string, flag int, perm fs.FileMode) (f *os.File, rel string, st fs.FileInfo, err error) {
	if rel, err = b.rel(p); err != nil {
		return nil, rel, nil, err
	}
	f, st, err = b.openRel(rel, p, flag, perm)
	return f, rel, st, err
}

// openRel opens rel (clean, relative to the workspace) through the root,
// which resolves and polices symlinks, and refuses what is neither a
// regular file nor a directory, and files of a kernel pseudo-filesystem.
// The open itself does not block: a FIFO or a device would hold the call
// past its cancel. Errors name the file as p.
func (b *Box) openRel(rel, p string, flag int, perm fs.FileMode) (*os.File, fs.FileInfo, error) {
	f, err := b.root.OpenFile(rel, flag|syscall.O_NONBLOCK, perm)
	if err != nil {
		return nil, nil, b.fsErr(p, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, b.fsErr(p, err)
	}
	if !st.Mode().IsRegular() && !st.IsDir() {
		f.Close()
		return nil, nil, fmt.Errorf("%s is not a regular file or a directory (%s)", p, st.Mode().Type())
	}
	if fsys := pseudoFS(f); fsys != "" {
		f.Close()
		return nil, nil, fmt.Errorf("refused: %s is on %s, a kernel pseudo-filesystem (process environments, kernel state)", p, fsys)
	}
	return f, st, nil
}

func (b *Box) readFile(p string) (string, error) {
	f, _, st, err := b.open(p, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if st.IsDir() {
		return "", fmt.Errorf("%s is a directory (use list_dir)", p)
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(max(b.cfg.OutputLimit, binarySniff))+1))
	if err != nil {
		return "", b.fsErr(p, err)
	}
	if binary(data) {
		return fmt.Sprintf("binary file, %d bytes, not shown", st.Size()), nil
	}
	if len(data) > b.cfg.OutputLimit {
		head := textcut.Prefix(string(data), b.cfg.OutputLimit)
		return fmt.Sprintf("%s\n[truncated: %s is %d bytes; showing the first %d]", head, p, st.Size(), len(head)), nil
	}
	if len(data) == 0 {
		return "(empty file)", nil
	}
	return string(data), nil
}

func (b *Box) writeFile(p, content string) (string, error) {
	rel, err := b.rel(p)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return "", fmt.Errorf("%q is the workspace itself, not a file", p)
	}
	if dir := filepath.Dir(rel); dir != "." {
		if err := b.root.MkdirAll(dir, 0o755); err != nil {
			return "", b.fsErr(p, err)
		}
	}
	f, _, st, err := b.open(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return "", err
	}
	if st.IsDir() {
		f.Close()
		return "", fmt.Errorf("%s is a directory", p)
	}
	_, err = f.WriteString(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", b.fsErr(p, err)
	}
	return fmt.Sprintf("wrote %d bytes to %s", len(content), rel), nil
}

func (b *Box) listDir(p string) (string, error) {
	f, rel, st, err := b.open(p, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		f.Close()
		return "", fmt.Errorf("%s is not a directory (use read_file)", p)
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return "", b.fsErr(p, err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	var sb strings.Builder
	for i, e := range entries {
		if i == maxDirEntries {
			fmt.Fprintf(&sb, "[%d more entries not shown]\n", len(entries)-i)
			break
		}
		name := e.Name()
		switch {
		case e.IsDir():
			sb.WriteString(name + "/\n")
		case e.Type()&fs.ModeSymlink != 0:
			target, _ := b.root.Readlink(path.Join(filepath.ToSlash(rel), name))
			fmt.Fprintf(&sb, "%s -> %s\n", name, target)
		default:
			size := int64(-1)
			if info, err := e.Info(); err == nil {
				size = info.Size()
			}
			fmt.Fprintf(&sb, "%s (%d bytes)\n", name, size)
		}
	}
	if sb.Len() == 0 {
		return "(empty directory)", nil
	}
	return capText(sb.String(), b.cfg.OutputLimit), nil
}

// grep searches a file or a directory tree (skipping .git, binary and very
// large files) for an RE2 pattern and prints path:line: text.
func (b *Box) grep(ctx context.Context, pattern, p string) (string, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return "", fmt.Errorf("bad pattern: %v", err)
	}
	f, rel, _, err := b.open(p, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	f.Close()
	fsys := b.root.FS()
	var sb strings.Builder
	matches, skipped := 0, 0
	walkErr := fs.WalkDir(fsys, filepath.ToSlash(rel), func(name string, d fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			skipped++
			return nil
		}
		if d.IsDir() {
			if d.Name() == ".git" && name != filepath.ToSlash(rel) {
				return fs.SkipDir
			}
			// Opened like a file, so that a procfs mounted inside the
			// workspace is skipped whole, not walked file by file.
			dir, _, err := b.openRel(filepath.FromSlash(name), name, os.O_RDONLY, 0)
			if err != nil {
				skipped++
				return fs.SkipDir
			}
			dir.Close()
			return nil
		}
		if !d.Type().IsRegular() {
			return nil // symlinks are not followed
		}
		n, err := b.grepFile(name, re, &sb, maxGrepMatches-matches)
		if err != nil {
			skipped++
		}
		matches += n
		if matches >= maxGrepMatches {
			fmt.Fprintf(&sb, "[stopped after %d matches]\n", maxGrepMatches)
			return fs.SkipAll
		}
		return nil
	})
	if walkErr != nil {
		return "", walkErr
	}
	if matches == 0 {
		sb.WriteString("no matches\n")
	}
	if skipped > 0 {
		if skipped == 1 {
			sb.WriteString("[1 unreadable file or directory skipped]\n")
		} else {
			fmt.Fprintf(&sb, "[%d unreadable files or directories skipped]\n", skipped)
		}
	}
	return capText(sb.String(), b.cfg.OutputLimit), nil
}

// grepFile prints the matches of re in one walked file (name is slash-
// separated, relative to the workspace). The file is opened like every
// other: it may have been swapped for a FIFO since the walk saw it.
func (b *Box) grepFile(name string, re *regexp.Regexp, out *strings.Builder, budget int) (int, error) {
	if b.grepOpenHook != nil {
		b.grepOpenHook(name)
	}
	f, st, err := b.openRel(filepath.FromSlash(name), name, os.O_RDONLY, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if !st.Mode().IsRegular() || st.Size() > maxGrepFileSize {
		return 0, nil
	}
	br := bufio.NewReader(f)
	if head, _ := br.Peek(binarySniff); binary(head) {
		return 0, nil
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n, line := 0, 0
	for sc.Scan() && n < budget {
		line++
		if re.Match(sc.Bytes()) {
			n++
			fmt.Fprintf(out, "%s:%d: %s\n", name, line, textcut.Clip(sc.Text(), maxGrepLine))
		}
	}
	return n, sc.Err()
}

// binarySniff is how much of a file's start decides whether it is binary:
// git's 8000 bytes (buffer_is_binary).
const binarySniff = 8000

// binary reports whether a file whose first bytes are head is binary: a NUL
// byte among the first binarySniff bytes (git's test), or more than one in
// ten of them outside valid UTF-8 (random or compressed data that happens
// to hold no NUL). Text in a legacy 8-bit encoding (Latin-1) has far fewer
// and is shown, its odd bytes as U+FFFD.
func binary(head []byte) bool {
	head = head[:min(len(head), binarySniff)]
	if bytes.IndexByte(head, 0) >= 0 {
		return true
	}
	invalid := 0
	for i := 0; i < len(head); {
		r, size := utf8.DecodeRune(head[i:])
		if r == utf8.RuneError && size == 1 && len(head)-i >= utf8.UTFMax {
			invalid++ // a rune cut by the sniff's end is not invalid
		}
		i += size
	}
	return invalid*10 > len(head)
}

// capText keeps the head of an over-long result and says how much was cut.
func capText(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	head := textcut.Prefix(s, limit)
	return head + fmt.Sprintf("\n[truncated: %d more bytes]", len(s)-len(head))
}

// Specs are the JSON Schema function definitions the model sees: the file
// tools, shell when it is allowed, and the kernel's delegate tool.
func (b *Box) Specs() []ports.ToolSpec {
	specs := []ports.ToolSpec{
		{Name: "read_file", Description: "Read a text file of the workspace. Paths are relative to the workspace root.",
			Parameters: schema(`{"path":{"type":"string","description":"file path relative to the workspace"}}`, "path")},
		{Name: "write_file", Description: "Create or overwrite a file of the workspace (parent directories are created).",
			Parameters: schema(`{"path":{"type":"string","description":"file path relative to the workspace"},"content":{"type":"string","description":"the whole new content"}}`, "path", "content")},
		{Name: "list_dir", Description: "List a directory of the workspace: dirs end in /, files show their size.",
			Parameters: schema(`{"path":{"type":"string","description":"directory relative to the workspace; \".\" for its root"}}`, "path")},
		{Name: "grep", Description: "Search files under a path for a regular expression (RE2 syntax); prints path:line: text.",
			Parameters: schema(`{"pattern":{"type":"string","description":"RE2 regular expression"},"path":{"type":"string","description":"file or directory relative to the workspace; \".\" for all"}}`, "pattern", "path")},
	}
	if b.cfg.AllowShell {
		specs = append(specs, ports.ToolSpec{Name: "shell", Description: "Run a bash command in the workspace directory (stdin is closed; output is capped). Reports exit status and duration.",
			Parameters: schema(`{"command":{"type":"string","description":"the command line for bash -c"}}`, "command")})
	}
	return append(specs, ports.DelegateSpec(b.cfg.DelegateTool))
}

// Idempotent names the tools that only read — running one twice has the
// effect of running it once — so a recovery after a crash may run them
// again (kernel.Config.Idempotent, docs/durable.md); every other tool's
// call cut off by a crash is answered tool_lost instead.
func (b *Box) Idempotent() []string { return []string{"read_file", "list_dir", "grep"} }

// ReadOnly names the tools that change nothing: every tool but write_file
// and shell (the CLI's --ask writes asks for those, docs/live.md).
func (b *Box) ReadOnly() []string { return b.Idempotent() }

func schema(properties string, required ...string) json.RawMessage {
	req, _ := json.Marshal(required)
	return json.RawMessage(`{"type":"object","properties":` + properties + `,"required":` + string(req) + `,"additionalProperties":false}`)
}

func (b *Box) names() []string {
	var names []string
	for _, s := range b.Specs() {
		if s.Name != b.cfg.DelegateTool {
			names = append(names, s.Name)
		}
	}
	return names
}
