// Package redact removes secrets (an API key) from text before it leaves the
// process: error messages, retry causes, traces, logs. Servers echo keys back
// in error bodies, whole or in part (`Incorrect API key provided:
// sk-SECRET1****************ab`), so matching only the whole key is not
// enough: every run of MinRun or more consecutive bytes of a secret is
// replaced, wherever it appears. Text that holds no such run is returned
// unchanged. The package is pure: a Redactor is immutable and safe for
// concurrent use.
package redact

import (
	"strings"
	"unicode/utf8"
)

// MinRun is the shortest run of a secret's bytes that is redacted: any
// substring of a secret of this length or longer. A secret shorter than
// MinRun is redacted where it appears whole.
const MinRun = 12

// minSecret is the shortest secret redacted at all: shorter ones (a local
// server's placeholder "x") would scrub ordinary words from every message.
const minSecret = 4

// Mask replaces each redacted run.
const Mask = "[redacted]"

// Redactor removes a fixed set of secrets from text. The zero value and a nil
// *Redactor redact nothing.
type Redactor struct {
	// windows holds every substring of length n of the secrets, for each
	// window length n in use (MinRun for long secrets, the whole length for
	// short ones).
	windows map[int]map[string]struct{}
}

// New returns a Redactor for secrets; empty secrets and secrets shorter than
// four bytes are ignored.
func New(secrets ...string) *Redactor {
	r := &Redactor{windows: make(map[int]map[string]struct{})}
	for _, s := range secrets {
		if len(s) < minSecret {
			continue
		}
		n := min(len(s), MinRun)
		set := r.windows[n]
		if set == nil {
			set = make(map[string]struct{})
			r.windows[n] = set
		}
		for i := 0; i+n <= len(s); i++ {
			set[s[i:i+n]] = struct{}{}
		}
	}
	return r
}

// With returns a Redactor for r's secrets and more (the ones a
// configuration read later adds: an MCP server's token beside the API
// key); empty secrets and secrets shorter than four bytes are ignored, as
// by New. r is unchanged; a nil r is as New(more...).
func (r *Redactor) With(more ...string) *Redactor {
	out := New(more...)
	if r == nil {
		return out
	}
	for n, set := range r.windows {
		dst := out.windows[n]
		if dst == nil {
			dst = make(map[string]struct{}, len(set))
			out.windows[n] = dst
		}
		for w := range set {
			dst[w] = struct{}{}
		}
	}
	return out
}

// Redact returns s with every run of a secret (see MinRun) replaced by Mask.
// The result holds no such run, even where a mask meets the text around it:
// the pass repeats until nothing is left (falling back to removing runs
// outright, which always shrinks the text, if a secret shares bytes with the
// mask so that masking alone would not settle).
func (r *Redactor) Redact(s string) string {
	if r == nil || len(r.windows) == 0 {
		return s
	}
	mask := Mask
	for {
		marked := r.mark(s)
		if marked == nil {
			return s
		}
		out := replace(s, marked, mask)
		if len(out) >= len(s) {
			mask = ""
		}
		s = out
	}
}

// mark returns which bytes of s lie in a window of a secret (nil when none
// does), widened to whole UTF-8 sequences so a mask never leaves half a
// character behind.
func (r *Redactor) mark(s string) []bool {
	var marked []bool
	for n, set := range r.windows {
		for i := 0; i+n <= len(s); i++ {
			if _, ok := set[s[i:i+n]]; !ok {
				continue
			}
			if marked == nil {
				marked = make([]bool, len(s))
			}
			lo, hi := i, i+n
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
	}
	return marked
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
