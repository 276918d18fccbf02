package oracle

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// The oracle reads every structured tool result twice: it parses it into a
// resultContent and checks that it is written canonically (canonicalResult).
// encoding/json's Decoder does both correctly but allocates a dozen times
// per field, and results are written on most of a generated world's
// non-chunk steps. What the kernel writes is almost always a flat object
// whose keys and strings need no escaping and whose numbers are integers;
// flatObject reads exactly that form without allocating, and anything else
// (escapes, whitespace, nesting, null, floats, …) goes to encoding/json as
// before. TestFlatResultMatchesEncodingJSON checks that both paths agree.

// flatObject reports whether content is a compact JSON object of at least
// one field, each key and string value made only of bytes JSON writes as
// they are (printable ASCII but '"' and '\\', and valid UTF-8 beyond it but
// U+2028 and U+2029), each other value an integer. It calls field for each
// field in order (val without its quotes) and stops with false as soon as
// field does.
func flatObject(content string, field func(key, val string, str bool) bool) bool {
	if len(content) < 2 || content[0] != '{' || content[len(content)-1] != '}' {
		return false
	}
	s := content[1 : len(content)-1]
	if s == "" {
		return false
	}
	for {
		key, rest, ok := plainString(s)
		if !ok || rest == "" || rest[0] != ':' {
			return false
		}
		s = rest[1:]
		var val string
		str := s != "" && s[0] == '"'
		if str {
			val, s, ok = plainString(s)
		} else {
			val, s, ok = integer(s)
		}
		if !ok || !field(key, val, str) {
			return false
		}
		if s == "" {
			return true
		}
		if s[0] != ',' {
			return false
		}
		s = s[1:]
	}
}

// plainString reads a quoted string at the start of s that needs no escape
// in either direction: encoding/json decodes it to its bytes and encodes
// those bytes back (HTML escaping off) to exactly it.
func plainString(s string) (val, rest string, ok bool) {
	if s == "" || s[0] != '"' {
		return "", "", false
	}
	for i := 1; i < len(s); {
		c := s[i]
		switch {
		case c == '"':
			return s[1:i], s[i+1:], true
		case c == '\\' || c < 0x20:
			return "", "", false
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
				return "", "", false
			}
			i += size
		}
	}
	return "", "", false
}

// integer reads a JSON integer at the start of s: -?(0|[1-9][0-9]*).
func integer(s string) (val, rest string, ok bool) {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i >= len(s) || s[i] < '0' || s[i] > '9':
		return "", "", false
	case s[i] == '0':
		i++
	default:
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	// A fraction, an exponent or a digit after a leading zero is left in
	// rest, where flatObject wants a comma or the end.
	return s[:i], s[i:], true
}

// canonicalFlat reports whether content is a flat object (flatObject) with
// no empty string: then encoding/json writes it back byte for byte, and
// canonicalResult has nothing to say.
func canonicalFlat(content string) bool {
	return flatObject(content, func(_, val string, str bool) bool { return !str || val != "" })
}

// parseResult fills r from content as json.Unmarshal does, reporting
// whether it parsed. r must be zero.
func parseResult(content string, r *resultContent) bool {
	var fast resultContent
	ok := flatObject(content, func(key, val string, str bool) bool {
		if key == "limit" {
			n, err := strconv.Atoi(val)
			fast.Limit = n
			return !str && err == nil
		}
		var p *string
		switch key {
		case "type":
			p = &fast.Type
		case "agent":
			p = &fast.Agent
		case "outcome":
			p = &fast.Outcome
		case "status":
			p = &fast.Status
		case "reason":
			p = &fast.Reason
		case "summary":
			p = &fast.Summary
		case "partial":
			p = &fast.Partial
		case "error":
			p = &fast.Error
		default:
			// encoding/json matches keys without regard to case
			// and skips unknown ones; leave both to it.
			return false
		}
		*p = val
		return str
	})
	if ok {
		*r = fast
		return true
	}
	return json.Unmarshal([]byte(content), r) == nil
}
