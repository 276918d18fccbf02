package ports

import (
	"encoding/json"
	"strings"

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

// ProfileChoice is a profile a delegating model may name: its name and
// its one line (kernel.Profile's Name and Description).
type ProfileChoice struct {
	Name        string
	Description string
}

// DelegateSpecFor is the delegation tool's spec for an agent that may
// delegate to profiles (docs/semantics.md, "Profiles"): its arguments
// gain a required "profile", an enum of the profiles' names, and the
// description lists each with its line, so the model sees what each
// sub-agent is for. With no profiles it is DelegateSpec.
func DelegateSpecFor(name string, profiles []ProfileChoice) ToolSpec {
	spec := DelegateSpec(name)
	if len(profiles) == 0 {
		return spec
	}
	var lines strings.Builder
	lines.WriteString("which kind of sub-agent runs the task (its instructions, model and tools):")
	names := make([]string, len(profiles))
	for i, p := range profiles {
		names[i] = p.Name
		lines.WriteString("\n- " + p.Name)
		if d := strings.TrimSpace(p.Description); d != "" {
			lines.WriteString(": " + d)
		}
	}
	type str struct {
		Type        string   `json:"type"`
		Description string   `json:"description"`
		Enum        []string `json:"enum,omitempty"`
	}
	schema := struct {
		Type       string `json:"type"`
		Properties struct {
			Task    str `json:"task"`
			Profile str `json:"profile"`
			Name    str `json:"name"`
		} `json:"properties"`
		Required             []string `json:"required"`
		AdditionalProperties bool     `json:"additionalProperties"`
	}{Type: "object", Required: []string{"task", "profile"}}
	schema.Properties.Task = str{Type: "string", Description: "what the sub-agent must do, with everything it needs to know"}
	schema.Properties.Profile = str{Type: "string", Description: lines.String(), Enum: names}
	schema.Properties.Name = str{Type: "string", Description: "a short name for the sub-agent"}
	b, err := json.Marshal(schema)
	if err != nil {
		panic(err) // strings and slices of strings always marshal
	}
	spec.Parameters = b
	spec.Description = "Hand a self-contained task to a sub-agent of one of the profiles below, with its own context; its typed result (outcome, summary) comes back as this call's result. Sub-agents can run in parallel."
	return spec
}
