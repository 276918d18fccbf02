package openai

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestTruncateRuneBoundary: cutting error text never splits a rune.
func TestTruncateRuneBoundary(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 5, "hello"},
		{"hello", 3, "hel…"},
		{"héllo", 2, "h…"}, // é is bytes 1-2
		{"héllo", 3, "hé…"},
		{"a😀b", 2, "a…"}, // 😀 is bytes 1-4
		{"a😀b", 4, "a…"},
		{"a😀b", 5, "a😀…"},
		{"日本語", 4, "日…"},
		{"\x80\x80\x80\x80\x80\x80", 3, "\x80\x80\x80…"}, // not UTF-8: cut at n
		{"héllo", 0, "…"},
	} {
		if got := truncate(tc.s, tc.n); got != tc.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
	s := strings.Repeat("aé日😀", 8)
	for n := range len(s) + 1 {
		got := runePrefix(s, n)
		if !utf8.ValidString(got) || len(got) > n || len(got) < n-utf8.UTFMax+1 || !strings.HasPrefix(s, got) {
			t.Errorf("runePrefix(%q, %d) = %q", s, n, got)
		}
	}
}
