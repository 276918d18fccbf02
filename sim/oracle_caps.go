package sim

import (
	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
)

// Caps (I15): what a model sends is bounded. A streamed message past
// max_message_bytes is cut in the step that took it past the cap, keeping
// only what fit; calls beyond max_calls of one message never run; no agent
// runs more than max_parallel_tools tools at once. The oracle counts bytes
// the way docs/semantics.md ("Budgets and caps") defines them, from the
// events it saw.

// callOverhead is what each new call of a stream counts beside its id,
// name and arguments (docs/semantics.md, "Budgets and caps").
const callOverhead = 16

// overCap accounts a live chunk of op against max_message_bytes. When it
// would take the message past the cap it records what the kernel must keep
// (the text that fits) and that this step must cut the stream, and reports
// true: the chunk itself is not delivered.
func (o *oracle) overCap(op *opObs, ev *kernel.Event) bool {
	cost := len(ev.Text)
	if ev.Call != nil {
		cost = len(ev.Call.ID) + len(ev.Call.Name) + len(ev.Call.Args)
		if op.findFrag(ev.Call.Index) == nil {
			cost += callOverhead
		}
	}
	if op.msgBytes+cost <= o.lim.MaxMessageBytes {
		op.msgBytes += cost
		return false
	}
	if ev.Call == nil {
		op.text = append(op.text, textcut.Prefix(ev.Text, o.lim.MaxMessageBytes-op.msgBytes)...)
	}
	op.overCapped = true
	o.capCut = op
	return true
}

// checkCut: a request a chunk took past the cap is cut in the same step,
// and its agent's turn is aborted with reason output_limit.
func (o *oracle) checkCut() {
	op := o.capCut
	if op == nil {
		return
	}
	a := o.agents[op.agent]
	if op.cancels == 0 || a.abortReason != kernel.ReasonOutputLimit {
		o.violate("I15", op.agent, "a chunk took the message past max_message_bytes (%d) and the stream was not cut with reason output_limit", o.lim.MaxMessageBytes)
	}
	if len(op.text) > 0 {
		o.partials = append(o.partials, partialObs{agent: op.agent, text: string(op.text), why: "its output limit"})
	}
}

// findFrag is the call streamed at index, or nil.
func (op *opObs) findFrag(index int) *fragObs {
	for i := len(op.frags) - 1; i >= 0; i-- {
		if op.frags[i].index == index {
			return &op.frags[i]
		}
	}
	return nil
}

// frag is the call streamed at index, added on its first fragment.
func (op *opObs) frag(index int) *fragObs {
	if f := op.findFrag(index); f != nil {
		return f
	}
	op.frags = append(op.frags, fragObs{index: index})
	return &op.frags[len(op.frags)-1]
}
