package redact

import "unicode/utf8"

// Stream redacts one stream of text that arrives in pieces — a model's
// answer, chunk by chunk — so that what it releases, put together, holds no
// run of a secret however the secret was cut across the pieces. Each Write
// releases what can no longer be part of a run (redacted) and holds back
// the end that still could: at most the last MinRun-1 bytes, or a run of a
// secret still growing at the end (up to a bound). Flush releases what is
// held when the stream ends. Text with no secret in it comes out
// byte-for-byte, only later by the few bytes held back.
//
// A Stream is not safe for concurrent use; the zero value and one on a nil
// or empty Redactor pass text through unchanged.
type Stream struct {
	r    *Redactor
	held string
}

// maxHeld bounds the run held back at the end of a stream (a model
// repeating a key without a pause): past it the run is released masked, and
// the rest of it, if any, is masked on its own.
const maxHeld = 4 << 10

// Stream returns a Stream redacting with r.
func (r *Redactor) Stream() *Stream { return &Stream{r: r} }

// Write takes the next piece of the stream and returns what can be released
// now, redacted (possibly "").
func (s *Stream) Write(text string) string {
	if s.r.Empty() {
		return text
	}
	b := s.held + text
	marked := s.r.mark(b)
	cut := len(b) - s.r.tail(b)
	for cut > 0 && cut < len(b) && !utf8.RuneStart(b[cut]) {
		cut--
	}
	if marked != nil && cut > 0 && marked[cut-1] {
		// A run reaches the cut: it may go on in the next piece, so hold it
		// whole (its start, too) while it stays within the bound; past it,
		// release the whole run masked.
		start := cut
		for start > 0 && marked[start-1] {
			start--
		}
		if len(b)-start <= maxHeld {
			cut = start
		} else {
			for cut < len(b) && marked[cut] {
				cut++
			}
		}
	}
	s.held = b[cut:]
	if marked == nil {
		return b[:cut]
	}
	return replace(b[:cut], marked[:cut], s.r.mask)
}

// Flush ends the stream: it returns what was held back, redacted, and
// starts over.
func (s *Stream) Flush() string {
	out := s.r.Redact(s.held)
	s.held = ""
	return out
}

// Held is how many bytes the stream holds back now.
func (s *Stream) Held() int { return len(s.held) }
