// Package termtext makes text that came from outside — a server's error,
// a model's answer, a tool's name or output, an MCP server's stderr — safe
// to show on a terminal. A terminal acts on control characters: ESC starts
// sequences that clear the screen, move the cursor, retitle the window or
// write to the clipboard; CR returns to the start of the line, so later
// text overwrites what the line said; bidirectional overrides make text
// read in another order than it runs. Such characters are shown escaped,
// as Go would quote them (\x1b, \r, \u202e), and so is every byte that is
// not UTF-8 (a lone 0x9b is CSI to an 8-bit terminal). Printable text,
// backslashes included, passes unchanged (docs/live.md, "How errors are
// shown"). The package is pure.
package termtext

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Line escapes every control character of s, newline and tab included:
// for a value shown inside one line (a tool's name, an error quoted on an
// activity line), which must not end it or forge the next.
func Line(s string) string { return escape(s, false) }

// Text escapes the control characters of s except newline and tab, and
// turns CRLF into LF: for text shown as it is laid out (a model's answer,
// a multi-line error).
func Text(s string) string { return escape(s, true) }

func escape(s string, layout bool) string {
	if clean(s, layout) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case layout && r == '\r' && i+1 < len(s) && s[i+1] == '\n':
			// CRLF: the LF alone lays the line out the same.
		case layout && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// clean reports whether s needs no escaping (the common case, without an
// allocation).
func clean(s string, layout bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 0x80:
			return cleanRunes(s[i:])
		case layout && (c == '\n' || c == '\t'):
		case c < 0x20 || c == 0x7f:
			return false
		}
	}
	return true
}

func cleanRunes(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r < 0x20 || r == 0x7f || unsafeRune(r) {
			// Controls below 0x20 are judged again by escape; a false
			// "unclean" only costs the copy.
			return false
		}
		i += size
	}
	return true
}

// unsafeRune reports the characters beyond ASCII a terminal acts on: the
// C1 controls (U+0080–U+009F: CSI, OSC, …), the line and paragraph
// separators, and the bidirectional marks, embeddings, overrides and
// isolates that reorder what is shown.
func unsafeRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r == 0x2028, r == 0x2029:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
