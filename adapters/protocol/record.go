package protocol

import "github.com/escapement/escapement/kernel"

// Context is what a client that reads a tree's lifecycle records from
// elsewhere (a workflow's query, docs/temporal.md) knows beside each
// record, in place of the kernel a Step carries: what the kernel would
// have been asked for the events' fields.
type Context struct {
	// Paths names agents by id (the kernel's AgentPath of each agent the
	// records mention).
	Paths map[kernel.AgentID]string
	// Args holds a tool_started record's call arguments, by op.
	Args map[kernel.OpID]string
	// Results holds a call_finished record's result, by op: the tool
	// message the agent's history got (what the model reads).
	Results map[kernel.OpID]string
	// Expires says, by call id, whether an approval_requested record's
	// wait ends by expiring (approval_timeout) rather than by its turn's
	// deadline.
	Expires map[string]bool
}

// Record is the event of one lifecycle record read without its kernel:
// the same event Step makes of it in a local run, its fields filled from
// c. The records must come in order, as Step's do (the view learns which
// op is a request, a compaction or a tool from them). c's paths are the
// kernel's of the agents it holds now and replace what the view learnt:
// a tree that continued on a new kernel (a workflow's Continue-As-New)
// numbers its agents afresh; a path learnt from a delegation still names
// a child freed since.
func (v *View) Record(l *kernel.Lifecycle, c Context) Event {
	v.primed = true // no log to prime from: the records before are not ours
	for id, p := range c.Paths {
		v.paths[id] = p
	}
	s := step{rec: &c}
	if args, ok := c.Args[l.Op]; ok && l.Kind == kernel.LifeToolStarted {
		s.calls = map[kernel.OpID]kernel.ToolCall{l.Op: {ID: l.CallID, Name: l.Name, Arguments: args}}
	}
	return v.event(&s, l)
}
