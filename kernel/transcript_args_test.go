package kernel

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// A transcript directive is one line: a command, then positional words and
// key=value pairs. A word or a value is bare (up to the next space) or a Go
// string literal, "quoted" or `raw`, and a value may be a whole JSON object
// or array, so text with spaces reads as written:
//
//	chunk main "Hello, "
//	call main 0 id=c1 name=read_file args={"path":"README.md"}
//	call main 0 args=`"README.md"}`
//	call main 0 id=d1 name=delegate args={"task": "read it", "name": "reader"}
//
// datadriven's own argument parser splits on every space and knows no
// quotes, so the driver reads the directive's line from the file itself
// (TestData.Pos names it) and parses it here.

// directive is one parsed command line.
type directive struct {
	cmd  string
	args []string          // positional words, in order
	kv   map[string]string // key=value pairs
	keys []string          // keys in the order written
}

// parseDirective splits line into a directive.
func parseDirective(line string) (directive, error) {
	d := directive{kv: map[string]string{}}
	rest := strings.TrimSpace(line)
	for rest != "" {
		word, tail, err := nextWord(rest)
		if err != nil {
			return directive{}, err
		}
		rest = strings.TrimLeftFunc(tail, unicode.IsSpace)
		if d.cmd == "" {
			d.cmd = word.value
			continue
		}
		if word.key == "" {
			d.args = append(d.args, word.value)
			continue
		}
		if _, dup := d.kv[word.key]; dup {
			return directive{}, fmt.Errorf("%s= given twice", word.key)
		}
		d.kv[word.key] = word.value
		d.keys = append(d.keys, word.key)
	}
	if d.cmd == "" {
		return directive{}, fmt.Errorf("empty directive")
	}
	return d, nil
}

type word struct{ key, value string }

// nextWord reads one word (bare, quoted, or key=value) from the start of s.
func nextWord(s string) (word, string, error) {
	if s[0] == '"' || s[0] == '`' {
		v, tail, err := quoted(s)
		return word{value: v}, tail, err
	}
	end := strings.IndexFunc(s, unicode.IsSpace)
	if end < 0 {
		end = len(s)
	}
	bare := s[:end]
	key, val, isKV := strings.Cut(bare, "=")
	if !isKV || key == "" || strings.ContainsAny(key, "\"`") {
		return word{value: bare}, s[end:], nil
	}
	after := s[len(key)+1:]
	if after != "" && (after[0] == '"' || after[0] == '`') {
		v, tail, err := quoted(after)
		return word{key: key, value: v}, tail, err
	}
	if n := jsonValueLen(after); n > 0 {
		return word{key: key, value: after[:n]}, after[n:], nil
	}
	return word{key: key, value: val}, s[end:], nil
}

// jsonValueLen is the length of the JSON object or array s starts with,
// when it is balanced and ends the word, so arguments read as a model
// writes them, spaces and all: args={"task": "read it", "name": "reader"}.
// 0 when s does not start with one (a fragment such as {"glob": is bare).
func jsonValueLen(s string) int {
	if s == "" || (s[0] != '{' && s[0] != '[') {
		return 0
	}
	depth, inString := 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
			if depth == 0 {
				if i+1 < len(s) && !unicode.IsSpace(rune(s[i+1])) {
					return 0
				}
				return i + 1
			}
		}
	}
	return 0
}

// quoted reads a Go string literal at the start of s; it must end the word.
func quoted(s string) (string, string, error) {
	lit, err := strconv.QuotedPrefix(s)
	if err != nil {
		return "", "", fmt.Errorf("unterminated or invalid quoted string at %.20q", s)
	}
	v, err := strconv.Unquote(lit)
	if err != nil {
		return "", "", fmt.Errorf("quoted string %s: %w", lit, err)
	}
	tail := s[len(lit):]
	if tail != "" && !unicode.IsSpace(rune(tail[0])) {
		return "", "", fmt.Errorf("text right after the quoted string %s (put a space between words)", lit)
	}
	return v, tail, nil
}

// want checks the directive's shape: how many positional words it takes
// (min..max) and which keys it knows.
func (d directive) want(minArgs, maxArgs int, keys ...string) error {
	if len(d.args) < minArgs || len(d.args) > maxArgs {
		if minArgs == maxArgs {
			return fmt.Errorf("%s takes %d word(s), got %d: %q", d.cmd, minArgs, len(d.args), d.args)
		}
		return fmt.Errorf("%s takes %d to %d word(s), got %d: %q", d.cmd, minArgs, maxArgs, len(d.args), d.args)
	}
	for _, k := range d.keys {
		known := false
		for _, want := range keys {
			known = known || k == want
		}
		if !known {
			return fmt.Errorf("%s does not know %s= (it knows %v)", d.cmd, k, keys)
		}
	}
	return nil
}

// arg is positional word i, or "" when it was not given.
func (d directive) arg(i int) string {
	if i < len(d.args) {
		return d.args[i]
	}
	return ""
}
