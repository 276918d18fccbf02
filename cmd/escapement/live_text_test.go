package main

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestClipKeepsRunes: the activity lines' clipped arguments never split a
// UTF-8 sequence.
func TestClipKeepsRunes(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"a\nb\nc", 10, "a b c"},
		{"hello", 3, "hel…"},
		{"héllo", 2, "h…"},
		{"a😀b", 3, "a…"},
		{"a😀b", 5, "a😀…"},
		{"日本語", 7, "日本…"},
		{"\xff\x80\x80\x80\x80", 2, "\xff\x80…"},
	} {
		if got := clip(tc.s, tc.n); got != tc.want {
			t.Errorf("clip(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
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
