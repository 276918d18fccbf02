package main

import "testing"

// TestClipKeepsRunes: the activity lines' clipped arguments are one line
// and never split a UTF-8 sequence (textcut's own tests cover every cut).
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
}
