package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/escapement/escapement/kernel"
)

// TestCollisionsRefused: two servers whose names sanitise alike claim the
// same tool names: Start refuses, naming both servers and files, and stops
// what it started. Two servers of one name are refused before anything
// starts.
func TestCollisionsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newMemServer(t), newMemServer(t)
		ca, cb := a.config("a.b"), b.config("a_b")
		ca.File, cb.File = "one.json", "two.json"
		_, err := Start(context.Background(), Options{Servers: []ServerConfig{ca, cb}, PingInterval: -1})
		var ce *CollisionError
		if !errors.As(err, &ce) {
			t.Fatalf("Start = %v, want a CollisionError", err)
		}
		mustContain(t, "error", err.Error(), "MCP tool name mcp__a_b__", `of MCP server "a.b" (one.json)`, `of MCP server "a_b" (two.json)`, "rename one of the servers")

		cb.Name = "a.b"
		_, err = Start(context.Background(), Options{Servers: []ServerConfig{ca, cb}, PingInterval: -1})
		if err == nil {
			t.Fatal("two servers of one name accepted")
		}
		mustContain(t, "error", err.Error(), `two MCP servers are named "a.b": in one.json and in two.json`)
		if n := a.dials.Load() + b.dials.Load(); n != 2 {
			t.Errorf("%d sessions opened, want 2 (the first Start's; none for the second)", n)
		}
	})
}

// TestStartWithoutTypeSaysWhichTypesThereAre: a ServerConfig built in code
// (not by LoadConfig, which derives Type from command or url) without a Type
// is refused before anything starts, with an error naming the types to set.
func TestStartWithoutTypeSaysWhichTypesThereAre(t *testing.T) {
	_, err := Start(context.Background(), Options{Servers: []ServerConfig{{Name: "files", Command: "mcp-files"}}})
	if err == nil {
		t.Fatal("Start accepted a server without a type")
	}
	for _, want := range []string{`"files"`, `"stdio"`, `"http"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// TestSpecs: each tool offered as mcp__SERVER__TOOL with the server's input
// schema and description, in the server's order.
func TestSpecs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := newMemServer(t)
		c := startClient(t, Options{Servers: []ServerConfig{ms.config("srv")}})
		defer c.Close()
		var names []string
		for _, s := range c.Specs() {
			names = append(names, s.Name)
			var schema map[string]any
			if err := json.Unmarshal(s.Parameters, &schema); err != nil || schema["type"] != "object" || schema["properties"] == nil {
				t.Errorf("%s: parameters %s", s.Name, s.Parameters)
			}
			mustContain(t, "description", s.Description, "test tool", "(MCP server srv)")
		}
		want := []string{"mcp__srv__block", "mcp__srv__content", "mcp__srv__echo", "mcp__srv__env", "mcp__srv__exit", "mcp__srv__fail", "mcp__srv__flood", "mcp__srv__ignore", "mcp__srv__leak", "mcp__srv__leak-exit", "mcp__srv__pid", "mcp__srv__progress", "mcp__srv__spawn"}
		if !slices.Equal(names, want) {
			t.Errorf("names %v\nwant  %v", names, want)
		}
		var echo map[string]any
		_ = json.Unmarshal(c.Specs()[2].Parameters, &echo)
		if props, _ := echo["properties"].(map[string]any); props["text"] == nil {
			t.Errorf("the server's schema was not passed on: %v", echo)
		}
	})
}

// TestIdempotentFromAnnotations: the tools a server annotates
// readOnlyHint or idempotentHint are the ones a recovery runs again
// (docs/durable.md, "Recovery"); one with neither, or only other hints,
// is not.
func TestIdempotentFromAnnotations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := newMemServer(t)
		c := startClient(t, Options{Servers: []ServerConfig{ms.config("srv")}})
		defer c.Close()
		if got, want := c.Idempotent(), []string{"mcp__srv__echo", "mcp__srv__pid"}; !slices.Equal(got, want) {
			t.Errorf("Idempotent() = %v, want %v", got, want)
		}
	})
}

// TestInputSchemaNormalised: a schema without "properties" or "type"
// gets them; none at all is the empty object schema; one that is not an
// object schema (which chat APIs refuse) is the empty object schema, and
// the problem is named.
func TestInputSchemaNormalised(t *testing.T) {
	for _, tc := range []struct {
		in            any
		want, problem string
	}{
		{nil, `{"type":"object","properties":{}}`, ""},
		{map[string]any{"type": "object"}, `{"properties":{},"type":"object"}`, ""},
		{map[string]any{"properties": map[string]any{"a": map[string]any{"type": "string"}}, "required": []any{"a"}}, `{"properties":{"a":{"type":"string"}},"required":["a"],"type":"object"}`, ""},
		{"not a schema", `{"type":"object","properties":{}}`, "its input schema is not a JSON object"},
		{true, `{"type":"object","properties":{}}`, "its input schema is not a JSON object"},
		{map[string]any{"type": "string"}, `{"type":"object","properties":{}}`, `its input schema has type "string", not "object"`},
		{map[string]any{"type": []any{"object", "null"}}, `{"type":"object","properties":{}}`, `its input schema has type ["object","null"], not "object"`},
	} {
		got, problem := inputSchema(tc.in)
		if string(got) != tc.want || problem != tc.problem {
			t.Errorf("inputSchema(%v) = %s, %q; want %s, %q", tc.in, got, problem, tc.want, tc.problem)
		}
	}
}

// TestResultMapping: what the model gets for each kind of content, through
// the SDK's wire encoding from a real server.
func TestResultMapping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := newMemServer(t)
		c := startClient(t, Options{Servers: []ServerConfig{ms.config("srv")}, OutputLimit: 64 << 10})
		defer c.Close()
		for _, tc := range []struct {
			kind   string
			status kernel.ToolStatus
			want   string
		}{
			{"text", kernel.ToolOK, "one\ntwo"},
			{"error", kernel.ToolError, "no such file"},
			{"structured", kernel.ToolOK, `{"ok":true,"sum":3}`},
			{"structured+text", kernel.ToolOK, `{"ok": true, "sum": 3}`},
			{"structured+other", kernel.ToolOK, "the sum is 3\n{\"sum\":3}"},
			{"media", kernel.ToolOK, "here:\n[image: image/png, 1234 bytes]\n[audio: audio/wav, 10 bytes]\n[resource link: file:///a.txt (a.txt, text/plain, 2048 bytes)]\n[embedded resource: mem://notes, text/markdown]\n# notes\n[embedded resource: mem://blob, application/zip, 99 bytes]"},
			{"empty", kernel.ToolOK, "(the tool returned no content)"},
		} {
			r := c.Run(t.Context(), call("mcp__srv__content", `{"text":"`+tc.kind+`"}`))
			if r.Status != tc.status || r.Content != tc.want {
				t.Errorf("%s: got %v %q\nwant %v %q", tc.kind, r.Status, r.Content, tc.status, tc.want)
			}
		}
		r := c.Run(t.Context(), call("mcp__srv__content", `{"text":"huge"}`))
		if !strings.HasSuffix(r.Content, "\n[truncated: 36864 more bytes]") || len(r.Content) > 64<<10+40 {
			t.Errorf("huge: %d bytes ending %q", len(r.Content), r.Content[len(r.Content)-40:])
		}
	})
}

// TestBadCalls: unknown tools and non-object arguments are error results
// naming the problem; a server's protocol error is an error result and the
// session goes on.
func TestBadCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := newMemServer(t)
		c := startClient(t, Options{Servers: []ServerConfig{ms.config("srv")}})
		defer c.Close()
		for _, tc := range []struct{ name, args, want string }{
			{"mcp__srv__nope", `{}`, `error: mcp__srv__nope: unknown tool "mcp__srv__nope" (MCP tools: mcp__srv__block,`},
			{"mcp__srv__echo", `[1]`, "error: mcp__srv__echo: the arguments must be a JSON object"},
			{"mcp__srv__fail", `{}`, "error: mcp__srv__fail: the server refused the call: text must be a string (JSON-RPC error -32602)"},
		} {
			r := c.Run(t.Context(), call(tc.name, tc.args))
			if r.Status != kernel.ToolError || !strings.HasPrefix(r.Content, tc.want) {
				t.Errorf("%s %s: %v %q, want an error starting %q", tc.name, tc.args, r.Status, r.Content, tc.want)
			}
		}
		if r := c.Run(t.Context(), call("mcp__srv__echo", ``)); r.Status != kernel.ToolOK {
			t.Errorf("empty arguments (taken as {}): %+v", r)
		}
		if n := ms.dials.Load(); n != 1 {
			t.Errorf("%d sessions: a refused call must not end the session", n)
		}
	})
}

// TestProgressEvents: a server's progress notifications reach the observer
// with the call's op, agent and tool, in order; none after the call ended.
func TestProgressEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := newMemServer(t)
		ev := newEvents()
		c := startClient(t, Options{Servers: []ServerConfig{ms.config("srv")}, Observer: ev.add})
		defer c.Close()
		r := c.Run(t.Context(), call("mcp__srv__progress", `{}`))
		if r.Content != "done" {
			t.Fatalf("result %+v", r)
		}
		synctest.Wait()
		got := ev.of(EventProgress)
		if len(got) != 3 {
			t.Fatalf("progress events %+v", got)
		}
		for i, e := range got {
			if e.Op != 7 || e.Path != "main" || e.Tool != "mcp__srv__progress" || e.Server != "srv" || e.Progress != float64(i+1) || e.Total != 3 || e.Message != "step "+string(rune('1'+i)) {
				t.Errorf("event %d: %+v", i, e)
			}
		}
	})
}

// TestProgressFloodLimited: a server that sends 2000 progress notifications
// (1 KB messages) in one instant: the call ends with
// its result; the observer gets the burst (progressBurst events), their
// messages cut, and nothing more in that instant.
func TestProgressFloodLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := newMemServer(t)
		ev := newEvents()
		c := startClient(t, Options{Servers: []ServerConfig{ms.config("srv")}, Observer: ev.add})
		defer c.Close()
		if r := c.Run(t.Context(), call("mcp__srv__flood", `{}`)); r.Content != "flooded" {
			t.Fatalf("result %+v", r)
		}
		synctest.Wait()
		got := ev.of(EventProgress)
		if len(got) != progressBurst {
			t.Errorf("%d progress events, want %d (the burst)", len(got), progressBurst)
		}
		for _, e := range got {
			if len(e.Message) > progressMessageKeep+len("…") {
				t.Errorf("a progress message of %d bytes", len(e.Message))
			}
		}
	})
}
