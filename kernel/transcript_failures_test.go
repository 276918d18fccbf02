package kernel

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/escapement/escapement/fsm"
)

// failureShow is what a transcript must show to cover one failure class of
// docs/semantics.md ("The failure catalogue"): the situation in which other
// agent products failed, met the way escapement meets it. Each is judged
// from the run alone — events, effects, lifecycle records and the final
// histories — like the oracle judges a simulation.
type failureShow struct {
	class string
	what  string
	shown func(r *transcriptRun) bool
}

var failureShows = []failureShow{
	{"F1", "an interrupted agent's tools or children finishing after the interrupt (a tool's acknowledgement or late result, a child's turn ending) with no request from it until its next turn", showsF1},
	{"F2", "one abort reaching children as parent_cancelled in its step, every live op of the subtree getting exactly one cancel", showsF2},
	{"F3", "an op abandoned when its grace ran out, its agent not left waiting for it", showsF3},
	{"F4", "a deadline firing in a tree of agents and aborting only its own agent and that agent's descendants", showsF4},
	{"F5", "a child that did not complete reaching its parent as a typed agent_result with that outcome", showsF5},
	{"F6", "an aborted turn leaving exactly one marker, sent with the next request", showsF6},
	{"F7", "a cut or failed stream's text kept as a partial assistant message", showsF7},
	{"F8", "an interjection while the root works appearing exactly once in its history, or a repeated cancel ignored", showsF8},
	{"F9", "a cancel acting in its own step: the interrupt and the cancels of the target's work", showsF9},
	{"F10", "a late subscriber reading the lifecycle log from a sequence number (log from=N)", showsF10},
	{"F11", "a call that got no answer of its own closed by a synthetic result, or a repeated call id made unique", showsF11},
	{"F12", "a half-streamed tool call dropped, never started", showsF12},
	{"F13", "an abort for another reason than the user's cancel whose marker names that reason", showsF13},
	{"F14", "a cancel bound to an ended turn ignored, or a repeated cancel that adds no marker or outcome", showsF14},
}

// lifeOf returns an effect's lifecycle record, if it is one.
func lifeOf(e Effect) (Lifecycle, bool) { return e.Life, e.Kind == EffEmit }

// under reports whether id is anc or one of its descendants.
func under(r *transcriptRun, id, anc AgentID) bool {
	for ; id != NoAgent; id = r.agent(id).Parent() {
		if id == anc {
			return true
		}
	}
	return false
}

func showsF1(r *transcriptRun) bool {
	tools := map[OpID]bool{}
	for i, s := range r.steps {
		for _, e := range s.effs {
			if e.Kind == EffStartTool {
				tools[e.Op] = true
			}
			if l, ok := lifeOf(e); ok && l.Kind == LifeInterrupted && waitedForAfter(r, i, l.Agent, tools) {
				return true
			}
		}
	}
	return false
}

// waitedForAfter: after step i, before a's next turn, what a had been
// waiting for finished anyway: one of its tools answered (its cancel's
// acknowledgement or a late result) or one of its children ended its turn.
// (That no request of a started meanwhile is a promise every run keeps:
// brokenPromises.)
func waitedForAfter(r *transcriptRun, i int, a AgentID, tools map[OpID]bool) bool {
	for _, s := range r.steps[i+1:] {
		for _, e := range s.effs {
			if e.Kind == EffStartTool {
				tools[e.Op] = true
			}
			l, ok := lifeOf(e)
			switch {
			case !ok:
			case l.Agent == a && l.Kind == LifeTurnStarted:
				return false
			case l.Agent == a && tools[l.Op] && (l.Kind == LifeLate || (l.Kind == LifeOpEnded && l.End == OpCancelled)):
				return true
			case l.Kind == LifeTurnEnded && l.Agent != a && r.agent(l.Agent).Parent() == a:
				return true
			}
		}
	}
	return false
}

func showsF2(r *transcriptRun) bool {
	live := map[OpID]AgentID{}
	cancelled := map[OpID]bool{}
	shown := false
	for _, s := range r.steps {
		var hit []AgentID
		children := false
		cancels := map[OpID]int{}
		for _, e := range s.effs {
			if l, ok := lifeOf(e); ok && l.Kind == LifeInterrupted {
				hit = append(hit, l.Agent)
				children = children || l.Reason == ReasonParentCancelled
			}
			if e.Kind == EffCancelLLM || e.Kind == EffCancelTool {
				cancels[e.Op]++
			}
		}
		if len(hit) >= 2 && children {
			once := true
			for op, owner := range live { // determinism: an all-of check
				for _, a := range hit {
					if owner == a && !cancelled[op] && cancels[op] != 1 {
						once = false
					}
				}
			}
			shown = shown || once
		}
		for _, e := range s.effs {
			switch e.Kind {
			case EffStartLLM, EffStartTool:
				live[e.Op] = e.Agent
			case EffCancelLLM, EffCancelTool:
				cancelled[e.Op] = true
			case EffEmit:
				if e.Life.Kind == LifeOpEnded {
					delete(live, e.Life.Op)
				}
			}
		}
	}
	return shown
}

func showsF3(r *transcriptRun) bool {
	for _, s := range r.steps {
		for _, e := range s.effs {
			l, ok := lifeOf(e)
			if !ok || l.Kind != LifeOpEnded || l.End != OpAbandoned {
				continue
			}
			if s.beforeOf(l.Agent).state != fsm.Interrupted || settledIn(s, l.Agent) {
				return true
			}
		}
	}
	return false
}

func settledIn(s transcriptStep, a AgentID) bool {
	for _, e := range s.effs {
		if l, ok := lifeOf(e); ok && l.Kind == LifeTransition && l.Agent == a && l.Trigger == fsm.Settled {
			return true
		}
	}
	return false
}

func showsF4(r *transcriptRun) bool {
	for _, s := range r.steps {
		for _, e := range s.effs {
			l, ok := lifeOf(e)
			if !ok || l.Kind != LifeTimedOut {
				continue
			}
			x := l.Agent
			if r.agent(x).Parent() == NoAgent && len(r.agent(x).Children()) == 0 {
				continue // a lone agent: nothing else a deadline could hit
			}
			own := true
			for _, e2 := range s.effs {
				if l2, ok := lifeOf(e2); ok && l2.Kind == LifeInterrupted && !under(r, l2.Agent, x) {
					own = false
				}
			}
			if own {
				return true
			}
		}
	}
	return false
}

func showsF5(r *transcriptRun) bool {
	for _, s := range r.steps {
		for _, e := range s.effs {
			l, ok := lifeOf(e)
			if !ok || l.Kind != LifeCallFinished || l.Status != CallChild || l.Outcome == OutcomeCompleted {
				continue
			}
			var res struct{ Type, Outcome string }
			for _, m := range r.agent(l.Agent).History() {
				if m.Role == RoleTool && m.ToolCallID == l.CallID && json.Unmarshal([]byte(m.Content), &res) == nil &&
					res.Type == "agent_result" && res.Outcome == l.Outcome.String() {
					return true
				}
			}
		}
	}
	return false
}

func showsF6(r *transcriptRun) bool {
	for id := range r.final.NumAgents() {
		a := AgentID(id)
		aborted, sent := 0, false
		for _, s := range r.steps {
			for _, e := range s.effs {
				if l, ok := lifeOf(e); ok && l.Agent == a && l.Kind == LifeTurnEnded && l.Outcome != OutcomeCompleted {
					aborted++
				}
				if e.Kind == EffStartLLM && e.Agent == a && aborted > 0 && markers(e.Messages) > 0 {
					sent = true
				}
			}
		}
		if aborted > 0 && sent && markers(r.agent(a).History()) == aborted {
			return true
		}
	}
	return false
}

func showsF7(r *transcriptRun) bool {
	streamed := map[OpID]string{} // each request's text
	owner := map[OpID]AgentID{}
	for _, s := range r.steps {
		for _, e := range s.effs {
			if l, ok := lifeOf(e); ok && l.Kind == LifeDelta {
				streamed[l.Op] += l.Text
				owner[l.Op] = l.Agent
			}
		}
	}
	for id := range r.final.NumAgents() {
		for _, m := range r.agent(AgentID(id)).History() {
			if m.Role != RoleAssistant || !m.Partial || m.Content == "" {
				continue
			}
			for op, text := range streamed { // determinism: an any-of check
				if owner[op] == AgentID(id) && text == m.Content {
					return true
				}
			}
		}
	}
	return false
}

func showsF8(r *transcriptRun) bool {
	if fired(r, fsm.Interrupted, fsm.Cancel) {
		return true
	}
	for _, s := range r.steps {
		if s.ev.Kind != EvInterject || s.beforeOf(Root).state == fsm.Idle {
			continue
		}
		n := 0
		for _, m := range r.agent(Root).History() {
			if m.Role == RoleUser && m.Interjection && m.Content == s.ev.Text {
				n++
			}
		}
		if n == 1 {
			return true
		}
	}
	return false
}

func fired(r *transcriptRun, from fsm.State, t fsm.Trigger) bool {
	rows, _ := rowsFired(r)
	return rows[rowKey(from, t)]
}

func showsF9(r *transcriptRun) bool {
	for _, s := range r.steps {
		if s.ev.Kind != EvCancel {
			continue
		}
		interrupted, cancels := false, false
		for _, e := range s.effs {
			if l, ok := lifeOf(e); ok && l.Kind == LifeInterrupted && l.Agent == s.ev.Agent {
				interrupted = true
			}
			cancels = cancels || e.Kind == EffCancelLLM || e.Kind == EffCancelTool
		}
		if interrupted && cancels {
			return true
		}
	}
	return false
}

func showsF10(r *transcriptRun) bool { return r.logReplays > 0 }

func showsF11(r *transcriptRun) bool {
	for id := range r.final.NumAgents() {
		for _, m := range r.agent(AgentID(id)).History() {
			if m.Role == RoleTool && m.Synthetic {
				return true
			}
			for _, c := range m.ToolCalls {
				if strings.Contains(c.ID, "#") {
					return true
				}
			}
		}
	}
	return false
}

func showsF12(r *transcriptRun) bool {
	for i, s := range r.steps {
		for _, e := range s.effs {
			l, ok := lifeOf(e)
			if !ok || l.Kind != LifeCallDropped {
				continue
			}
			started := false
			for _, later := range r.steps[i:] {
				for _, e2 := range later.effs {
					started = started || (e2.Kind == EffStartTool && e2.Agent == l.Agent && l.CallID != "" && e2.Call.ID == l.CallID)
				}
			}
			if !started {
				return true
			}
		}
	}
	return false
}

func showsF13(r *transcriptRun) bool {
	for _, s := range r.steps {
		for _, e := range s.effs {
			l, ok := lifeOf(e)
			if !ok || l.Kind != LifeTurnEnded || l.Outcome == OutcomeCompleted || l.Reason == ReasonUserCancel {
				continue
			}
			want := fmt.Sprintf(`reason="%s"`, l.Reason)
			for _, m := range r.agent(l.Agent).History() {
				if m.Marker && strings.Contains(m.Content, want) {
					return true
				}
			}
		}
	}
	return false
}

func showsF14(r *transcriptRun) bool {
	if fired(r, fsm.Interrupted, fsm.Cancel) {
		return true
	}
	for _, s := range r.steps {
		ev := s.ev
		if ev.Kind != EvCancel || ev.Turn == 0 || ev.Turn == s.beforeOf(ev.Agent).turn {
			continue
		}
		for _, e := range s.effs {
			if l, ok := lifeOf(e); ok && l.Kind == LifeIgnored {
				return true
			}
		}
	}
	return false
}

// brokenPromises checks what every run must keep, whatever it claims: one
// outcome per turn (I13), at most one cancel per op (I2), no request from an
// interrupted agent before its next turn (F1), the turn's marker count, and
// the approvals' promises (approvalPromises).
func brokenPromises(r *transcriptRun) []error {
	errs := approvalPromises(r)
	ended := map[[2]uint64]int{}
	cancels := map[OpID]int{}
	interrupted := map[AgentID]bool{}
	for i, s := range r.steps {
		for _, e := range s.effs {
			switch e.Kind {
			case EffCancelLLM, EffCancelTool:
				if cancels[e.Op]++; cancels[e.Op] == 2 {
					errs = append(errs, fmt.Errorf("step %d (%s): op %d cancelled twice", i+1, s.ev.Describe(), e.Op))
				}
			case EffStartLLM:
				if interrupted[e.Agent] {
					errs = append(errs, fmt.Errorf("step %d (%s): agent %d asked the model again after its interrupt (F1)", i+1, s.ev.Describe(), e.Agent))
				}
			case EffEmit:
				switch l := e.Life; l.Kind {
				case LifeInterrupted:
					interrupted[l.Agent] = true
				case LifeTurnStarted:
					interrupted[l.Agent] = false
				case LifeTurnEnded:
					key := [2]uint64{uint64(l.Agent), l.Turn}
					if ended[key]++; ended[key] == 2 {
						errs = append(errs, fmt.Errorf("step %d (%s): agent %d's turn %d ended twice", i+1, s.ev.Describe(), l.Agent, l.Turn))
					}
				}
			}
		}
	}
	return errs
}

// TestTranscriptPromisesCatchBreaks proves brokenPromises can fail: a run
// whose interrupted agent asks the model again, whose op gets two cancels
// and whose turn ends twice is reported three times over.
func TestTranscriptPromisesCatchBreaks(t *testing.T) {
	life := func(l Lifecycle) Effect { return Effect{Kind: EffEmit, Agent: l.Agent, Life: l} }
	r := &transcriptRun{steps: []transcriptStep{
		{ev: Cancel(0, Root), effs: []Effect{
			life(Lifecycle{Kind: LifeInterrupted, Agent: Root, Turn: 1, Reason: ReasonUserCancel}),
			{Kind: EffCancelLLM, Agent: Root, Op: 2},
		}},
		{ev: Cancel(0, Root), effs: []Effect{{Kind: EffCancelLLM, Agent: Root, Op: 2}}},
		{ev: LLMEnd(0, 2), effs: []Effect{
			life(Lifecycle{Kind: LifeTurnEnded, Agent: Root, Turn: 1, Outcome: OutcomeInterrupted}),
			{Kind: EffStartLLM, Agent: Root, Op: 5},
			life(Lifecycle{Kind: LifeTurnEnded, Agent: Root, Turn: 1, Outcome: OutcomeCompleted}),
		}},
	}}
	errs := brokenPromises(r)
	for _, want := range []string{"cancelled twice", "asked the model again", "ended twice"} {
		if !slices.ContainsFunc(errs, func(err error) bool { return strings.Contains(err.Error(), want) }) {
			t.Errorf("brokenPromises missed %q: %v", want, errs)
		}
	}
}
