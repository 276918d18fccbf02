// Package approval is what a command-line host does about tool calls that
// wait for a person's approval (docs/semantics.md, "Approvals";
// docs/live.md, "Approvals"): which tools ask (Resolve, the CLI's --ask),
// and who answers — a person at a terminal (Prompt), a program writing the
// protocol's approve and deny lines on stdin (adapters/protocol), or, when
// neither can, a policy that denies every request at once (Unattended), so
// that a run nobody attends never hangs on a question nobody sees.
package approval

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// The groups --ask names besides single tools.
const (
	// All: every tool but the delegate tool asks.
	All = "all"
	// Writes: every tool that can change something asks — each tool its
	// toolbox does not list as read-only (write_file, shell, and the MCP
	// tools whose annotations do not say readOnlyHint: true).
	Writes = "writes"
)

// Resolve turns --ask values into kernel.Config.Ask: tool names, in the
// order tools lists them, or "*" for All. readOnly names the tools that
// change nothing (a toolbox's ReadOnly method: *tools.Box, *mcp.Client,
// *toolset.Set); delegate is the delegate tool's name ("" for the
// default), which never asks. A name that is no tool of tools is an error
// naming the tools there are: a typo must not leave a tool unasked.
func Resolve(asks []string, tools []ports.ToolSpec, readOnly []string, delegate string) ([]string, error) {
	delegate = cmp.Or(delegate, kernel.DefaultDelegateTool)
	want := map[string]bool{}
	for _, a := range asks {
		a = strings.TrimSpace(a)
		switch {
		case a == All:
			return []string{"*"}, nil
		case a == Writes:
			for _, t := range tools {
				if t.Name != delegate && !slices.Contains(readOnly, t.Name) {
					want[t.Name] = true
				}
			}
		case a == delegate:
			return nil, fmt.Errorf("%q hands a task to a sub-agent and never asks (the sub-agent's own calls do)", a)
		case !offered(tools, a):
			return nil, fmt.Errorf("%q is no tool of this run%s; its tools are %s (and %s, %s name groups)", a, hint(a), names(tools, delegate), All, Writes)
		default:
			want[a] = true
		}
	}
	var out []string
	for _, t := range tools {
		if want[t.Name] {
			out = append(out, t.Name)
		}
	}
	return out, nil
}

func offered(tools []ports.ToolSpec, name string) bool {
	return slices.ContainsFunc(tools, func(t ports.ToolSpec) bool { return t.Name == name })
}

// hint says how a tool the CLI can offer is offered.
func hint(name string) string {
	if name == "shell" {
		return " (the shell tool is offered with --allow-shell)"
	}
	return ""
}

func names(tools []ports.ToolSpec, delegate string) string {
	var out []string
	for _, t := range tools {
		if t.Name != delegate {
			out = append(out, t.Name)
		}
	}
	return strings.Join(out, ", ")
}

// ReadOnly is what box says of its tools that change nothing (its
// ReadOnly method), or nothing when it does not say: then every tool of
// it counts as one that can change something.
func ReadOnly(box any) []string {
	if r, ok := box.(interface{ ReadOnly() []string }); ok {
		return r.ReadOnly()
	}
	return nil
}
