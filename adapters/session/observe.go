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
// user messages follow it (TestPersistQueuedTurn). A compaction the Step
// applied is recorded first (compaction), so the history written on from
// there is the compacted one; a request's end's usage goes with what it
// produced — the compaction record, or the assistant message it appended.
func (s *Session) persist(st ports.Step) {
	for i := range st.Effects {
		if e := &st.Effects[i]; e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeApprovalGranted {
			s.file.grant(kernel.GrantOf(e.Life))
		}
	}
	hist := st.Kernel.Agent(kernel.Root).History()
	s.usage, s.usageAt = rootRequestUsage(st.Effects), -1
	compacted := rootCompacted(st.Effects)
	if compacted != nil {
		s.compaction(*compacted, hist, s.usage)
	} else if s.usage != nil {
		s.usageAt = lastAssistant(hist, s.written)
	}
	if ended, restarted := rootTurnEnd(st.Effects); ended != nil {
		cut := len(hist)
		if restarted {
			cut = s.markerCut(hist, compacted != nil)
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
// A compaction turn leaves no marker: when one ended in this Step
// (compacted), its messages end with the compacted history.
func (s *Session) markerCut(hist []kernel.Message, compacted bool) int {
	for j := len(hist) - 1; j >= 0; j-- {
		if hist[j].Marker {
			return max(j+1, s.written)
		}
	}
	if compacted {
		return s.written
	}
	return len(hist)
}

// rootCompacted finds the root's compacted record among effects.
func rootCompacted(effects []kernel.Effect) *kernel.Lifecycle {
	for i := range effects {
		if e := &effects[i]; e.Kind == kernel.EffEmit && e.Life.Agent == kernel.Root && e.Life.Kind == kernel.LifeCompacted {
			return &e.Life
		}
	}
	return nil
}

// compaction records the root's compaction c, which this Step applied:
// the messages it replaced stay in the file (every message of the history
// before it was written in earlier Steps: s.written), and the record holds
// what replaced them — the system prompt, the summary and the kept tail,
// the first len(before) − replaced + 1 messages of hist (what the Step
// appended after them, interjections typed during the compaction, follows
// as messages). The file then counts as holding hist up to there.
func (s *Session) compaction(c kernel.Lifecycle, hist []kernel.Message, u *kernel.Usage) {
	n := min(max(s.written-c.N+1, 0), len(hist))
	s.file.compaction(c.Turn, c.N, hist[:n], u)
	s.written = n
}

// writeMessages appends the messages of msgs not written yet, the usage
// of this Step's request end with the message it appended (usageAt).
func (s *Session) writeMessages(msgs []kernel.Message) {
	for ; s.written < len(msgs); s.written++ {
		var u *kernel.Usage
		if s.written == s.usageAt {
			u = s.usage
		}
		s.file.message(msgs[s.written], u)
	}
}

// rootRequestUsage is the usage a root request's end reported in effects
// (nil: none ended, or it reported none).
func rootRequestUsage(effects []kernel.Effect) *kernel.Usage {
	for i := range effects {
		if e := &effects[i]; e.Kind == kernel.EffEmit && e.Life.Agent == kernel.Root && e.Life.Kind == kernel.LifeOpEnded && e.Life.Usage != nil {
			return e.Life.Usage
		}
	}
	return nil
}

// lastAssistant is the index of the last assistant message of hist at or
// after from (-1: none): the message a request's end appended.
func lastAssistant(hist []kernel.Message, from int) int {
	for j := len(hist) - 1; j >= from; j-- {
		if hist[j].Role == kernel.RoleAssistant {
			return j
		}
	}
	return -1
}
