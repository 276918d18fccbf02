package session

import (
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// observe runs on the kernel's goroutine after every Step: it writes the
// trace (flushed: the file holds every step so far), appends the root's
// new messages to the session file, and hands the step to the span export
// and the host's observer.
func (s *Session) observe(st ports.Step) {
	if s.trace != nil {
		s.trace.Step(st.Kernel, st.Event, st.Target, st.Before, st.Effects)
		if err := s.trace.Flush(); err != nil && !s.traceLost {
			s.traceLost = true
			s.notice("trace: %v; the trace is incomplete from here", err)
		}
	}
	s.persist(st)
	if s.opts.Spans != nil {
		s.opts.Spans.Observe(st)
	}
	if s.opts.Observer != nil {
		s.opts.Observer(st)
	}
}

// persist appends the session grants made (a grant is made while a turn
// runs, so it belongs to that turn), the root's new messages as they
// appear and, at the end
// of a root turn, the turn_end record (then syncs). When a turn ends and
// the next starts in the same Step (inputs queued while an interrupted tree
// settled), the previous turn's messages end at its marker: the new turn's
// user messages follow it (TestPersistQueuedTurn).
func (s *Session) persist(st ports.Step) {
	for i := range st.Effects {
		if e := &st.Effects[i]; e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeApprovalGranted {
			s.file.grant(kernel.GrantOf(e.Life))
		}
	}
	hist := st.Kernel.Agent(kernel.Root).History()
	if ended, restarted := rootTurnEnd(st.Effects); ended != nil {
		cut := len(hist)
		if restarted {
			cut = s.markerCut(hist)
		}
		s.writeMessages(hist[:cut])
		s.file.turnEnd(*ended)
	}
	s.writeMessages(hist)
	if err := s.file.failed(); err != nil && !s.fileLost {
		// Said once: the writer keeps its first error and writes nothing
		// more; the run ends with it (Close).
		s.fileLost = true
		s.notice("%v; nothing more is written to the session file; this session goes on without a transcript (resuming the file continues from its last complete turn)", err)
	}
}

// rootTurnEnd finds the root's turn end among effects, and whether a new
// root turn started after it in the same Step.
func rootTurnEnd(effects []kernel.Effect) (ended *kernel.Lifecycle, restarted bool) {
	for i := range effects {
		e := &effects[i]
		if e.Kind != kernel.EffEmit || e.Life.Agent != kernel.Root {
			continue
		}
		switch {
		case e.Life.Kind == kernel.LifeTurnEnded:
			ended = &e.Life
		case e.Life.Kind == kernel.LifeTurnStarted && ended != nil:
			restarted = true
		}
	}
	return ended, restarted
}

// markerCut is where the ended turn's messages stop when the next turn
// started in the same Step: after its marker. The marker was appended when
// the abort began (often Steps earlier, and already written); everything
// after it belongs to the new turn.
func (s *Session) markerCut(hist []kernel.Message) int {
	for j := len(hist) - 1; j >= 0; j-- {
		if hist[j].Marker {
			return max(j+1, s.written)
		}
	}
	return len(hist)
}

// writeMessages appends the messages of msgs not written yet.
func (s *Session) writeMessages(msgs []kernel.Message) {
	for ; s.written < len(msgs); s.written++ {
		s.file.message(msgs[s.written])
	}
}
