package tools

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/escapement/escapement/kernel"
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

// TestReadFileBinary: a binary file used to come back as 63 KiB of U+FFFD.
// A NUL byte in the first 8000 bytes (git's test), or more than one byte
// in ten of them outside UTF-8, makes read_file say what it is instead;
// Latin-1 text is still shown.
func TestReadFileBinary(t *testing.T) {
	b, dir := newBox(t, false)
	latin1 := "caf\xe9 au lait, cr\xe8me br\xfbl\xe9e, and a lot of plain ASCII text around them\n"
	for name, tc := range map[string]struct {
		content string
		want    string
	}{
		"image.png":  {"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + strings.Repeat("\xff\x10", 5000), "binary file, 10016 bytes, not shown"},
		"late-nul":   {strings.Repeat("a", 7999) + "\x00", "binary file, 8000 bytes, not shown"},
		"noise.bin":  {strings.Repeat("\xfe\xff\x80", 3000), "binary file, 9000 bytes, not shown"},
		"latin1.txt": {latin1, latin1},
		"after-8000": {strings.Repeat("a", 8000) + "\x00", strings.Repeat("a", 1024)},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		r := run(t, b, "read_file", map[string]string{"path": name})
		if r.Status != kernel.ToolOK || !strings.HasPrefix(r.Content, tc.want) {
			t.Errorf("read_file %s: %.120q, want %.120q", name, r.Content, tc.want)
		}
	}
}

// TestHeadTailKeepsExactlyLimit: the shell's kept output is exactly limit
// bytes of ASCII — the first half and the last limit-half — however the
// writes are cut; never more (a tail over its cap once passed every test).
func TestHeadTailKeepsExactlyLimit(t *testing.T) {
	for limit := 2; limit <= 41; limit++ {
		for _, chunk := range []int{1, 3, limit / 2, limit, 2*limit + 1} {
			h := &headTail{limit: limit}
			var all []byte
			for i := 0; len(all) < 3*limit+7; i++ {
				c := bytes.Repeat([]byte{byte('a' + i%26)}, max(1, chunk))
				all = append(all, c...)
				h.Write(c)
			}
			half := limit / 2
			if string(h.head) != string(all[:half]) || string(h.tail) != string(all[len(all)-(limit-half):]) ||
				h.dropped != int64(len(all)-limit) {
				t.Fatalf("limit %d chunk %d: head %d, tail %d bytes, dropped %d of %d", limit, chunk, len(h.head), len(h.tail), h.dropped, len(all))
			}
			note := fmt.Sprintf("\n[… %d bytes of output not shown …]\n", h.dropped)
			if got := h.String(); got != string(all[:half])+note+string(all[len(all)-(limit-half):]) {
				t.Fatalf("limit %d chunk %d: %q", limit, chunk, got)
			}
		}
	}
	// Through the shell: 5000 bytes and "END" under a 1024-byte limit keep
	// 512 + 512 bytes.
	b, _ := newBox(t, true)
	r := run(t, b, "shell", map[string]string{"command": "head -c 5000 /dev/zero | tr '\\0' a; printf END"})
	_, output, _ := strings.Cut(r.Content, "output:\n")
	want := strings.Repeat("a", 512) + "\n[… 3979 bytes of output not shown …]\n" + strings.Repeat("a", 509) + "END\n"
	if output != want {
		t.Errorf("shell output %d bytes: %q…, want %d bytes", len(output), output[:min(len(output), 80)], len(want))
	}
}
