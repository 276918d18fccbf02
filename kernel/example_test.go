package kernel_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/escapement/escapement/kernel"
)

// Example drives one turn through Step by hand, the way a host does: feed an
// event, execute the effects it returns in order, feed the answers back as
// events. Here the host plays the model and the tool itself; the simulator
// (package sim) and the live driver (adapters/live) are two such hosts.
// docs/semantics.md says what each input does in each state.
func Example() {
	k := kernel.MustNew(kernel.Config{Limits: kernel.DefaultLimits()})

	// step feeds ev and prints what the kernel wants done, skipping the
	// timers (a host arms and stops them; none fires in this example).
	var llm, tool kernel.OpID
	step := func(ev kernel.Event) {
		for _, e := range k.Step(ev) {
			switch e.Kind {
			case kernel.EffStartLLM:
				llm = e.Op
				fmt.Printf("%-6v start_llm op=%d with %d messages\n", ev.At, e.Op, len(e.Messages))
			case kernel.EffStartTool:
				tool = e.Op
				fmt.Printf("%-6v start_tool op=%d %s(%s)\n", ev.At, e.Op, e.Call.Name, e.Call.Arguments)
			case kernel.EffEmit:
				if e.Life.Kind == kernel.LifeTurnEnded {
					fmt.Printf("%-6v turn %d ended: %s\n", ev.At, e.Life.Turn, e.Life.Outcome)
				}
			}
		}
	}

	ms := time.Millisecond
	step(kernel.Submit(0, "How many Go files are there?"))
	// The model streams one tool call in two fragments, then ends.
	step(kernel.CallFragment(100*ms, llm, 0, kernel.CallDelta{Index: 0, ID: "call_1", Name: "count_files", Args: `{"glob":`}))
	step(kernel.CallFragment(120*ms, llm, 1, kernel.CallDelta{Index: 0, Args: `"*.go"}`}))
	step(kernel.LLMEnd(150*ms, llm))
	// The tool answers; the kernel asks the model again with the result.
	step(kernel.ToolResult(400*ms, tool, kernel.ToolOK, "42"))
	step(kernel.TextDelta(500*ms, llm, 0, "There are "))
	step(kernel.TextDelta(520*ms, llm, 1, "42."))
	step(kernel.LLMEnd(550*ms, llm))

	root := k.Agent(kernel.Root)
	fmt.Println(root.State(), "quiescent:", k.Quiescent())
	for _, m := range root.History() {
		fmt.Printf("%-9s %q\n", m.Role, m.Content)
	}
	// Output:
	// 0s     start_llm op=2 with 1 messages
	// 150ms  start_tool op=4 count_files({"glob":"*.go"})
	// 400ms  start_llm op=6 with 3 messages
	// 550ms  turn 1 ended: completed
	// Idle quiescent: true
	// user      "How many Go files are there?"
	// assistant ""
	// tool      "42"
	// assistant "There are 42."
}

// Example_cancel is the user pressing Esc mid-answer: one Step cancels the
// stream, and once the stream acknowledges the cancel the turn ends
// interrupted, its partial text kept (flagged) and one marker telling the
// next request that the turn was cut off (F6, F7). No request follows until
// the user submits again (F1).
func Example_cancel() {
	k := kernel.MustNew(kernel.Config{Limits: kernel.DefaultLimits()})
	var llm kernel.OpID
	for _, e := range k.Step(kernel.Submit(0, "Write a long poem.")) {
		if e.Kind == kernel.EffStartLLM {
			llm = e.Op
		}
	}
	k.Step(kernel.TextDelta(300*time.Millisecond, llm, 0, "Roses are red,"))

	for _, e := range k.Step(kernel.Cancel(time.Second, kernel.Root)) {
		if e.Kind == kernel.EffCancelLLM {
			fmt.Println("cancel_llm op", e.Op, "- state", k.AgentState(kernel.Root))
		}
	}
	// The stream stops and says so; the turn ends.
	for _, e := range k.Step(kernel.LLMError(1100*time.Millisecond, llm, kernel.FailureCancelled, "context canceled")) {
		if e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeTurnEnded {
			fmt.Println("turn ended:", e.Life.Outcome, e.Life.Reason)
		}
	}
	for _, m := range k.Agent(kernel.Root).History() {
		fmt.Printf("%-9s partial=%-5v marker=%-5v %q\n", m.Role, m.Partial, m.Marker, m.Content)
	}
	fmt.Println(k.AgentState(kernel.Root), "quiescent:", k.Quiescent())
	// Output:
	// cancel_llm op 2 - state Interrupted
	// turn ended: interrupted user_cancel
	// user      partial=false marker=false "Write a long poem."
	// assistant partial=true  marker=false "Roses are red,"
	// user      partial=false marker=true  "<turn_aborted outcome=\"interrupted\" reason=\"user_cancel\" partial=\"true\">The previous turn ended before it finished; the assistant message above it was cut off. Calls without their own results did not complete.</turn_aborted>"
	// Idle quiescent: true
}

// Example_approval is a call that waits for a person: Config.Ask names the
// tool, its request says what it would run and the digest of its
// arguments, and a decision naming that digest lets it start. A decision
// for other arguments is refused and changes nothing (docs/semantics.md,
// "Approvals").
func Example_approval() {
	k := kernel.MustNew(kernel.Config{Limits: kernel.DefaultLimits(), Ask: []string{"shell"}})
	var llm kernel.OpID
	for _, e := range k.Step(kernel.Submit(0, "Clean the build.")) {
		if e.Kind == kernel.EffStartLLM {
			llm = e.Op
		}
	}
	k.Step(kernel.CallFragment(0, llm, 1, kernel.CallDelta{Index: 0, ID: "call_1", Name: "shell", Args: `{"command":"rm -rf build"}`}))
	var digest string
	for _, e := range k.Step(kernel.LLMEnd(time.Second, llm)) {
		if e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeApprovalRequested {
			l := e.Life
			digest = l.Digest
			fmt.Printf("%s asks to run %s %s (digest %s, %v to decide)\n", k.AgentPath(l.Agent), l.Name, l.Text, l.Digest, l.Delay)
		}
	}
	for _, e := range k.Step(kernel.Approve(2*time.Second, kernel.Root, "call_1", "0123456789abcdef")) {
		if e.Kind == kernel.EffError {
			fmt.Println("refused:", errors.Is(e.Err, kernel.ErrDigestMismatch))
		}
	}
	for _, e := range k.Step(kernel.Approve(3*time.Second, kernel.Root, "call_1", digest)) {
		switch {
		case e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeApprovalResolved:
			fmt.Println("call_1:", e.Life.Approval)
		case e.Kind == kernel.EffStartTool:
			fmt.Printf("start_tool %s(%s)\n", e.Call.Name, e.Call.Arguments)
		}
	}
	// Output:
	// main asks to run shell {"command":"rm -rf build"} (digest ad1686665270a1d1, 5m0s to decide)
	// refused: true
	// call_1: approved
	// start_tool shell({"command":"rm -rf build"})
}
