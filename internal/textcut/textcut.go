// Package textcut cuts text to a byte budget without splitting a UTF-8
// sequence: error details, tool output, activity lines and violation quotes
// are all cut this way, so nothing escapement prints or sends a model ends in
// half a character.
package textcut

import "unicode/utf8"

// Prefix is the longest prefix of s of at most n bytes that does not end
// inside a UTF-8 sequence. Text that is not UTF-8 there is cut at n.
func Prefix(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for i := n; i >= 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if utf8.FullRuneInString(s[i:n]) {
				return s[:n] // the rune before the cut is whole (or invalid)
			}
			return s[:i]
		}
	}
	return s[:max(n, 0)]
}

// Clip is s when it fits in n bytes, else its Prefix with "…" marking the
// cut (the mark is not counted in n).
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Prefix(s, n) + "…"
}

// TrimPartialEnd drops an incomplete UTF-8 sequence from the end of b (a
// buffer cut at a byte offset, like the head of a tool's output).
func TrimPartialEnd(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i > len(b)-1-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			return b
		}
	}
	return b
}

// TrimPartialStart drops the continuation bytes of a rune cut off at the
// start of b (the tail of a tool's output).
func TrimPartialStart(b []byte) []byte {
	for i := 0; i < len(b) && i < utf8.UTFMax; i++ {
		if utf8.RuneStart(b[i]) {
			return b[i:]
		}
	}
	return b
}
