package termtext

import (
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"
)

func TestEscape(t *testing.T) {
	for _, tc := range []struct{ in, line, text string }{
		{"list_dir", "list_dir", "list_dir"},
		{"naïve — ünïcode 日本 \\path", "naïve — ünïcode 日本 \\path", "naïve — ünïcode 日本 \\path"},
		{"\x1b[2J\x1b]0;pwned\x07", `\x1b[2J\x1b]0;pwned\x07`, `\x1b[2J\x1b]0;pwned\x07`},
		{"shell rm -rf /\rlist_dir", `shell rm -rf /\rlist_dir`, `shell rm -rf /\rlist_dir`},
		{"a\nb\tc\r\nd", `a\nb\tc\r\nd`, "a\nb\tc\nd"},
		{"bad \xff\x9b byte", `bad \xff\x9b byte`, `bad \xff\x9b byte`},
		{"c1 \u009b31m and bidi \u202eevil\u2066", `c1 \u009b31m and bidi \u202eevil\u2066`, `c1 \u009b31m and bidi \u202eevil\u2066`},
		{"del\x7f", `del\x7f`, `del\x7f`},
	} {
		if got := Line(tc.in); got != tc.line {
			t.Errorf("Line(%q) = %q, want %q", tc.in, got, tc.line)
		}
		if got := Text(tc.in); got != tc.text {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.text)
		}
	}
}

// TestEscapeProperty: whatever the input, Line's output is valid UTF-8
// with no control character and no character a terminal acts on; Text's
// keeps newlines and tabs and nothing else of the kind; input without any
// such character is returned unchanged.
func TestEscapeProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := rapid.OneOf(
			rapid.String(),
			rapid.StringOf(rapid.SampledFrom([]rune{'a', '\\', '\x1b', '\r', '\n', '\t', 0x9b, 0x202e, 'é', 0x7f})),
			rapid.Map(rapid.SliceOf(rapid.Byte()), func(b []byte) string { return string(b) }),
		).Draw(t, "in")
		for name, out := range map[string]string{"Line": Line(in), "Text": Text(in)} {
			if !utf8.ValidString(out) {
				t.Fatalf("%s(%q) = %q: not UTF-8", name, in, out)
			}
			for _, r := range out {
				if (r < 0x20 && !(name == "Text" && (r == '\n' || r == '\t'))) || r == 0x7f || unsafeRune(r) {
					t.Fatalf("%s(%q) = %q holds %U", name, in, out, r)
				}
			}
		}
		if utf8.ValidString(in) && !strings.ContainsFunc(in, func(r rune) bool { return r < 0x20 || r == 0x7f || unsafeRune(r) }) && Line(in) != in {
			t.Fatalf("Line changed clean text %q to %q", in, Line(in))
		}
	})
}
