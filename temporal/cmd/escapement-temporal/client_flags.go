package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/escapement/escapement/internal/headless"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/temporal/protocol"
)

// What chat does with a line typed while a turn runs (--while-busy), as
// in the escapement CLI.
const (
	busyInterject = "interject"
	busyQueue     = "queue"
)

// clientFlags are run's and chat's: the escapement CLI's flags that
// configure the tree (its limits, the system prompt, the output), plus
// where the workflow is.
type clientFlags struct {
	conn      connFlags
	workflow  string
	json      bool
	system    string
	whileBusy string
	limits    kernel.Limits
	opts      protocol.Options
	poll      time.Duration

	// The escapement CLI's flags that belong to the worker here (the
	// model and the tools run there) or have no counterpart (the
	// workflow's history is the session): refused, with the reason.
	workerOnly  map[string]*string
	noCounter   map[string]*string
	allowShell  bool
	workerLists map[string]*[]string
}

func (f *clientFlags) register(cmd *cobra.Command, chat bool) {
	f.conn.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.workflow, "workflow", "", "the tree's workflow `ID`: attach to it when it runs (its turn goes on; its configuration stands), else start it under that id (default: a new id, printed on stderr)")
	fl.BoolVar(&f.json, "json", false, "print lifecycle events as JSON Lines on stdout (for scripts) instead of the answer text")
	fl.StringVar(&f.system, "system", "", "system prompt of the root agent")
	if chat {
		fl.StringVar(&f.whileBusy, "while-busy", "", "what a line typed while a turn runs does: interject (join the running turn) or queue (start the next turn after it); default interject when stdin is a terminal, queue otherwise")
	}
	headless.RegisterLimits(fl, &f.limits)
	fl.DurationVar(&f.opts.HeartbeatTimeout, "heartbeat-timeout", protocol.DefaultHeartbeatTimeout, "how long a worker may stay silent before its requests and tool calls count as lost (keep it under --first-token-timeout and --stall-timeout)")
	fl.DurationVar(&f.opts.ChunkEvery, "chunk-every", protocol.DefaultChunkEvery, "how often a streaming worker sends the chunks it has to the tree (each batch is one history event)")
	fl.IntVar(&f.opts.ContinueAfterEvents, "continue-after-events", protocol.DefaultContinueAfterEvents, "continue the workflow as new at the next idle point once its history holds this many events")
	fl.DurationVar(&f.poll, "poll", 100*time.Millisecond, "how often the client reads the tree's lifecycle")
	f.workerOnly = map[string]*string{"model": new(string), "base-url": new(string), "workspace": new(string)}
	for name, p := range f.workerOnly {
		fl.StringVar(p, name, "", "the worker's flag here: pass it to escapement-temporal worker")
		_ = fl.MarkHidden(name)
	}
	fl.BoolVar(&f.allowShell, "allow-shell", false, "the worker's flag here")
	_ = fl.MarkHidden("allow-shell")
	f.workerLists = map[string]*[]string{"tool-env": new([]string), "mcp-config": new([]string)}
	for name, p := range f.workerLists {
		fl.StringArrayVar(p, name, nil, "the worker's flag here")
		_ = fl.MarkHidden(name)
	}
	f.noCounter = map[string]*string{"session": new(string), "resume": new(string), "trace": new(string)}
	for name, p := range f.noCounter {
		fl.StringVar(p, name, "", "no counterpart on Temporal")
		_ = fl.MarkHidden(name)
	}
}

// validate names the flag of the first bad value.
func (f *clientFlags) validate(cmd *cobra.Command) error {
	for _, name := range []string{"model", "base-url", "workspace", "allow-shell", "tool-env", "mcp-config"} {
		if cmd.Flags().Changed(name) {
			return usageErr("--%s is the worker's flag on Temporal (the model and the tools run there): pass it to escapement-temporal worker", name)
		}
	}
	for _, name := range []string{"session", "resume", "trace"} {
		if cmd.Flags().Changed(name) {
			return usageErr("--%s has no counterpart on Temporal: the workflow's history is the session; continue a tree with --workflow ID", name)
		}
	}
	for _, spec := range kernel.LimitTable() {
		if err := spec.Check(spec.Get(f.limits)); err != nil {
			return usageErr("--%s %v", spec.Flag, err)
		}
	}
	switch f.whileBusy {
	case "", busyInterject, busyQueue:
	default:
		return usageErr("--while-busy %q: want interject or queue", f.whileBusy)
	}
	if f.opts.HeartbeatTimeout <= 0 || f.opts.ChunkEvery <= 0 || f.opts.ContinueAfterEvents <= 0 || f.poll <= 0 {
		return usageErr("--heartbeat-timeout, --chunk-every, --continue-after-events and --poll must be positive")
	}
	return nil
}

// tree is a new workflow's input.
func (f *clientFlags) tree() protocol.Tree {
	return protocol.Tree{Limits: f.limits, System: f.system, Options: f.opts}
}
