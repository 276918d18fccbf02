package host

import (
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/temporal/protocol"
)

// Activities are the activities a worker runs: model requests through
// Model, tool calls through Tools. The API key and every other secret stay
// inside them: nothing in an activity's input or result carries one.
type Activities struct {
	// Model streams the requests (adapters/openai, or any ports.Model).
	Model ports.Model
	// Tools runs the calls (adapters/toolset, or any ports.Tools).
	Tools ports.Tools
	// Specs lists the tools Tools runs (for the toolbox's record).
	Specs []ports.ToolSpec
	// Idempotent names the tools that may run again after their worker
	// was lost (kernel.Config.Idempotent); toolset.Set and tools.Box say
	// which through their Idempotent method.
	Idempotent []string
}

// Register registers the workflow and a's activities under their
// protocol names.
func Register(r worker.Registry, a *Activities) {
	RegisterWorkflow(r)
	RegisterActivities(r, a)
}

// RegisterWorkflow registers the workflow alone (a worker that runs no
// activities: its model and tools run elsewhere).
func RegisterWorkflow(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(Tree, workflow.RegisterOptions{Name: protocol.Workflow})
}

// RegisterActivities registers a's activities alone (a worker with
// DisableWorkflowWorker).
func RegisterActivities(r worker.ActivityRegistry, a *Activities) {
	r.RegisterActivityWithOptions(a.Stream, activity.RegisterOptions{Name: protocol.StreamActivity})
	r.RegisterActivityWithOptions(a.Tool, activity.RegisterOptions{Name: protocol.ToolActivity})
	r.RegisterActivityWithOptions(a.Toolbox, activity.RegisterOptions{Name: protocol.ToolboxActivity})
}

// MaxHeartbeatThrottle is the longest the SDK may hold back an activity's
// heartbeat. A cancel reaches an activity only in a heartbeat's answer,
// and by default the SDK sends heartbeats at most every 80% of the
// heartbeat timeout (8s for the default 10s): far past the kernel's
// grace. Activities heartbeat every protocol.HeartbeatEvery; this lets
// each one through.
const MaxHeartbeatThrottle = 50 * time.Millisecond

// StopTimeout is how long a stopping worker waits for its activities to
// report (worker.Options.WorkerStopTimeout) when not set: they stop their
// work as soon as the worker stops and report it lost (a cancelled tool
// takes up to its kill grace), and a report the worker does not wait for
// is never sent: the workflow would learn of the loss only from the
// heartbeat timeout.
const StopTimeout = 10 * time.Second

// WorkerOptions returns o with what a worker of escapement's workflow
// needs: heartbeats not throttled past MaxHeartbeatThrottle, so cancels
// arrive within the kernel's grace, and a stop that waits for the
// activities' reports (StopTimeout, unless set).
func WorkerOptions(o worker.Options) worker.Options {
	if o.MaxHeartbeatThrottleInterval == 0 || o.MaxHeartbeatThrottleInterval > MaxHeartbeatThrottle {
		o.MaxHeartbeatThrottleInterval = MaxHeartbeatThrottle
	}
	if o.WorkerStopTimeout == 0 {
		o.WorkerStopTimeout = StopTimeout
	}
	return o
}
