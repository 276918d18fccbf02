// Package agent is escapement's one-call Go API: build an agent from a
// model, its tools and its limits, run a turn with a context, read the
// turn's events as an iterator, and get a typed result.
//
//	ag, err := agent.New(agent.Config{Model: model, Tools: tools, Session: "work.jsonl"})
//	turn := ag.Run(ctx, "list the Go files here")
//	for ev := range turn.Events() {
//		fmt.Print(ev.Answer()) // the answer as it streams
//	}
//	res, err := turn.Result() // Answer, Outcome, Reason, Detail, Usage
//
// Cancelling the turn's context is the user's Esc, with the kernel's
// guarantees (docs/semantics.md): every stream and tool of the tree gets
// its cancel and a grace period, the turn ends interrupted with reason
// user_cancel, and no request follows. The turn's Result says so; it is
// not an error.
//
// An agent may delegate — the kernel's delegate tool is offered to its
// model — when its limits allow sub-agents (MaxDepth > 0, the default).
// With Config.Profiles each kind of agent has its own system prompt,
// model, tools and budgets (docs/semantics.md, "Profiles"): a delegation
// names the profile of the sub-agent it starts, and each request offers
// its agent's profile's tools only (adapters/profiles).
// With Config.Session the agent keeps a durable session (adapters/session):
// the transcript in a file, every event in a write-ahead log beside it;
// a new agent on the same file resumes it, and a turn a killed process
// left unfinished is continued (Continue).
//
// Underneath is the live driver (adapters/live), which a host that needs
// every input — interjections while a turn runs, cancelling one sub-agent,
// every Step as it happens — uses directly (Agent.Driver gives it too).
// docs/embedding.md compares the two.
package agent
