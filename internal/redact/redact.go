// Package redact removes secrets (an API key) from text before it leaves the
// process: error messages, retry causes, traces, logs. Servers echo keys back
// in error bodies, whole or in part (`Incorrect API key provided:
// sk-SECRET1****************ab`), so matching only the whole key is not
// enough: every run of MinRun or more consecutive bytes of a secret is
// replaced, wherever it appears. Text that holds no such run is returned
// unchanged. The package is pure: a Redactor is immutable and safe for
// concurrent use; a Stream (one stream's text, redacted as it arrives) is
// not.
//
// Not every configured value can be a secret. A value shorter than MinRun
// ("ollama", "x") or one that reads like words ("sk-no-key-required",
// "NOT_A_REAL_KEY": no digit and one letter case only) would, if redacted,
// scrub ordinary words from every message and answer; such a value is no
// secret at all (Weak says why, for the host to tell the user once).
package redact

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MinRun is the shortest run of a secret's bytes that is redacted: any
// substring of a secret of this length or longer. It is also the shortest
// secret: a shorter value is no secret (Weak).
const MinRun = 12

// Mask replaces each redacted run. A Redactor whose secrets contain '[' or
// ']' uses the same word between other delimiters (Redactor.Mask), so that
// no run of a secret can ever be made of a mask's bytes and the text around
// it.
const Mask = "[redacted]"

// maskDelims are the delimiter pairs a mask may use, in order of preference.
var maskDelims = [...][2]byte{{'[', ']'}, {'<', '>'}, {'{', '}'}, {'(', ')'}, {'|', '|'}, {'#', '#'}, {'~', '~'}, {'^', '^'}}

// Weak says why secret cannot be redacted safely — too short, or reading
// like words — and so is treated as no secret; "" when it is a secret New
// redacts. An empty value is weak with no reason worth telling ("").
func Weak(secret string) string {
	switch {
	case secret == "":
		return ""
	case len(secret) < MinRun:
		return "it is too short to be told apart from ordinary text (fewer than 12 bytes)"
	case wordLike(secret):
		return "it reads like words, not a key (no digit, one letter case): a placeholder"
	}
	return ""
}

// wordLike reports whether s has no digit and its letters are all of one
// case: what placeholders look like ("sk-no-key-required"), and what no
// generated key does.
func wordLike(s string) bool {
	upper, lower := false, false
	for _, r := range s {
		switch {
		case unicode.IsDigit(r):
			return false
		case unicode.IsUpper(r):
			upper = true
		case unicode.IsLower(r):
			lower = true
		}
	}
	return !(upper && lower)
}

// Redactor removes a fixed set of secrets from text. The zero value and a nil
// *Redactor redact nothing.
type Redactor struct {
	// windows holds every MinRun-byte substring of the secrets.
	windows map[string]struct{}
	// tails holds every substring shorter than MinRun of the secrets: what
	// a Stream holds back at the end of its text (it may start a run).
	tails map[string]struct{}
	mask  string
	// secrets are the secrets kept (With extends them).
	secrets []string
}

// New returns a Redactor for secrets; empty and weak secrets (Weak) are
// ignored.
func New(secrets ...string) *Redactor {
	r := &Redactor{windows: make(map[string]struct{}), tails: make(map[string]struct{}), mask: Mask}
	var kept []string
	for _, s := range secrets {
		if s == "" || Weak(s) != "" {
			continue
		}
		kept = append(kept, s)
		for i := 0; i+MinRun <= len(s); i++ {
			r.windows[s[i:i+MinRun]] = struct{}{}
		}
		for i := range len(s) {
			for n := 1; n < MinRun && i+n <= len(s); n++ {
				r.tails[s[i:i+n]] = struct{}{}
			}
		}
	}
	r.mask, r.secrets = maskFor(kept), kept
	return r
}

// maskFor picks a mask whose delimiters occur in no secret: every MinRun-byte
// window that overlaps a mask holds one of its delimiters (the word between
// them is shorter than MinRun), so no run of a secret can be made of mask
// bytes. "" (the run is removed) only for secrets holding every candidate.
func maskFor(secrets []string) string {
	for _, d := range maskDelims {
		clash := false
		for _, s := range secrets {
			if strings.IndexByte(s, d[0]) >= 0 || strings.IndexByte(s, d[1]) >= 0 {
				clash = true
				break
			}
		}
		if !clash {
			return string(d[0]) + "redacted" + string(d[1])
		}
	}
	return ""
}

// Mask is what replaces a redacted run (Mask, unless a secret holds its
// brackets).
func (r *Redactor) Mask() string {
	if r == nil {
		return Mask
	}
	return r.mask
}

// Empty reports whether r redacts nothing (no secret, or only weak ones).
func (r *Redactor) Empty() bool { return r == nil || len(r.windows) == 0 }

// With returns a Redactor for r's secrets and more (the ones a
// configuration read later adds: an MCP server's token beside the API
// key); empty and weak secrets are ignored, as by New. r is unchanged; a
// nil r is as New(more...).
func (r *Redactor) With(more ...string) *Redactor {
	if r == nil {
		return New(more...)
	}
	return New(append(slices.Clone(r.secrets), more...)...)
}

// Redact returns s with every run of a secret (see MinRun) replaced by the
// mask. The result holds no such run, even where a mask meets the text
// around it: the mask's delimiters occur in no secret, and where no
// delimiter could be found (the run is then removed, which can join two
// pieces of a secret) the pass repeats until nothing is left.
func (r *Redactor) Redact(s string) string {
	if r.Empty() {
		return s
	}
	for {
		marked := r.mark(s)
		if marked == nil {
			return s
		}
		s = replace(s, marked, r.mask)
	}
}

// Error returns err with its text redacted (err itself when there is
// nothing to remove, nil for nil). The result unwraps to err, so errors.Is
// and errors.As still see what it stands for.
func (r *Redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if clean := r.Redact(msg); clean != msg {
		return &redactedError{err: err, msg: clean}
	}
	return err
}

// redactedError is an error whose text has the secrets removed.
type redactedError struct {
	err error
	msg string
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// mark returns which bytes of s lie in a window of a secret (nil when none
// does), widened to whole UTF-8 sequences so a mask never leaves half a
// character behind.
func (r *Redactor) mark(s string) []bool {
	var marked []bool
	for i := 0; i+MinRun <= len(s); i++ {
		if _, ok := r.windows[s[i:i+MinRun]]; !ok {
			continue
		}
		if marked == nil {
			marked = make([]bool, len(s))
		}
		lo, hi := i, i+MinRun
		for lo > 0 && !utf8.RuneStart(s[lo]) {
			lo--
		}
		for hi < len(s) && !utf8.RuneStart(s[hi]) {
			hi++
		}
		for j := lo; j < hi; j++ {
			marked[j] = true
		}
	}
	return marked
}

// tail is the length of the longest suffix of s, shorter than MinRun, that
// is a substring of a secret: the bytes that may start a run the text after
// s completes.
func (r *Redactor) tail(s string) int {
	for n := min(MinRun-1, len(s)); n > 0; n-- {
		if _, ok := r.tails[s[len(s)-n:]]; ok {
			return n
		}
	}
	return 0
}

// replace swaps each maximal marked run of s for mask.
func replace(s string, marked []bool, mask string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if !marked[i] {
			b.WriteByte(s[i])
			i++
			continue
		}
		b.WriteString(mask)
		for i < len(s) && marked[i] {
			i++
		}
	}
	return b.String()
}
