package headless

import (
	"strings"

	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/internal/outputschema"
)

// Answers checks the root's final answers against --output-schema
// (docs/live.md, "Model settings"): a completed root turn whose answer is
// not JSON valid against the schema fails — an error event (source
// output_schema) lists each problem where it is in the answer, and the
// turn counts as failed for the exit code (Turns) and the result (View).
// The server may have been asked for structured output or not; escapement
// checks either way. A compaction turn (/compact) has no answer and is not
// checked. One goroutine uses it: the driver's observer.
type Answers struct {
	// Schema is the output schema; nil checks nothing.
	Schema *outputschema.Schema
	// View, when set, is the run's view, whose result then says the turn
	// failed (and -o keeps nothing: WriteFinal).
	View *protocol.View
	// Emit, when set, shows the error event of an answer that fails.
	Emit func(protocol.Event)
	// compaction is the root's on-demand compaction turn, if one runs.
	compaction uint64
}

// Check looks at one event of the run; when ev is the end of a completed
// root turn whose answer fails the schema, it marks that turn failed in
// turns and returns (and Emits) the error event that says why.
func (a *Answers) Check(ev protocol.Event, turns *Turns) (protocol.Event, bool) {
	if a.Schema == nil || strings.Contains(ev.Agent, "/") {
		return protocol.Event{}, false
	}
	switch {
	case ev.Type == protocol.TypeCompactionStarted && ev.Why == "requested":
		a.compaction = ev.Turn
	case ev.Type != protocol.TypeTurnEnded || ev.Outcome != "completed" || ev.Turn == a.compaction:
	default:
		err := a.Schema.Validate(ev.Text)
		if err == nil {
			return protocol.Event{}, false
		}
		turns.fail(ev.Turn, err.Error())
		if a.View != nil {
			a.View.FailLast(ev.Turn, err.Error())
		}
		bad := protocol.ErrorEvent(protocol.SourceOutputSchema, 0, err.Error())
		if a.Emit != nil {
			a.Emit(bad)
		}
		return bad, true
	}
	return protocol.Event{}, false
}
