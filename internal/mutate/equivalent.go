package mutate

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Equivalent is one allow-list entry: a mutant that no test can kill
// because it does not change what the program does. Such mutants are
// reported as equivalent and left out of the score.
type Equivalent struct {
	File   string
	Line   int
	Col    int // 0: any column on the line
	Op     Operator
	Reason string
	// Source, if set, is the mutated line's text as the entry was written:
	// an entry whose line no longer holds it (the code moved) matches
	// nothing, rather than excusing whatever mutant moved onto that line.
	Source string
	At     string // where the entry is written (file:line), for messages
}

// Matches reports whether the entry names the mutant at file:line:col with
// operator op whose line reads before.
func (e Equivalent) Matches(file string, line, col int, op Operator, before string) bool {
	return e.File == file && e.Line == line && e.Op == op && (e.Col == 0 || e.Col == col) &&
		(e.Source == "" || e.Source == before)
}

// ReadEquivalents reads an allow-list file; a missing file is an empty
// list. Each non-blank line that does not start with # is
//
//	FILE:LINE[:COL] OPERATOR REASON... [| SOURCE LINE]
//
// with FILE relative to the module root; the reason is required (an entry
// without one cannot be reviewed). After the last " | ", the trimmed text
// of the mutated line, which pins the entry to that code (see Source).
func ReadEquivalents(path string) ([]Equivalent, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ParseEquivalents(path, b)
}

// ParseEquivalents parses allow-list text; name is used in errors.
func ParseEquivalents(name string, b []byte) ([]Equivalent, error) {
	var out []Equivalent
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		at := fmt.Sprintf("%s:%d", name, n)
		if len(fields) < 3 {
			return nil, fmt.Errorf("%s: want FILE:LINE[:COL] OPERATOR REASON, got %q", at, line)
		}
		parts := strings.Split(fields[0], ":")
		if len(parts) < 2 || len(parts) > 3 || parts[0] == "" {
			return nil, fmt.Errorf("%s: %q is not FILE:LINE[:COL]", at, fields[0])
		}
		e := Equivalent{File: parts[0], At: at}
		var err error
		if e.Line, err = strconv.Atoi(parts[1]); err != nil || e.Line < 1 {
			return nil, fmt.Errorf("%s: bad line number %q", at, parts[1])
		}
		if len(parts) == 3 {
			if e.Col, err = strconv.Atoi(parts[2]); err != nil || e.Col < 1 {
				return nil, fmt.Errorf("%s: bad column %q", at, parts[2])
			}
		}
		if e.Op, err = ParseOperator(fields[1]); err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		after := line[len(fields[0]):] // line is trimmed: fields[0] starts it
		rest := strings.TrimSpace(after[strings.Index(after, fields[1])+len(fields[1]):])
		if i := strings.LastIndex(" "+rest, " | "); i >= 0 { // " "+: a bare "| SOURCE" has no reason
			e.Source = strings.TrimSpace(rest[i+2:])
			rest = strings.TrimSpace(rest[:max(0, i-1)])
		}
		if rest == "" {
			return nil, fmt.Errorf("%s: want FILE:LINE[:COL] OPERATOR REASON, got %q", at, line)
		}
		e.Reason = rest
		out = append(out, e)
	}
	return out, sc.Err()
}
