package oracle

import "github.com/escapement/escapement/fsm"

// move is one legal (state, trigger) pair of the agent machine and what it
// does: Move changes the state, Internal keeps it while the kernel acts,
// Ignore keeps it and records the input as a no-op.
type move struct {
	from fsm.State
	on   fsm.Trigger
	to   fsm.State
	kind fsm.Kind
}

// specMoves is the machine as docs/semantics.md ("States and transitions")
// states it, written out here independently of fsm.Table: the oracle judges
// the kernel's transitions by this statement, so an edit to the table — an
// extra edge out of Interrupted, a no-op row turned into a move — cannot
// teach the oracle to accept it. TestOracleMachineIsTheTable holds the two
// together.
func specMoves() []move {
	var out []move
	add := func(from fsm.State, on fsm.Trigger, to fsm.State, kind fsm.Kind) {
		out = append(out, move{from, on, to, kind})
	}
	// Idle: a submission starts a turn; so does text typed after a turn
	// ended (it is never lost); a cancel finds nothing running.
	add(fsm.Idle, fsm.Submit, fsm.Streaming, fsm.Move)
	add(fsm.Idle, fsm.Interject, fsm.Streaming, fsm.Move)
	add(fsm.Idle, fsm.Cancel, fsm.Idle, fsm.Ignore)
	// Streaming: chunks, an interjection's cut and restart stay; the end of
	// the stream decides where the turn goes; a failure ends it; a message
	// past its cap is cut like an abort.
	add(fsm.Streaming, fsm.Delta, fsm.Streaming, fsm.Internal)
	add(fsm.Streaming, fsm.Interject, fsm.Streaming, fsm.Internal)
	add(fsm.Streaming, fsm.Restart, fsm.Streaming, fsm.Internal)
	add(fsm.Streaming, fsm.StreamText, fsm.Idle, fsm.Move)
	add(fsm.Streaming, fsm.StreamTools, fsm.Tooling, fsm.Move)
	add(fsm.Streaming, fsm.StreamDelegations, fsm.Delegating, fsm.Move)
	add(fsm.Streaming, fsm.StreamFailed, fsm.Idle, fsm.Move)
	add(fsm.Streaming, fsm.OutputLimit, fsm.Interrupted, fsm.Move)
	// Compaction (docs/semantics.md, "Compaction"): on demand from Idle a
	// compaction turn streams its summary; before a request that would not
	// fit, a compaction streams first and its completion sends the request;
	// a history that cannot be made to fit ends the turn.
	add(fsm.Idle, fsm.Compact, fsm.Streaming, fsm.Move)
	add(fsm.Streaming, fsm.Compact, fsm.Streaming, fsm.Internal)
	add(fsm.Streaming, fsm.Compacted, fsm.Streaming, fsm.Internal)
	add(fsm.Streaming, fsm.ContextExhausted, fsm.Idle, fsm.Move)
	// Tooling and Delegating wait for their calls' results (Delegating
	// also for its children's outcomes); interjections wait with them; all
	// results in, the next request goes out.
	for _, w := range []fsm.State{fsm.Tooling, fsm.Delegating} {
		add(w, fsm.ToolResult, w, fsm.Internal)
		add(w, fsm.Interject, w, fsm.Internal)
		add(w, fsm.ResultsIn, fsm.Streaming, fsm.Move)
	}
	add(fsm.Delegating, fsm.ChildOutcome, fsm.Delegating, fsm.Internal)
	// Every working state: the request budget ends the turn; a cancel or a
	// deadline aborts it.
	for _, w := range []fsm.State{fsm.Streaming, fsm.Tooling, fsm.Delegating} {
		add(w, fsm.BudgetExhausted, fsm.Idle, fsm.Move)
		add(w, fsm.Cancel, fsm.Interrupted, fsm.Move)
		add(w, fsm.Timeout, fsm.Interrupted, fsm.Move)
	}
	// Interrupted: inputs wait for the next turn, a repeated cancel is a
	// no-op, and the only way out is Settled, to Idle — never to a working
	// state (F1).
	add(fsm.Interrupted, fsm.Submit, fsm.Interrupted, fsm.Internal)
	add(fsm.Interrupted, fsm.Interject, fsm.Interrupted, fsm.Internal)
	add(fsm.Interrupted, fsm.Cancel, fsm.Interrupted, fsm.Ignore)
	add(fsm.Interrupted, fsm.Settled, fsm.Idle, fsm.Move)
	return out
}

// legalTable indexes specMoves by (state, trigger).
type legalTable [fsm.NumStates][fsm.NumTriggers]struct {
	declared bool
	to       fsm.State
}

func legalMoves() *legalTable {
	var t legalTable
	for _, mv := range specMoves() {
		t[mv.from][mv.on].declared, t[mv.from][mv.on].to = true, mv.to
	}
	return &t
}

// lookup is the declared destination of (from, on).
func (t *legalTable) lookup(from fsm.State, on fsm.Trigger) (fsm.State, bool) {
	if int(from) >= fsm.NumStates || int(on) >= fsm.NumTriggers {
		return 0, false
	}
	r := t[from][on]
	return r.to, r.declared
}
