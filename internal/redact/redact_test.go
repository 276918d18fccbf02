package redact_test

import (
	"strings"
	"testing"

	"github.com/escapement/escapement/internal/redact"
	"pgregory.net/rapid"
)

// leaks reports the first run of at least n bytes of secret found in s.
func leaks(s, secret string, n int) (string, bool) {
	n = min(n, len(secret))
	for i := 0; i+n <= len(secret); i++ {
		if strings.Contains(s, secret[i:i+n]) {
			return secret[i : i+n], true
		}
	}
	return "", false
}

// alphabet mixes key-like characters with the mask's own, so secrets that
// share bytes with "[redacted]" are drawn too.
var alphabet = []rune("sk-ABCabc012_[redact] é")

func text(min, max int) *rapid.Generator[string] {
	return rapid.StringOfN(rapid.SampledFrom(alphabet), min, max, -1)
}

// TestRedactNoRunSurvives: whatever the text and wherever pieces of the key
// sit in it (whole, cut, repeated, overlapping, glued to the mask's
// characters), no MinRun-byte run of the key survives.
func TestRedactNoRunSurvives(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		key := text(4, 40).Draw(t, "key")
		var b strings.Builder
		for range rapid.IntRange(0, 6).Draw(t, "pieces") {
			if rapid.Bool().Draw(t, "from key") {
				lo := rapid.IntRange(0, len(key)).Draw(t, "lo")
				hi := rapid.IntRange(lo, len(key)).Draw(t, "hi")
				b.WriteString(key[lo:hi])
			} else {
				b.WriteString(text(0, 20).Draw(t, "filler"))
			}
		}
		out := redact.New(key).Redact(b.String())
		if run, ok := leaks(out, key, redact.MinRun); ok {
			t.Fatalf("run %q of key %q survives in %q", run, key, out)
		}
	})
}

// TestRedactLeavesOtherTextAlone: text that holds no MinRun-byte run of the
// key (for a key shorter than MinRun: not the whole key) comes back
// byte-for-byte.
func TestRedactLeavesOtherTextAlone(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		key := text(4, 40).Draw(t, "key")
		s := text(0, 200).Draw(t, "text")
		if _, ok := leaks(s, key, redact.MinRun); ok {
			t.Skip("the text holds key material")
		}
		if out := redact.New(key).Redact(s); out != s {
			t.Fatalf("key %q changed clean text %q to %q", key, s, out)
		}
	})
}

// TestRedactExamples pins the masks on the cases that motivated the rule.
func TestRedactExamples(t *testing.T) {
	const key = "sk-SECRET1234567890abcdef"
	r := redact.New(key)
	for _, tc := range []struct{ in, want string }{
		{"Incorrect API key provided: " + key + ".", "Incorrect API key provided: [redacted]."},
		// A server that echoes a prefix (OpenAI prints the first and last few).
		{"Incorrect API key provided: sk-SECRET123****cdef.", "Incorrect API key provided: [redacted]****cdef."},
		{"tail 4567890abcdef", "tail [redacted]"},
		{"eleven sk-SECRET12 stays", "eleven sk-SECRET12 stays"}, // 11 bytes: not a run
		{"twice " + key + key, "twice [redacted]"},
		{"no key here", "no key here"},
		{"", ""},
	} {
		if got := r.Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// Masking glues "ted]" to the clean "abcdefgh" after it: a run of the
	// key that only exists after the first pass, so the pass repeats.
	if got := redact.New("ted]abcdefgh" + strings.Repeat("Z", 12)).Redact(strings.Repeat("Z", 12) + "abcdefgh"); got != "[redac[redacted]" {
		t.Errorf("mask-made run: %q", got)
	}
	if got := redact.New("ollama").Redact("key ollama, not olla"); got != "key [redacted], not olla" {
		t.Errorf("short key: %q", got)
	}
	if got := redact.New("abc", "").Redact("abc"); got != "abc" {
		t.Errorf("a 3-byte secret redacted: %q", got)
	}
	var nilR *redact.Redactor
	if got := nilR.Redact(key); got != key {
		t.Errorf("nil Redactor changed text: %q", got)
	}
	if got := redact.New("é" + key[:12]).Redact("xé" + key[:12] + "y"); got != "x[redacted]y" {
		t.Errorf("multi-byte: %q", got)
	}
}

// TestWith: a redactor extended With more secrets redacts the old ones and
// the new ones; the original is unchanged, and a nil one extends like New.
func TestWith(t *testing.T) {
	key, token := "sk-live-0123456789abcdef", "ghp_TOKENTOKENTOKEN42"
	base := redact.New(key)
	both := base.With(token, "", "ab")
	text := "key " + key + " token " + token + " ab"
	if got, want := both.Redact(text), "key [redacted] token [redacted] ab"; got != want {
		t.Errorf("With: %q, want %q", got, want)
	}
	if got, want := base.Redact(text), "key [redacted] token "+token+" ab"; got != want {
		t.Errorf("the original changed: %q, want %q", got, want)
	}
	var none *redact.Redactor
	if got, want := none.With(token).Redact(text), "key "+key+" token [redacted] ab"; got != want {
		t.Errorf("nil With: %q, want %q", got, want)
	}
}
