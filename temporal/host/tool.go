package host

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/temporal/protocol"
)

// Tool is ToolActivity: it runs one tool call through the worker's tools
// and heartbeats every HeartbeatEvery while the tool runs, so a lost
// worker is noticed within the heartbeat timeout and a cancel reaches the
// tool within about one heartbeat: the tool's context ends, and the
// activity returns whatever the tool answered (ToolCancelled when it
// stopped), which the workflow steps as the cancel's acknowledgement.
func (a *Activities) Tool(ctx context.Context, req protocol.ToolRequest) (protocol.ToolResult, error) {
	toolCtx, stopTool := context.WithCancel(ctx)
	defer stopTool()
	stopBeat := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // owned: joined below
		defer wg.Done()
		every(stopBeat, req.HeartbeatEvery, func() { activity.RecordHeartbeat(ctx) })
	}()
	watch := watchWorkerStop(ctx, stopTool)
	r := a.runTool(toolCtx, ports.Call{Op: req.Op, Agent: req.Agent, Path: req.Path, ToolCall: req.Call})
	close(stopBeat)
	wg.Wait()
	if watch.close() {
		return protocol.ToolResult{}, errWorkerLost()
	}
	return protocol.ToolResult{Status: r.Status, Content: r.Content}, nil
}

// runTool runs a tool, turning a panic into an error result (never a
// crashed worker), as the live driver does.
func (a *Activities) runTool(ctx context.Context, call ports.Call) (r ports.ToolResult) {
	defer func() {
		if v := recover(); v != nil {
			r = ports.ToolResult{Status: kernel.ToolError, Content: fmt.Sprintf("tool %s panicked: %v", call.Name, v)}
		}
	}()
	return a.Tools.Run(ctx, call)
}

// Toolbox is ToolboxActivity: the worker's tools and which of them are
// idempotent.
func (a *Activities) Toolbox(context.Context) (protocol.Toolbox, error) {
	box := protocol.Toolbox{Idempotent: a.Idempotent}
	for _, s := range a.Specs {
		box.Tools = append(box.Tools, s.Name)
	}
	return box, nil
}

// errWorkerLost is what an activity returns when its worker stops while it
// runs: the workflow answers it as a lost worker at once.
func errWorkerLost() error {
	return temporal.NewApplicationErrorWithOptions("the worker stopped while this ran", protocol.WorkerLost, temporal.ApplicationErrorOptions{
		NonRetryable: true,
		Category:     temporal.ApplicationErrorCategoryBenign, // expected when a worker stops: not logged as an error
	})
}

// stopWatch watches the worker's stop channel for one activity: when the
// worker stops, the activity's work is cancelled (onStop) and the activity
// reports a lost worker.
type stopWatch struct {
	fired atomic.Bool
	quit  chan struct{}
	done  chan struct{}
}

func watchWorkerStop(ctx context.Context, onStop func()) *stopWatch {
	w := &stopWatch{quit: make(chan struct{}), done: make(chan struct{})}
	go func() { // owned: joined by close
		defer close(w.done)
		select {
		case <-activity.GetWorkerStopChannel(ctx):
			w.fired.Store(true)
			onStop()
		case <-w.quit:
		}
	}()
	return w
}

// close stops watching and reports whether the worker stopped.
func (w *stopWatch) close() bool {
	close(w.quit)
	<-w.done
	return w.fired.Load()
}
