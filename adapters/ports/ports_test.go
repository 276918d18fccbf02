package ports

import (
	"encoding/json"
	"testing"

	"github.com/escapement/escapement/kernel"
)

// TestDelegateSpec: the delegation tool is named as the kernel names it
// unless renamed, and its schema is a JSON object schema requiring the task;
// each call gets a copy of the schema of its own.
func TestDelegateSpec(t *testing.T) {
	if got := DelegateSpec("").Name; got != kernel.DefaultDelegateTool {
		t.Errorf("default name %q, want %q", got, kernel.DefaultDelegateTool)
	}
	spec := DelegateSpec("handoff")
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(spec.Parameters, &schema); err != nil || spec.Name != "handoff" {
		t.Fatalf("spec %+v: %v", spec, err)
	}
	if schema.Type != "object" || schema.Properties["task"] == nil || len(schema.Required) != 1 || schema.Required[0] != "task" {
		t.Errorf("schema %s: want an object requiring task", spec.Parameters)
	}
	spec.Parameters[0] = 'x'
	if DelegateSchema()[0] != '{' {
		t.Error("a caller's change to its schema reached the next caller")
	}
}
