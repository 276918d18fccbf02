package redact_test

import (
	"strings"
	"testing"

	"github.com/escapement/escapement/internal/redact"
	"pgregory.net/rapid"
)

// chunks cuts s into pieces of 0 to 8 bytes (anywhere, even inside a UTF-8
// sequence: a server may).
func chunks(t *rapid.T, s string) []string {
	var out []string
	for len(s) > 0 {
		n := min(rapid.IntRange(0, 8).Draw(t, "chunk"), len(s))
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// streamed releases pieces through a Stream and returns everything it let
// out, the flush included, and the most it ever held.
func streamed(r *redact.Redactor, pieces []string) (string, int) {
	s := r.Stream()
	var b strings.Builder
	held := 0
	for _, p := range pieces {
		b.WriteString(s.Write(p))
		held = max(held, s.Held())
	}
	b.WriteString(s.Flush())
	return b.String(), held
}

// chunkByChunk is the broken redaction the Stream replaces: each piece
// redacted on its own.
func chunkByChunk(r *redact.Redactor, pieces []string) string {
	var b strings.Builder
	for _, p := range pieces {
		b.WriteString(r.Redact(p))
	}
	return b.String()
}

// TestStreamNoRunSurvives: however a text with pieces of the key is cut
// into chunks, what the stream releases holds no MinRun-byte run of the
// key; a text without key material comes out whole and unchanged; and the
// stream never holds more than a run's worth at its end.
func TestStreamNoRunSurvives(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := key(t)
		r := redact.New(k)
		in := withPieces(t, k)
		out, held := streamed(r, chunks(t, in))
		if run, ok := leaks(out, k, redact.MinRun); ok {
			t.Fatalf("run %q of key %q survives in %q", run, k, out)
		}
		if _, ok := leaks(in, k, redact.MinRun); !ok && out != in {
			t.Fatalf("clean text %q came out as %q", in, out)
		}
		if held > len(in) || held > 4<<10+redact.MinRun {
			t.Fatalf("held %d bytes", held)
		}
	})
}

// TestStreamCatchesChunkByChunk: the property above fails for the redaction
// the stream replaces (each chunk redacted alone), on a key split in two.
func TestStreamCatchesChunkByChunk(t *testing.T) {
	const k = "sk-proj-Zq8Lw3Rt5Yu7Io9Pa1Sd3Fg5Hj7Kl9"
	r := redact.New(k)
	pieces := []string{"the key is " + k[:10], k[10:20], k[20:] + ", done"}
	if _, ok := leaks(chunkByChunk(r, pieces), k, redact.MinRun); !ok {
		t.Fatal("chunk by chunk redaction did not leak: the example lost its teeth")
	}
	out, _ := streamed(r, pieces)
	if out != "the key is [redacted], done" {
		t.Fatalf("stream: %q", out)
	}
}

// TestStreamHoldsLittle: ordinary text is released as it comes, but for a
// tail of fewer than MinRun bytes that could start the key.
func TestStreamHoldsLittle(t *testing.T) {
	r := redact.New("sk-proj-Zq8Lw3Rt5Yu7Io9Pa1Sd3Fg5Hj7Kl9")
	s := r.Stream()
	if got := s.Write("Hello there. "); got != "Hello there. " {
		t.Errorf("released %q", got)
	}
	if got := s.Write("It is sk-pr"); got != "It is " || s.Held() != 5 {
		t.Errorf("released %q, held %d", got, s.Held())
	}
	if got := s.Write("ogress."); got != "sk-progress." {
		t.Errorf("released %q", got)
	}
	var none *redact.Redactor
	if got := none.Stream().Write("sk-"); got != "sk-" {
		t.Errorf("no secret: released %q", got)
	}
}
