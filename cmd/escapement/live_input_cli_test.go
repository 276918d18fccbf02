package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/internal/lineread"
)

// TestChatLongLineRefused: a script pipes three lines to chat, the second
// of 2 MB: the first and third are turns, the second is refused with a
// message naming it, and chat exits 2 — not 0 after one turn with the rest
// of the input dropped. A line of exactly the cap is sent whole.
func TestChatLongLineRefused(t *testing.T) {
	bin := buildBinary(t)
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Answer(fmt.Sprintf("heard %d bytes", len(r.Body.Last().Content)), 1)
	})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	p := startBinary(t, bin, srv, dir, "chat", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir)
	go func() { // owned: ends when its writes are done or the process's stdin closes
		_, _ = io.WriteString(p.stdin, "first\n"+strings.Repeat("x", 2_000_000)+"\n"+strings.Repeat("y", lineread.MaxLine)+"\nthird\n")
		p.stdin.Close()
	}()
	if code := p.wait(t); code != exitUsage {
		t.Fatalf("exit %d, want 2\nstdout: %s\nstderr: %s", code, p.stdout, p.stderr)
	}
	var heard []int
	for _, r := range srv.Requests() {
		heard = append(heard, len(r.Body.Last().Content))
	}
	if want := []int{len("first"), lineread.MaxLine, len("third")}; !slices.Equal(heard, want) {
		t.Errorf("the model was sent messages of %v bytes, want %v", heard, want)
	}
	mustHave(t, p.stderr.String(), "stdin line 2: 2000000 bytes, over the 1 MiB a line may hold; it was not sent (the lines after it are read)",
		"1 line(s) of input were over the 1 MiB a line may hold and were not sent")
}
