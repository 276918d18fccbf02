package ports

import (
	"encoding/json"

	"github.com/escapement/escapement/kernel"
)

// DelegateSpec is the spec of the kernel's delegation tool, named name
// (kernel.Config.DelegateTool; kernel.DefaultDelegateTool when empty). The
// kernel, not a Tools, runs it: it spawns the sub-agent and answers the call
// with the child's typed result (docs/semantics.md, "Results"). A model
// must be offered it for its agent to delegate; adapters/agent and
// adapters/tools.Box do that, a program with tools of its own appends it to
// the model's tools.
func DelegateSpec(name string) ToolSpec {
	if name == "" {
		name = kernel.DefaultDelegateTool
	}
	return ToolSpec{Name: name, Description: "Hand a self-contained task to a sub-agent with its own context; its typed result (outcome, summary) comes back as this call's result. Sub-agents can run in parallel.",
		Parameters: DelegateSchema()}
}

// DelegateSchema is the JSON Schema of the delegation tool's arguments: the
// task (required) and a short name for the sub-agent, as the kernel parses
// them (a new copy each call).
func DelegateSchema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"task":{"type":"string","description":"what the sub-agent must do, with everything it needs to know"},"name":{"type":"string","description":"a short name for the sub-agent"}},"required":["task"],"additionalProperties":false}`)
}

// Toolbox is a Tools that describes its tools: the specs a model is offered
// for them (adapters/tools.Box, adapters/mcp.Client, adapters/toolset.Set).
type Toolbox interface {
	Tools
	// Specs lists the tools Run runs, each name once.
	Specs() []ToolSpec
}
