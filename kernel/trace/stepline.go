package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/escapement/escapement/kernel"
)

// StepEvent decodes the event of a step line, as a write-ahead log's
// rebuild reads it (docs/durable.md). A step line is the trace's canonical
// encoding, `{…,"event":{…}}` or `{…,"event":{…},"effects":[…]}`, and the
// key `"event":{` and the text `},"effects":[` cannot occur inside a JSON
// string (their quotes would be escaped), so the event's object is cut out
// and decoded alone — the effects, most of a line, are not decoded at all.
// A rebuild compares the whole line with its re-encoding, so a line this
// reads wrongly is reported, never taken.
func StepEvent(ln []byte) (kernel.Event, error) {
	var ev kernel.Event
	_, after, ok := bytes.Cut(ln, []byte(`"event":{`))
	if !ok {
		return ev, errors.New("step record without an event")
	}
	end := bytes.Index(after, []byte(`},"effects":[`))
	if end < 0 {
		if !bytes.HasSuffix(after, []byte("}}")) {
			return ev, errors.New("step record: the event object does not end the line")
		}
		end = len(after) - 2
	}
	obj := ln[len(ln)-len(after)-1 : len(ln)-len(after)+end+1]
	if err := json.Unmarshal(obj, &ev); err != nil {
		return ev, fmt.Errorf("step record: event: %w", err)
	}
	return ev, nil
}

// LastLine is an io.Writer that keeps only the last write: behind a
// Writer flushed after every Step, the line that step wrote.
type LastLine struct{ B []byte }

func (l *LastLine) Write(p []byte) (int, error) {
	l.B = append(l.B[:0], p...)
	return len(p), nil
}
