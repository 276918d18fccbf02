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

// key draws a secret New accepts.
func key(t *rapid.T) string {
	k := text(redact.MinRun, 40).Draw(t, "key")
	if redact.Weak(k) != "" {
		t.Skip("a weak key: no secret")
	}
	return k
}

// withPieces builds a text of filler and pieces of k (whole, cut, repeated,
// overlapping, glued to the mask's characters).
func withPieces(t *rapid.T, k string) string {
	var b strings.Builder
	for range rapid.IntRange(0, 6).Draw(t, "pieces") {
		if rapid.Bool().Draw(t, "from key") {
			lo := rapid.IntRange(0, len(k)).Draw(t, "lo")
			hi := rapid.IntRange(lo, len(k)).Draw(t, "hi")
			b.WriteString(k[lo:hi])
		} else {
			b.WriteString(text(0, 20).Draw(t, "filler"))
		}
	}
	return b.String()
}

// TestRedactNoRunSurvives: whatever the text and wherever pieces of the key
// sit in it, no MinRun-byte run of the key survives.
func TestRedactNoRunSurvives(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := key(t)
		out := redact.New(k).Redact(withPieces(t, k))
		if run, ok := leaks(out, k, redact.MinRun); ok {
			t.Fatalf("run %q of key %q survives in %q", run, k, out)
		}
	})
}

// TestRedactLeavesOtherTextAlone: text that holds no MinRun-byte run of the
// key comes back byte-for-byte; and a weak key redacts nothing at all.
func TestRedactLeavesOtherTextAlone(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := text(1, 40).Draw(t, "key")
		s := text(0, 200).Draw(t, "text")
		if redact.Weak(k) != "" {
			s = withPieces(t, k)
		} else if _, ok := leaks(s, k, redact.MinRun); ok {
			t.Skip("the text holds key material")
		}
		if out := redact.New(k).Redact(s); out != s {
			t.Fatalf("key %q (weak: %q) changed %q to %q", k, redact.Weak(k), s, out)
		}
	})
}

// TestWeak: what is too short or too word-like to be redacted safely, and
// what is a key.
func TestWeak(t *testing.T) {
	for _, weak := range []string{"ollama", "x", "lm-studio", "not-needed", "sk-1234", "sk-no-key-required", "NOT_A_REAL_KEY", "abcdefghijklmnopqrstuvwxyz"} {
		if redact.Weak(weak) == "" {
			t.Errorf("%q is taken for a secret", weak)
		}
		if r := redact.New(weak); !r.Empty() || r.Redact("say "+weak) != "say "+weak {
			t.Errorf("%q is redacted", weak)
		}
	}
	for _, key := range []string{"sk-proj-Zq8Lw3Rt5Yu7Io9Pa1Sd3Fg5Hj7Kl9", "token-abc123", "gsk_AbCdEfGhIjKlMnOp", "0123456789abcdef0123"} {
		if why := redact.Weak(key); why != "" {
			t.Errorf("%q is weak: %s", key, why)
		}
	}
	if redact.Weak("") != "" {
		t.Error("an empty key needs no word")
	}
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
	// A secret holding the mask's brackets gets other ones: "[redac" +
	// "ted]abcdefgh" would otherwise make a run out of a mask and the text
	// after it.
	sec := "ted]abcdefgh" + strings.Repeat("Z", 12)
	if got := redact.New(sec).Redact(strings.Repeat("Z", 12) + "abcdefgh"); got != "<redacted>abcdefgh" {
		t.Errorf("mask with brackets of the secret: %q", got)
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
