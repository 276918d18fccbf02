package kernel

import (
	"slices"

	"github.com/escapement/escapement/fsm"
)

// A child's turn is its only one. In the step it ends, its result reaches
// its parent — the call's tool message, the call_finished and turn_ended
// records — and once the last of its ops has ended too (a tool or request
// it cancelled may still be winding down in its grace) nothing can make it
// work again or name it: no event names an op of it, no input starts a
// turn of it. So the kernel frees it at the start of the next step
// (docs/semantics.md, "Finished agents"): its history, its name and
// everything else it held go, and the tree's memory is bounded by the
// agents it holds. It is freed a step later, not at once, so that whoever
// reads the tree after the step it finished in (a trace, the oracle, a
// host's observer) still finds it there.

// retire marks a child whose turn has ended and whose ops have all ended,
// to be freed at the start of the next step. finishTurn and endOp call it:
// whichever comes last finds it finished, once. The root is never freed:
// its turns start from user input.
func (k *Kernel) retire(a *agent) {
	if a.parent != NoAgent && a.state == fsm.Idle && a.inflight == 0 {
		k.finished = append(k.finished, a.id)
	}
}

// freeFinished frees the children that finished in the previous step (their
// turn and their ops ended): the tree forgets them (their slot stays, empty, so ids are never reused)
// and their parents' current turns no longer list them. A parent still
// lists every child it ever spawned (AgentView.Children): an id each, as
// its history holds a result for each.
func (k *Kernel) freeFinished() {
	for _, id := range k.finished {
		a := k.agents[id]
		if p := k.agentAt(a.parent); p != nil {
			if i := slices.Index(p.turnKids, id); i >= 0 {
				p.turnKids = slices.Delete(p.turnKids, i, i+1)
			}
		}
		k.agents[id] = nil
		k.held--
	}
	k.finished = k.finished[:0]
}

// freedAgent reports whether id named an agent the tree has freed.
func (k *Kernel) freedAgent(id AgentID) bool {
	return id >= 0 && int(id) < len(k.agents) && k.agents[id] == nil
}

// cancelFreed answers a cancel naming a freed agent: its only turn ended,
// so the cancel is a recorded no-op, as for any agent that is Idle
// (docs/semantics.md, "Inputs"). It reports whether ev was such a cancel.
func (k *Kernel) cancelFreed(ev Event) bool {
	if !k.freedAgent(ev.Agent) {
		return false
	}
	k.emit(Lifecycle{Kind: LifeIgnored, Agent: ev.Agent, Text: "cancel of an agent that has finished (freed)"})
	return true
}

// HeldAgents is how many agents the tree holds now: the root and every
// child not freed (a child is freed at the start of the step after its
// turn ended). NumAgents counts every agent it ever held.
func (k *Kernel) HeldAgents() int { return k.held }

// freedView is the view of an agent the tree has freed: its id, Freed, and
// Idle; nothing else is kept (docs/semantics.md, "Finished agents").
func freedView(id AgentID) AgentView {
	return AgentView{a: &agent{id: id, parent: NoAgent, state: fsm.Idle, parentCall: -1, freed: true}}
}
