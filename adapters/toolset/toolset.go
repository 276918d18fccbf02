// Package toolset combines tools from several places into the one
// ports.Toolbox an agent (adapters/agent) or a live.Driver takes: escapement's workspace tools and shell
// (adapters/tools), MCP servers (adapters/mcp), and a program's own Go
// functions, each with its own schema. A call is routed by its tool name;
// names must be unique across the whole set, so a collision is an error
// when the tool is added, never a silent shadowing at run time.
//
//	set, err := toolset.New(box, mcpClient)
//	err = set.AddFunc(ports.ToolSpec{Name: "now", Description: "the current time",
//		Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
//		func(ctx context.Context, args json.RawMessage) (string, error) {
//			return time.Now().Format(time.RFC3339), nil
//		})
//	model, _ := openai.New(openai.Config{Tools: set.Specs(), ...})
//	driver, _ := live.New(live.Config{Tools: set, Model: model, ...})
//
// Build the set before the driver runs (Specs and Run are then safe for
// concurrent use: calls run in parallel); Example runs a call of each kind.
package toolset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// Func is a tool written as a Go function. It gets the call's arguments
// (a JSON object, as the model wrote them) and returns the result text,
// or an error the model sees as an error result. ctx ends when the kernel
// cancels the call (a user's interrupt, a timeout): return promptly then,
// or the call is abandoned after the grace period and the function's late
// return is dropped.
type Func func(ctx context.Context, args json.RawMessage) (string, error)

// Set is a ports.Tools made of other tools. The zero value is not usable;
// call New.
type Set struct {
	mu      sync.RWMutex
	route   map[string]ports.Tools // by tool name
	from    map[string]string      // by tool name: what added it, for errors
	specs   []ports.ToolSpec
	members []ports.Toolbox
	// idempotent: the tools their group says may run again (Idempotent).
	idempotent map[string]bool
}

// New returns a set holding groups, in order (Add for each). *tools.Box and
// *mcp.Client are groups, and so is a Set.
func New(groups ...ports.Toolbox) (*Set, error) {
	s := &Set{route: map[string]ports.Tools{}, from: map[string]string{}, idempotent: map[string]bool{}}
	for _, g := range groups {
		if err := s.Add(g); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Add adds every tool of g. It refuses g whole, adding nothing, when one of
// its tools has a name already in the set, or a name the model cannot
// call (^[a-zA-Z0-9_-]{1,64}$). The set reads g's Specs (and which of its
// tools are idempotent) once, here: a group's later tools are not seen.
func (s *Set) Add(g ports.Toolbox) error {
	specs := g.Specs()
	src := fmt.Sprintf("%T", g)
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for _, sp := range specs {
		if err := s.checkName(sp.Name, src); err != nil {
			return err
		}
		if seen[sp.Name] {
			return fmt.Errorf("toolset: %s lists the tool %q twice", src, sp.Name)
		}
		seen[sp.Name] = true
	}
	for _, sp := range specs {
		s.route[sp.Name] = g
		s.from[sp.Name] = src
		s.specs = append(s.specs, sp)
	}
	if idem, ok := g.(interface{ Idempotent() []string }); ok {
		for _, name := range idem.Idempotent() {
			if seen[name] {
				s.idempotent[name] = true
			}
		}
	}
	s.members = append(s.members, g)
	return nil
}

// Idempotent names the set's tools that may run again after a crash (a
// call of one in flight is run again by the recovery; any other tool's is
// answered tool_lost: kernel.Config.Idempotent, docs/durable.md), in
// Specs' order: the ones their group names through an Idempotent method
// when it is added — *tools.Box's readers, *mcp.Client's tools annotated
// idempotentHint or readOnlyHint, a nested Set's. A function's tool
// (AddFunc) is not idempotent.
func (s *Set) Idempotent() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for _, sp := range s.specs {
		if s.idempotent[sp.Name] {
			out = append(out, sp.Name)
		}
	}
	return out
}

// AddFunc adds one tool that fn runs. spec names it, tells the model what
// it is for and gives the JSON Schema of its arguments; empty Parameters
// mean no arguments (an empty object schema).
func (s *Set) AddFunc(spec ports.ToolSpec, fn Func) error {
	if fn == nil {
		return fmt.Errorf("toolset: tool %q has no function", spec.Name)
	}
	if len(spec.Parameters) == 0 {
		spec.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	var schema map[string]json.RawMessage
	if err := json.Unmarshal(spec.Parameters, &schema); err != nil || schema == nil {
		return fmt.Errorf("toolset: tool %q: parameters must be a JSON Schema object", spec.Name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkName(spec.Name, "AddFunc"); err != nil {
		return err
	}
	s.route[spec.Name] = funcTool{name: spec.Name, fn: fn}
	s.from[spec.Name] = "AddFunc"
	s.specs = append(s.specs, spec)
	return nil
}

// checkName refuses a name the model cannot call or the set already has.
func (s *Set) checkName(name, src string) error {
	if !validName(name) {
		return fmt.Errorf("toolset: %s: tool name %q is not a function name (^[a-zA-Z0-9_-]{1,64}$)", src, name)
	}
	if prev, ok := s.from[name]; ok {
		return fmt.Errorf("toolset: tool %q of %s is already in the set (from %s); tool names must be unique", name, src, prev)
	}
	return nil
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Specs lists every tool for the model, in the order they were added.
func (s *Set) Specs() []ports.ToolSpec {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.specs)
}

// Run routes a call to the tool of its name; an unknown name is an error
// result listing the tools there are.
func (s *Set) Run(ctx context.Context, call ports.Call) ports.ToolResult {
	s.mu.RLock()
	t, ok := s.route[call.Name]
	var names []string
	if !ok {
		for _, sp := range s.specs {
			names = append(names, sp.Name)
		}
	}
	s.mu.RUnlock()
	if !ok {
		return ports.ToolResult{Status: kernel.ToolError, Content: fmt.Sprintf("error: unknown tool %q (available: %s)", call.Name, strings.Join(names, ", "))}
	}
	return t.Run(ctx, call)
}

// Close closes every group that has a Close method (io.Closer), the last
// added first, and returns their errors joined. MCP servers are stopped
// here.
func (s *Set) Close() error {
	s.mu.RLock()
	members := slices.Clone(s.members)
	s.mu.RUnlock()
	var errs []error
	for _, m := range slices.Backward(members) {
		if c, ok := m.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// KillAll calls KillAll on every group that has one (the shell's process
// groups, MCP server processes): the host's hard exit.
func (s *Set) KillAll() {
	s.mu.RLock()
	members := slices.Clone(s.members)
	s.mu.RUnlock()
	for _, m := range members {
		if k, ok := m.(interface{ KillAll() }); ok {
			k.KillAll()
		}
	}
}

// ReadOnly names the tools of the groups that say which of theirs change
// nothing (a ReadOnly method: *tools.Box, *mcp.Client, a Set), in the
// order they were added; a tool AddFunc added is never in it.
func (s *Set) ReadOnly() []string {
	s.mu.RLock()
	members := slices.Clone(s.members)
	s.mu.RUnlock()
	var out []string
	for _, m := range members {
		if r, ok := m.(interface{ ReadOnly() []string }); ok {
			out = append(out, r.ReadOnly()...)
		}
	}
	return out
}

// funcTool runs a Func.
type funcTool struct {
	name string
	fn   Func
}

func (f funcTool) Run(ctx context.Context, call ports.Call) ports.ToolResult {
	args := json.RawMessage(call.Arguments)
	if len(strings.TrimSpace(call.Arguments)) == 0 {
		args = json.RawMessage(`{}`)
	}
	out, err := f.fn(ctx, args)
	switch {
	case err == nil:
		return ports.ToolResult{Status: kernel.ToolOK, Content: out}
	case ctx.Err() != nil:
		return ports.ToolResult{Status: kernel.ToolCancelled, Content: "cancelled: " + err.Error()}
	}
	return ports.ToolResult{Status: kernel.ToolError, Content: "error: " + f.name + ": " + err.Error()}
}
