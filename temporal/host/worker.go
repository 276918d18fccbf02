package host

import (
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/temporal/protocol"
)

// Activities are the activities a worker runs: model requests through
// Model, tool calls through Tools. The API key and every other secret stay
// inside them: nothing in an activity's input or result carries one.
type Activities struct {
	// Model streams the requests (adapters/openai, or any live.Model).
	Model live.Model
	// Tools runs the calls (adapters/toolset, or any live.Tools).
	Tools live.Tools
	// Specs lists the tools Tools runs (for the toolbox's record).
	Specs []live.ToolSpec
	// Idempotent names the tools that may run again after their worker
	// was lost (kernel.Config.Idempotent); toolset.Set and tools.Box say
	// which through their Idempotent method.
	Idempotent []string
}

// Register registers the workflow and a's activities under their
// protocol names.
func Register(r worker.Registry, a *Activities) {
	r.RegisterWorkflowWithOptions(Tree, workflow.RegisterOptions{Name: protocol.Workflow})
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

// WorkerOptions returns o with what a worker of escapement's workflow
// needs: heartbeats not throttled past MaxHeartbeatThrottle, so cancels
// arrive within the kernel's grace.
func WorkerOptions(o worker.Options) worker.Options {
	if o.MaxHeartbeatThrottleInterval == 0 || o.MaxHeartbeatThrottleInterval > MaxHeartbeatThrottle {
		o.MaxHeartbeatThrottleInterval = MaxHeartbeatThrottle
	}
	return o
}
