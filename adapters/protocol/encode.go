package protocol

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// Encoder writes events as JSON Lines, numbering them: seq counts every
// line from 1, and elapsed_ms is the time since the encoder was made. It
// is safe for concurrent use (a run's events come from the kernel's
// goroutine, an MCP server's from the client's).
type Encoder struct {
	mu     sync.Mutex
	w      io.Writer
	redact func(string) string
	start  time.Time
	seq    uint64
	err    error
}

// NewEncoder returns an encoder writing to w. redact, when not nil, is
// applied to every string of every event before it is written (the API
// key, and any secret a configuration holds, never reach the output).
func NewEncoder(w io.Writer, redact func(string) string) *Encoder {
	return &Encoder{w: w, redact: redact, start: time.Now()}
}

// Encode writes ev as one line, its seq and elapsed_ms set. After a
// write has failed it writes nothing more and returns that error.
func (e *Encoder) Encode(ev Event) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return e.err
	}
	if e.redact != nil {
		ev = ev.mapStrings(e.redact)
	}
	e.seq++
	ev.Seq, ev.ElapsedMS = e.seq, time.Since(e.start).Milliseconds()
	b, err := json.Marshal(ev)
	if err != nil {
		return err // a bug: an event of no known type
	}
	_, e.err = e.w.Write(append(b, '\n'))
	return e.err
}
