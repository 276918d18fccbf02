package protocol

import "github.com/escapement/escapement/kernel"

// Page is LifecycleQuery's answer: the lifecycle records of one run from
// the sequence number asked for, and the root's state now. A client reads
// a tree by asking for Next until the run says it is Closing, then moves
// to the next run (remote.Follow does that).
type Page struct {
	// Run numbers this run in its workflow's chain (0 for the first;
	// each Continue-As-New adds one). Sequence numbers restart with
	// every run.
	Run int `json:"run"`
	// Records are the lifecycle records from the sequence number asked
	// for (or from Oldest, when older ones are no longer held), in order.
	Records []kernel.Lifecycle `json:"records,omitempty"`
	// Next is the sequence number to ask for next; More says the run
	// holds records from Next on already (the page was full). Oldest is
	// the oldest it still holds (a client that asked for less missed
	// Oldest-asked).
	Next   uint64 `json:"next"`
	More   bool   `json:"more,omitempty"`
	Oldest uint64 `json:"oldest"`
	// Paths names the agents the records mention, by id.
	Paths map[kernel.AgentID]string `json:"paths,omitempty"`
	// Args holds the arguments of the calls whose tool_started records
	// are on this page, by op (the records carry only the tool's name).
	Args map[kernel.OpID]string `json:"args,omitempty"`
	// Results holds the results of the calls whose call_finished records
	// are on this page, by op: the tool message the agent's history got
	// (the protocol's call_finished result).
	Results map[kernel.OpID]string `json:"results,omitempty"`
	// Expires says, by call id, for the approval_requested records on this
	// page, whether the wait ends by expiring rather than by its turn's
	// deadline (the protocol's expires).
	Expires map[string]bool `json:"expires,omitempty"`
	// Limits are the tree's limits and Tools the names of the tools its
	// model is offered (the worker's), for a client's started event;
	// Tools is empty until the run is Ready.
	Limits kernel.Limits `json:"limits"`
	Tools  []string      `json:"tools,omitempty"`
	// Busy says whether the root works on a turn (not Idle); Turn is its
	// current (or last) turn's number.
	Busy bool   `json:"busy"`
	Turn uint64 `json:"turn"`
	// Closing is set once the run takes no more input: "continue" (it
	// continues as new once the tree is idle; its successor goes on) or
	// "shutdown" (the tree was shut down; the workflow ends).
	Closing string `json:"closing,omitempty"`
	// Ready is false while the run has not built its kernel yet (it waits
	// for a worker to describe its tools); no records exist then.
	Ready bool `json:"ready"`
}

// Closing values.
const (
	ClosingContinue = "continue"
	ClosingShutdown = "shutdown"
)
