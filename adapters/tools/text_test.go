package tools

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestCutsKeepRunes: capped results and the shell's head/tail output never
// split a UTF-8 sequence (textcut's own tests cover the cut itself).
func TestCutsKeepRunes(t *testing.T) {
	for _, tc := range []struct {
		name, got, want string
	}{
		{"capText in 日", capText("日本語", 4), "日\n[truncated: 6 more bytes]"},
		{"capText fits", capText("日本語", 9), "日本語"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, tc.got, tc.want)
		}
	}
	s := strings.Repeat("aé日😀", 8)
	// read_file: a 1024-byte cap inside an é shows 1023 bytes.
	b, _ := newBox(t, false)
	run(t, b, "write_file", map[string]string{"path": "accents.txt", "content": "a" + strings.Repeat("é", 600)})
	if r := run(t, b, "read_file", map[string]string{"path": "accents.txt"}); !utf8.ValidString(r.Content) ||
		!strings.HasSuffix(r.Content, "é\n[truncated: accents.txt is 1201 bytes; showing the first 1023]") {
		t.Errorf("read_file: %q", r.Content[max(0, len(r.Content)-80):])
	}
	// headTail: every limit puts its seams at a different byte of the runes.
	for limit := 8; limit < 24; limit++ {
		h := &headTail{limit: limit}
		for _, c := range []string{s[:7], s[7:20], s[20:]} {
			fmt.Fprint(h, c)
		}
		got := h.String()
		if !utf8.ValidString(got) {
			t.Errorf("headTail limit %d: %q is not UTF-8", limit, got)
		}
		var shown, dropped int
		if _, err := fmt.Sscanf(got[strings.Index(got, "\n[…"):], "\n[… %d bytes", &dropped); err != nil {
			t.Fatalf("headTail limit %d: %q: %v", limit, got, err)
		}
		shown = len(got) - len(fmt.Sprintf("\n[… %d bytes of output not shown …]\n", dropped))
		if shown+dropped != len(s) {
			t.Errorf("headTail limit %d: %d shown + %d dropped != %d bytes", limit, shown, dropped, len(s))
		}
	}
}
