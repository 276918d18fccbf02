package ports

import (
	"encoding/json"
	"strings"
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

// TestDelegateSpecForProfiles: an agent that may delegate to profiles is
// offered a schema that requires one of them by name (an enum) and tells
// the model each one's line; without profiles the spec is DelegateSpec's.
func TestDelegateSpecForProfiles(t *testing.T) {
	spec := DelegateSpecFor("", []ProfileChoice{{Name: "reviewer", Description: "reads code and reports problems"}, {Name: "coder"}})
	var schema struct {
		Properties struct {
			Profile struct {
				Description string   `json:"description"`
				Enum        []string `json:"enum"`
			} `json:"profile"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(spec.Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	p := schema.Properties.Profile
	if len(p.Enum) != 2 || p.Enum[0] != "reviewer" || p.Enum[1] != "coder" || len(schema.Required) != 2 || schema.Required[1] != "profile" {
		t.Fatalf("schema %s: want profile required, an enum of reviewer and coder", spec.Parameters)
	}
	if !strings.Contains(p.Description, "- reviewer: reads code and reports problems") || !strings.Contains(p.Description, "- coder") {
		t.Errorf("the profile's description %q does not list each profile with its line", p.Description)
	}
	if plain := DelegateSpecFor("", nil); string(plain.Parameters) != string(DelegateSchema()) {
		t.Errorf("without profiles the schema is %s", plain.Parameters)
	}
}
