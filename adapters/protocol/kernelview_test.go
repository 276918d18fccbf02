package protocol_test

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/internal/protocheck"
	"github.com/escapement/escapement/kernel"
)

// kernelView steps a kernel by hand and views every step, so a test can
// reach what the live CLI cannot (yet): approvals, compactions, freed
// children, a view made in the middle of a run (a resumed one's).
type kernelView struct {
	t    *testing.T
	k    *kernel.Kernel
	view *protocol.View
	// rec views the same records without the kernel (Record), as a
	// client of a tree that runs elsewhere does: its events must be the
	// same.
	rec *protocol.View
	out bytes.Buffer
	enc *protocol.Encoder
	llm map[kernel.AgentID]kernel.OpID // each agent's last request started
}

func newKernelView(t *testing.T, cfg kernel.Config) *kernelView {
	t.Helper()
	k, err := kernel.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kv := &kernelView{t: t, k: k, view: protocol.NewView(), rec: protocol.NewView(), llm: map[kernel.AgentID]kernel.OpID{}}
	kv.enc = protocol.NewEncoder(&kv.out, nil)
	return kv
}

// do steps ev and returns the events of its step, encoded too.
func (kv *kernelView) do(ev kernel.Event) []protocol.Event {
	kv.t.Helper()
	effects := append([]kernel.Effect(nil), kv.k.Step(ev)...)
	for _, e := range effects {
		if e.Kind == kernel.EffStartLLM {
			kv.llm[e.Agent] = e.Op
		}
		if e.Kind == kernel.EffError {
			kv.t.Logf("the kernel refused %s: %s", ev.Describe(), e.Detail)
		}
	}
	evs := kv.view.Step(ports.Step{Kernel: kv.k, Event: ev, Effects: effects}, nil)
	kv.sameWithoutKernel(effects, evs)
	for _, e := range evs {
		if err := kv.enc.Encode(e); err != nil {
			kv.t.Fatal(err)
		}
	}
	return evs
}

// sameWithoutKernel checks that the records of one step, viewed without
// the kernel but with the context a workflow's query gives (paths, the
// started calls' arguments, the finished calls' results, the approval
// waits' expiry), make the events the step's view made.
func (kv *kernelView) sameWithoutKernel(effects []kernel.Effect, want []protocol.Event) {
	kv.t.Helper()
	c := protocol.Context{Paths: map[kernel.AgentID]string{}, Args: map[kernel.OpID]string{}, Results: map[kernel.OpID]string{}, Expires: map[string]bool{}}
	for _, e := range effects {
		if e.Kind == kernel.EffStartTool {
			c.Args[e.Op] = e.Call.Arguments
		}
	}
	var got []protocol.Event
	for _, e := range effects {
		if e.Kind != kernel.EffEmit {
			continue
		}
		l := e.Life
		for _, id := range []kernel.AgentID{l.Agent, l.Child} {
			if p := kv.k.AgentPath(id); p != "" {
				c.Paths[id] = p
			}
		}
		if l.Kind == kernel.LifeCallFinished {
			h := kv.k.Agent(l.Agent).History()
			for i := len(h) - 1; i >= 0; i-- {
				if h[i].Role == kernel.RoleTool && h[i].ToolCallID == l.CallID {
					c.Results[l.Op] = h[i].Content
					break
				}
			}
		}
		for _, w := range kv.k.Approvals(nil) {
			if w.Agent == l.Agent && w.CallID == l.CallID {
				c.Expires[l.CallID] = w.Expires
			}
		}
		got = append(got, kv.rec.Record(&l, c))
	}
	if !reflect.DeepEqual(got, want) {
		kv.t.Fatalf("the records viewed without the kernel:\n%+v\nwith it:\n%+v", got, want)
	}
}

// answer streams text (when not empty) and calls, then ends agent's
// request with usage.
func (kv *kernelView) answer(agent kernel.AgentID, text string, u *kernel.Usage, calls ...kernel.CallDelta) []protocol.Event {
	kv.t.Helper()
	op := kv.llm[agent]
	chunk := uint32(0)
	if text != "" {
		chunk++
		kv.do(kernel.TextDelta(0, op, chunk, text))
	}
	for _, c := range calls {
		chunk++
		kv.do(kernel.CallFragment(0, op, chunk, c))
	}
	end := kernel.LLMEnd(0, op)
	end.Usage = u
	return kv.do(end)
}

// lines validates every line written so far against the schema.
func (kv *kernelView) lines() []protocol.Event {
	kv.t.Helper()
	return protocheck.Lines(kv.t, kv.out.String())
}

// TestViewOfApprovalsAndProfiles: a call that asks for approval and is
// denied, and a delegation to a profile, read as the protocol says — the
// wait with its digest, when it ends and that it expires; its end with the
// note and how long it waited; the denied call's status and reason; the
// child's profile — and a freed child keeps its path: an event naming it
// after it was freed (a cancel, a stale decision) says main/scout, and so
// does a view made after it was freed (a resumed run's), which learns the
// path from the delegation in the log.
func TestViewOfApprovalsAndProfiles(t *testing.T) {
	kv := newKernelView(t, kernel.Config{Limits: kernel.DefaultLimits(), Ask: []string{"write_file"},
		Profiles: []kernel.Profile{{Name: "scout", Description: "looks around", System: "You scout.", Tools: []string{"read"}}}})
	kv.do(kernel.Submit(0, "go"))
	args := `{"path":"prod.yaml"}`
	evs := kv.answer(kernel.Root, "", &kernel.Usage{PromptTokens: 10, CompletionTokens: 5, CachedTokens: 4, ReasoningTokens: 2},
		kernel.CallDelta{Index: 0, ID: "c1", Name: "write_file", Args: args},
		kernel.CallDelta{Index: 1, ID: "c2", Name: kernel.DefaultDelegateTool, Args: `{"task":"look","name":"scout","profile":"scout"}`})
	asked := find(evs, protocol.TypeApprovalRequested, nil)
	if len(asked) != 1 || asked[0].CallID != "c1" || asked[0].Tool != "write_file" || asked[0].Arguments != args || asked[0].Args != args ||
		asked[0].Digest != kernel.Digest(args) || asked[0].EndsInMS != kernel.DefaultLimits().ApprovalTimeout.Milliseconds() || !asked[0].Expires {
		t.Errorf("approval_requested: %+v", asked)
	}
	if d := find(evs, protocol.TypeDelegated, nil); len(d) != 1 || d[0].Child != "main/scout" || d[0].Profile != "scout" || d[0].Name != "scout" {
		t.Errorf("delegated: %+v", d)
	}
	if u := find(evs, protocol.TypeOpEnded, nil); len(u) != 1 || u[0].OpKind != protocol.OpRequest ||
		*u[0].Usage != (protocol.Usage{PromptTokens: 10, CompletionTokens: 5, CachedTokens: 4, ReasoningTokens: 2, Requests: 1}) {
		t.Errorf("the request's end: %+v", u)
	}

	evs = kv.do(kernel.Deny(0, kernel.Root, "c1", "not prod"))
	res := find(evs, protocol.TypeApprovalResolved, nil)
	if len(res) != 1 || res[0].Approval != "denied" || res[0].Reason != "approval_denied" || res[0].Note != "not prod" || res[0].Digest != kernel.Digest(args) {
		t.Errorf("approval_resolved: %+v", res)
	}
	if f := find(evs, protocol.TypeCallFinished, nil); len(f) != 1 || f[0].Status != "denied" || f[0].Reason != "approval_denied" || f[0].Op != 0 || !strings.Contains(f[0].Result, "not prod") {
		t.Errorf("the denied call: %+v", f)
	}

	scout, ok := kv.k.Find("main/scout")
	if !ok {
		t.Fatal("no main/scout")
	}
	kv.answer(scout, "found", &kernel.Usage{PromptTokens: 3, CompletionTokens: 1})
	// The next step frees the child; events naming it keep its path.
	for _, ev := range []kernel.Event{kernel.Cancel(0, scout), kernel.Decide(0, scout, "x", "", kernel.VerdictDeny, "")} {
		for _, e := range kv.do(ev) {
			if e.Agent != "main/scout" {
				t.Errorf("%s after the child was freed names %q", e.Type, e.Agent)
			}
			if e.Type == protocol.TypeStale && e.CallID != "x" {
				t.Errorf("the stale decision's call: %+v", e)
			}
		}
	}
	if !kv.k.Agent(scout).Freed() {
		t.Fatal("the child was not freed")
	}
	late := protocol.NewView()
	for _, e := range late.Step(ports.Step{Kernel: kv.k, Effects: kv.k.Step(kernel.Cancel(0, scout))}, nil) {
		if e.Agent != "main/scout" {
			t.Errorf("a view made after the child was freed names it %q", e.Agent)
		}
	}

	evs = kv.answer(kernel.Root, "done", nil)
	root := find(evs, protocol.TypeTurnEnded, nil)
	if want := (protocol.Usage{PromptTokens: 13, CompletionTokens: 6, CachedTokens: 4, ReasoningTokens: 2, Requests: 3, Unreported: 1}); len(root) != 1 || *root[0].Usage != want {
		t.Errorf("the root's turn: %+v, want usage %+v", root, want)
	}
	if err := kv.enc.Encode(kv.view.Result("s.jsonl")); err != nil {
		t.Fatal(err)
	}
	lines := kv.lines()
	if r := lines[len(lines)-1]; r.Requests != 3 || r.Usage.Requests != 3 || r.Usage.CachedTokens != 4 {
		t.Errorf("result: %+v %+v", r, r.Usage)
	}
}

// TestViewOfACompaction: a child whose request the server refuses as too
// long compacts — its summarising request waits for the only request slot
// behind its sibling's (request_waiting, compaction true, n null), is sent
// (compaction_started, why context_length), ends with its usage (op_ended,
// op_kind compaction) and replaces the history (compacted, with the
// summary); the turn's usage counts the compaction's request.
func TestViewOfACompaction(t *testing.T) {
	limits := kernel.DefaultLimits()
	limits.MaxParallelRequests = 1
	kv := newKernelView(t, kernel.Config{Limits: limits})
	kv.do(kernel.Submit(0, "go"))
	kv.answer(kernel.Root, "", nil,
		kernel.CallDelta{Index: 0, ID: "d1", Name: kernel.DefaultDelegateTool, Args: `{"task":"a","name":"a"}`},
		kernel.CallDelta{Index: 1, ID: "d2", Name: kernel.DefaultDelegateTool, Args: `{"task":"b","name":"b"}`})
	a, _ := kv.k.Find("main/a")
	b, _ := kv.k.Find("main/b")
	evs := kv.do(kernel.LLMError(0, kv.llm[a], kernel.FailureContextLength, "context_length: too long"))
	var waits []protocol.Event
	waits = append(waits, find(evs, protocol.TypeRequestWaiting, nil)...)
	if len(waits) != 1 || waits[0].Agent != "main/a" || !waits[0].Compaction || waits[0].N != 0 {
		t.Errorf("the compaction's wait: %+v", waits)
	}
	evs = kv.answer(b, "b done", nil)
	started := find(evs, protocol.TypeCompactionStarted, nil)
	if len(started) != 1 || started[0].Agent != "main/a" || started[0].Why != "context_length" || started[0].Op == 0 {
		t.Fatalf("compaction_started: %+v", started)
	}
	evs = kv.answer(a, "the summary", &kernel.Usage{PromptTokens: 20, CompletionTokens: 3})
	done := find(evs, protocol.TypeCompacted, nil)
	if len(done) != 1 || done[0].Summary != "the summary" || done[0].Op != started[0].Op || done[0].Truncated {
		t.Errorf("compacted: %+v", done)
	}
	if e := find(evs, protocol.TypeOpEnded, nil); len(e) != 1 || e[0].OpKind != protocol.OpCompaction || e[0].Usage == nil || e[0].Usage.PromptTokens != 20 {
		t.Errorf("the compaction's end: %+v", e)
	}
	evs = kv.answer(a, "a done", &kernel.Usage{PromptTokens: 5, CompletionTokens: 2})
	if te := find(evs, protocol.TypeTurnEnded, func(e protocol.Event) bool { return e.Agent == "main/a" }); len(te) != 1 ||
		*te[0].Usage != (protocol.Usage{PromptTokens: 25, CompletionTokens: 5, Requests: 3, Unreported: 1}) {
		t.Errorf("main/a's turn: %+v", te)
	}
	kv.answer(kernel.Root, "ok", nil)
	kv.lines()
}

// TestDecisionOfAnInputLine: an approve or deny line becomes the kernel's
// decision, addressed to the agent whose call waits — named, or the one
// whose call has that id — with the verdict its "for" asks; a bare id two
// agents' calls wait under, and an agent that is not running, are refused.
func TestDecisionOfAnInputLine(t *testing.T) {
	kv := newKernelView(t, kernel.Config{Limits: kernel.DefaultLimits(), Ask: []string{"shell"}})
	kv.do(kernel.Submit(0, "go"))
	kv.answer(kernel.Root, "", nil,
		kernel.CallDelta{Index: 0, ID: "d1", Name: kernel.DefaultDelegateTool, Args: `{"task":"a","name":"a"}`},
		kernel.CallDelta{Index: 1, ID: "d2", Name: kernel.DefaultDelegateTool, Args: `{"task":"b","name":"b"}`})
	a, _ := kv.k.Find("main/a")
	b, _ := kv.k.Find("main/b")
	kv.answer(a, "", nil, kernel.CallDelta{Index: 0, ID: "s1", Name: "shell", Args: `{"cmd":"ls"}`})
	kv.answer(b, "", nil, kernel.CallDelta{Index: 0, ID: "s1", Name: "shell", Args: `{"cmd":"pwd"}`},
		kernel.CallDelta{Index: 1, ID: "s2", Name: "shell", Args: `{"cmd":"id"}`})
	for _, tc := range []struct {
		line    string
		agent   kernel.AgentID
		verdict kernel.Verdict
		refused string
	}{
		{line: `{"approve":"s2","digest":"` + kernel.Digest(`{"cmd":"id"}`) + `"}`, agent: b, verdict: kernel.VerdictApprove},
		{line: `{"approve":"s1","digest":"d","agent":"main/a","for":"tool"}`, agent: a, verdict: kernel.VerdictApproveTool},
		{line: `{"approve":"s1","digest":"d","agent":"a","for":"args"}`, agent: a, verdict: kernel.VerdictApproveArgs},
		{line: `{"deny":"s1","note":"no","agent":"main/b"}`, agent: b, verdict: kernel.VerdictDeny},
		{line: `{"deny":"old"}`, agent: kernel.Root, verdict: kernel.VerdictDeny},
		{line: `{"deny":"s1"}`, refused: "calls of main/a and main/b wait under the call id \"s1\""},
		{line: `{"deny":"s1","agent":"main/c"}`, refused: `no agent "main/c" is running`},
	} {
		in, err := protocol.ParseInput([]byte(tc.line))
		if err != nil {
			t.Fatalf("%s: %v", tc.line, err)
		}
		ev, err := in.Decision(kv.k)
		if tc.refused != "" {
			if err == nil || !errors.Is(err, protocol.ErrInput) || !strings.Contains(err.Error(), tc.refused) {
				t.Errorf("%s: %+v %v, want it refused saying %q", tc.line, ev, err, tc.refused)
			}
			continue
		}
		if err != nil || ev.Kind != kernel.EvDecision || ev.Agent != tc.agent || ev.Verdict != tc.verdict || ev.CallID != in.CallID || ev.Digest != in.Digest || ev.Text != in.Note {
			t.Errorf("%s: %+v %v", tc.line, ev, err)
		}
	}
	// The decision is the kernel's to apply: the first approves b's s2.
	in, _ := protocol.ParseInput([]byte(`{"approve":"s2","digest":"` + kernel.Digest(`{"cmd":"id"}`) + `"}`))
	ev, _ := in.Decision(kv.k)
	if r := find(kv.do(ev), protocol.TypeApprovalResolved, nil); len(r) != 1 || r[0].Agent != "main/b" || r[0].Approval != "approved" {
		t.Errorf("the decision applied: %+v", r)
	}
	if _, err := (protocol.Input{Kind: protocol.InputCancel}).Decision(kv.k); err == nil {
		t.Error("a cancel made a decision")
	}
	kv.lines()
}

// decider is a Decider on a kernelView: Decide steps the decision.
type decider struct{ kv *kernelView }

func (d decider) Inspect(_ context.Context, fn func(*kernel.Kernel)) error {
	fn(d.kv.k)
	return nil
}

func (d decider) Decide(_ context.Context, agent kernel.AgentID, callID, digest string, v kernel.Verdict, note string) error {
	d.kv.do(kernel.Decide(0, agent, callID, digest, v, note))
	return nil
}

// TestDecideHandsTheDecisionOn: Decide addresses a line's decision on the
// decider's kernel and hands it on — a denial with its note reaches the
// waiting call — and refuses a line it cannot address without handing
// anything on.
func TestDecideHandsTheDecisionOn(t *testing.T) {
	kv := newKernelView(t, kernel.Config{Limits: kernel.DefaultLimits(), Ask: []string{"shell"}})
	kv.do(kernel.Submit(0, "go"))
	kv.answer(kernel.Root, "", nil, kernel.CallDelta{Index: 0, ID: "s1", Name: "shell", Args: `{"cmd":"ls"}`})
	in, _ := protocol.ParseInput([]byte(`{"deny":"s1","agent":"main/gone"}`))
	if err := protocol.Decide(context.Background(), decider{kv}, in); !errors.Is(err, protocol.ErrInput) {
		t.Errorf("a decision for no running agent: %v", err)
	}
	in, _ = protocol.ParseInput([]byte(`{"deny":"s1","note":"not now"}`))
	if err := protocol.Decide(context.Background(), decider{kv}, in); err != nil {
		t.Fatal(err)
	}
	evs := kv.lines()
	if r := find(evs, protocol.TypeApprovalResolved, nil); len(r) != 1 || r[0].Approval != "denied" || r[0].Note != "not now" {
		t.Errorf("approval_resolved: %+v", r)
	}
}
