package scenario

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// yamlText is a scenario file's bytes as the UTF-8 text yaml.v3 parses, or
// an error at the line and column of the first thing yaml.v3's reader
// would refuse without saying where: bytes that are not UTF-8 (or, after a
// UTF-16 byte order mark, not UTF-16) and characters YAML does not allow
// (control characters). Lines and columns count as yaml.v3 counts them: a
// column is a character, and \r\n, \r, \n, U+0085, U+2028 and U+2029 each
// end a line.
func yamlText(file string, data []byte) ([]byte, error) {
	text := data
	var order binary.ByteOrder
	switch {
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE}):
		order = binary.LittleEndian
	case bytes.HasPrefix(data, []byte{0xFE, 0xFF}):
		order = binary.BigEndian
	}
	if order != nil {
		// UTF-16 (what Windows tools write): yaml.v3 reads it too, but
		// says nothing of where it breaks, so it is read here.
		var why string
		if text, why = fromUTF16(data[2:], order); why != "" {
			line, col := position(text, len(text))
			return nil, &LoadError{File: file, Line: line, Col: col, Msg: why}
		}
	}
	for i := 0; i < len(text); {
		r, w := utf8.DecodeRune(text[i:])
		msg := ""
		switch {
		case r == utf8.RuneError && w <= 1:
			msg = fmt.Sprintf("not UTF-8: byte 0x%02X; a scenario file is UTF-8 text", text[i])
		case !yamlPrintable(r):
			msg = fmt.Sprintf("character %U is not allowed in YAML (control characters are not)", r)
		}
		if msg != "" {
			line, col := position(text, i)
			return nil, &LoadError{File: file, Line: line, Col: col, Msg: msg}
		}
		i += w
	}
	return text, nil
}

// fromUTF16 decodes UTF-16 text to UTF-8; on a broken code unit it returns
// the text before it and why.
func fromUTF16(b []byte, order binary.ByteOrder) ([]byte, string) {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i += 2 {
		if i+1 == len(b) {
			return out, "not UTF-16: an odd number of bytes"
		}
		r := rune(order.Uint16(b[i:]))
		if utf16.IsSurrogate(r) {
			pair := utf8.RuneError
			if i+3 < len(b) {
				pair = utf16.DecodeRune(r, rune(order.Uint16(b[i+2:])))
			}
			if pair == utf8.RuneError {
				return out, "not UTF-16: a surrogate without its pair"
			}
			r, i = pair, i+2
		}
		out = utf8.AppendRune(out, r)
	}
	return out, ""
}

// position is the line and column (from 1) of byte offset off in text, as
// yaml.v3 counts them (a UTF-8 byte order mark, which it skips, is not a
// column).
func position(text []byte, off int) (line, col int) {
	line, col = 1, 1
	i := 0
	if bytes.HasPrefix(text, []byte("\uFEFF")) {
		i = 3
	}
	for i < off {
		r, w := utf8.DecodeRune(text[i:])
		i += w
		switch {
		case r == '\r' && i < len(text) && text[i] == '\n':
			col++ // the \n after it ends the line
		case r == '\r' || r == '\n' || r == 0x85 || r == 0x2028 || r == 0x2029:
			line, col = line+1, 1
		default:
			col++
		}
	}
	return line, col
}

// yamlPrintable is YAML's set of allowed characters (yaml.v3's reader
// refuses the others).
func yamlPrintable(r rune) bool {
	switch {
	case r == 0x09 || r == 0x0A || r == 0x0D || r == 0x85:
	case r >= 0x20 && r <= 0x7E:
	case r >= 0xA0 && r <= 0xD7FF:
	case r >= 0xE000 && r <= 0xFFFD:
	case r >= 0x10000 && r <= 0x10FFFF:
	default:
		return false
	}
	return true
}
