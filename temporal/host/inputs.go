package host

import (
	"errors"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/temporal/protocol"
)

// inputKind is which update an input came from.
type inputKind uint8

const (
	inSubmit inputKind = iota + 1
	inSay
	inInterject
	inCancel
	inCompact
	inDecide
)

// input is one user input an update handler queued for the main loop,
// and the answer the main loop gives it.
type input struct {
	kind     inputKind
	text     string
	cancel   protocol.Cancel
	decision protocol.Decision
	done     bool
	reply    protocol.Accepted
	err      error
}

// handle registers the update handlers, the query handler and nothing
// else: it must run before the workflow blocks, so that an update or a
// query arriving with the start finds its handler.
func (t *tree) handle() error {
	text := func(kind inputKind) func(workflow.Context, string) (protocol.Accepted, error) {
		return func(ctx workflow.Context, s string) (protocol.Accepted, error) {
			return t.await(ctx, &input{kind: kind, text: s})
		}
	}
	for _, u := range []struct {
		name string
		kind inputKind
	}{{protocol.SubmitUpdate, inSubmit}, {protocol.SayUpdate, inSay}, {protocol.InterjectUpdate, inInterject}, {protocol.CompactUpdate, inCompact}} {
		if err := workflow.SetUpdateHandlerWithOptions(t.ctx, u.name, text(u.kind), workflow.UpdateHandlerOptions{
			Validator: func(workflow.Context, string) error { return t.admit() },
		}); err != nil {
			return err
		}
	}
	if err := workflow.SetUpdateHandlerWithOptions(t.ctx, protocol.CancelUpdate,
		func(ctx workflow.Context, c protocol.Cancel) (protocol.Accepted, error) {
			return t.await(ctx, &input{kind: inCancel, cancel: c})
		}, workflow.UpdateHandlerOptions{
			Validator: func(workflow.Context, protocol.Cancel) error { return t.admit() },
		}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(t.ctx, protocol.DecideUpdate,
		func(ctx workflow.Context, d protocol.Decision) (protocol.Accepted, error) {
			return t.await(ctx, &input{kind: inDecide, decision: d})
		}, workflow.UpdateHandlerOptions{
			Validator: func(workflow.Context, protocol.Decision) error { return t.admit() },
		}); err != nil {
		return err
	}
	return workflow.SetQueryHandler(t.ctx, protocol.LifecycleQuery, t.page)
}

// admit is every update's validator: a run that is closing takes no more
// input. A refused update leaves nothing in the history; the client sends
// it again to the next run (RefusedContinuing) or reports the end.
func (t *tree) admit() error {
	switch t.closing {
	case "":
		return nil
	case protocol.ClosingContinue:
		return temporal.NewNonRetryableApplicationError("this run is continuing as new; send the input again", protocol.RefusedContinuing, nil)
	default:
		return temporal.NewNonRetryableApplicationError("the tree was shut down", protocol.RefusedStopped, nil)
	}
}

// await queues in for the main loop and waits for its answer.
func (t *tree) await(ctx workflow.Context, in *input) (protocol.Accepted, error) {
	t.inbox = append(t.inbox, in)
	if err := workflow.Await(ctx, func() bool { return in.done }); err != nil {
		return protocol.Accepted{}, err
	}
	return in.reply, in.err
}

// refuseInbox answers every queued input with the run's closing refusal.
func (t *tree) refuseInbox() {
	for _, in := range t.inbox {
		in.err, in.done = t.admit(), true
	}
	t.inbox = nil
}

// onInput steps one user input: Say decides here, on the loop, whether
// the text starts a turn or interjects, so the choice cannot race the
// end of a turn (as live.Driver.Say does).
func (t *tree) onInput(in *input) {
	defer func() { in.done = true }()
	if err := t.admit(); err != nil {
		in.err = err
		return
	}
	now := t.clock()
	var ev kernel.Event
	switch in.kind {
	case inSubmit:
		ev = kernel.Submit(now, in.text)
	case inInterject:
		ev = kernel.Interject(now, in.text)
	case inSay:
		if t.k.Agent(kernel.Root).State() == fsm.Idle {
			ev = kernel.Submit(now, in.text)
		} else {
			ev = kernel.Interject(now, in.text)
		}
	case inCancel:
		ev = kernel.CancelTurn(now, in.cancel.Agent, in.cancel.Turn)
	case inCompact:
		ev = kernel.Compact(now, in.text)
	case inDecide:
		d := in.decision
		ev = kernel.Decide(now, d.Agent, d.CallID, d.Digest, d.Verdict, d.Note)
	}
	refused := t.step(ev)
	root := t.k.Agent(kernel.Root)
	in.reply = protocol.Accepted{Turn: root.Turn(), State: root.State().String(), Run: t.in.Run, Seq: t.k.Log().Next() - 1}
	if len(refused) > 0 {
		in.err = refusal(refused)
	}
}

// refusal turns the kernel's refusals of one input into the error the
// update returns: its type names the first refusal's kind (protocol's
// Refused* types), its message is the kernel's texts joined with "; ".
func refusal(refused []error) error {
	var texts []string
	for _, err := range refused {
		texts = append(texts, err.Error())
	}
	typ := protocol.RefusedOther
	var undeclared *fsm.UndeclaredError
	if errors.As(refused[0], &undeclared) {
		typ = protocol.RefusedUndeclared
	}
	for _, r := range protocol.Refusals {
		if errors.Is(refused[0], r.Err) {
			typ = r.Type
		}
	}
	return temporal.NewNonRetryableApplicationError(strings.Join(texts, "; "), typ, nil)
}

// maxPage bounds one page of the lifecycle query: records, and the bytes
// of their texts (a query's answer travels in one gRPC message).
const (
	maxPageRecords = 1024
	maxPageBytes   = 512 << 10
)

// page answers the lifecycle query. It only reads.
func (t *tree) page(from uint64) (protocol.Page, error) {
	p := protocol.Page{Run: t.in.Run, Closing: t.closing, Next: 1, Oldest: 1, Limits: t.in.Limits, Tools: t.tools}
	if t.k == nil {
		return p, nil
	}
	p.Ready = true
	log := t.k.Log()
	p.Oldest = log.Oldest()
	from = min(max(from, p.Oldest), log.Next())
	p.Next = from
	size := 0
	_ = log.Range(from, func(l kernel.Lifecycle) bool {
		if len(p.Records) >= maxPageRecords || (len(p.Records) > 0 && size+len(l.Text)+len(l.Detail) > maxPageBytes) {
			return false
		}
		size += len(l.Text) + len(l.Detail)
		p.Records = append(p.Records, l)
		p.Next = l.Seq + 1
		return true
	})
	p.More = p.Next < log.Next()
	for _, l := range p.Records {
		for _, id := range []kernel.AgentID{l.Agent, l.Child} {
			if path := t.k.AgentPath(id); path != "" {
				if p.Paths == nil {
					p.Paths = make(map[kernel.AgentID]string)
				}
				p.Paths[id] = path
			}
		}
		if l.Kind == kernel.LifeToolStarted {
			if args, ok := callArgs(t.k.Agent(l.Agent).History(), l.CallID); ok {
				if p.Args == nil {
					p.Args = make(map[kernel.OpID]string)
				}
				p.Args[l.Op] = args
			}
		}
		t.pageContext(&p, &l)
	}
	root := t.k.Agent(kernel.Root)
	p.Busy, p.Turn = root.State() != fsm.Idle, root.Turn()
	return p, nil
}

// pageContext adds to p what a client's protocol event of l needs beside
// the record: a finished call's result, an approval wait's expiry.
func (t *tree) pageContext(p *protocol.Page, l *kernel.Lifecycle) {
	switch l.Kind {
	case kernel.LifeCallFinished:
		if l.Agent < 0 || int(l.Agent) >= t.k.NumAgents() {
			return
		}
		if result, ok := toolMessage(t.k.Agent(l.Agent).History(), l.CallID); ok {
			if p.Results == nil {
				p.Results = make(map[kernel.OpID]string)
			}
			p.Results[l.Op] = result
		}
	case kernel.LifeApprovalRequested:
		for _, w := range t.k.Approvals(nil) {
			if w.Agent == l.Agent && w.CallID == l.CallID {
				if p.Expires == nil {
					p.Expires = make(map[string]bool)
				}
				p.Expires[l.CallID] = w.Expires
			}
		}
	}
}

// toolMessage is the content of the last tool message for call id in an
// agent's history.
func toolMessage(history []kernel.Message, id string) (string, bool) {
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Role == kernel.RoleTool && history[i].ToolCallID == id {
			return history[i].Content, true
		}
	}
	return "", false
}

// callArgs finds call id's arguments in an agent's history (the latest
// assistant message that asked for it).
func callArgs(history []kernel.Message, id string) (string, bool) {
	for i := len(history) - 1; i >= 0; i-- {
		for _, c := range history[i].ToolCalls {
			if c.ID == id {
				return c.Arguments, true
			}
		}
	}
	return "", false
}
