package textcut

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestClip: cutting never splits a rune; text that is not UTF-8 is cut at n.
func TestClip(t *testing.T) {
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
		{"日本語", 7, "日本…"},
		{"\x80\x80\x80\x80\x80\x80", 3, "\x80\x80\x80…"},
		{"\xff\x80\x80\x80\x80", 2, "\xff\x80…"},
		{"héllo", 0, "…"},
	} {
		if got := Clip(tc.s, tc.n); got != tc.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

// TestPrefixEveryCut: at every budget, the prefix is valid UTF-8, within
// the budget, and loses less than one rune.
func TestPrefixEveryCut(t *testing.T) {
	s := strings.Repeat("aé日😀", 8)
	for n := range len(s) + 1 {
		got := Prefix(s, n)
		if !utf8.ValidString(got) || len(got) > n || len(got) < n-utf8.UTFMax+1 || !strings.HasPrefix(s, got) {
			t.Errorf("Prefix(%q, %d) = %q", s, n, got)
		}
	}
}

// TestTrimPartial: a buffer cut at every byte of a multi-byte text loses
// exactly the broken rune at the seam, and nothing when the seam is clean.
func TestTrimPartial(t *testing.T) {
	s := []byte("aé日😀b")
	for cut := 0; cut <= len(s); cut++ {
		head, tail := TrimPartialEnd(s[:cut]), TrimPartialStart(s[cut:])
		if !utf8.Valid(head) || !utf8.Valid(tail) {
			t.Fatalf("cut %d: %q | %q", cut, head, tail)
		}
		// What is dropped is at most the one rune split by the cut.
		if lost := len(s) - len(head) - len(tail); lost != 0 && (lost >= utf8.UTFMax+1 || utf8.RuneStart(s[cut])) {
			t.Fatalf("cut %d: lost %d bytes (%q | %q)", cut, lost, head, tail)
		}
		if utf8.Valid(s[:cut]) && (len(head) != cut || len(tail) != len(s)-cut) {
			t.Fatalf("cut %d at a rune boundary changed the text: %q | %q", cut, head, tail)
		}
	}
}
