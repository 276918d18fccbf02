package mcp

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// rawRolePrefix makes the test binary a hand-written stdio MCP server that
// speaks JSON-RPC line by line and misbehaves as the rest of the role says
// (rawServer's scenarios): what a server written against no SDK, or a
// buggy one, sends.
const rawRolePrefix = "raw:"

// rawServer is the misbehaving server's state: the scenario, its stdout
// (one writer: replies from the reader loop and a tool's goroutine do not
// interleave), and the answers the server got to its own requests.
type rawServer struct {
	scenario string
	mu       sync.Mutex
	out      *bufio.Writer
	replies  chan map[string]json.RawMessage // answers to the server's requests
}

// serveRaw runs the raw server on stdin and stdout until stdin ends.
func serveRaw(scenario string) int {
	s := &rawServer{scenario: scenario, out: bufio.NewWriterSize(os.Stdout, 1<<16), replies: make(chan map[string]json.RawMessage, 16)}
	if scenario == "banner" {
		s.line("Weather MCP server v1.2 starting on stdio...")
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<16)
	for {
		b, err := in.ReadBytes('\n')
		if len(b) > 0 {
			var msg map[string]json.RawMessage
			if json.Unmarshal(b, &msg) != nil {
				fmt.Fprintf(os.Stderr, "raw server: not JSON: %q\n", b)
				continue
			}
			if _, ok := msg["method"]; !ok {
				s.replies <- msg
				continue
			}
			s.handle(msg)
		}
		if err == io.EOF {
			return 0
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "raw server:", err)
			return 1
		}
	}
}

// line writes one line to stdout and flushes it.
func (s *rawServer) line(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.out.WriteString(text)
	s.out.WriteByte('\n')
	s.out.Flush()
}

// send writes one JSON-RPC message.
func (s *rawServer) send(msg map[string]any) {
	msg["jsonrpc"] = "2.0"
	b, err := json.Marshal(msg)
	if err != nil {
		panic(err)
	}
	s.line(string(b))
}

func (s *rawServer) result(id json.RawMessage, result any) {
	s.send(map[string]any{"id": id, "result": result})
}

func (s *rawServer) handle(msg map[string]json.RawMessage) {
	var method string
	_ = json.Unmarshal(msg["method"], &method)
	id := msg["id"]
	switch method {
	case "initialize":
		s.result(id, map[string]any{
			"protocolVersion": ProtocolVersion,
			"capabilities":    map[string]any{"tools": map[string]any{"listChanged": true}, "logging": map[string]any{}},
			"serverInfo":      map[string]any{"name": "raw", "version": "1"},
		})
	case "ping":
		s.result(id, map[string]any{})
	case "tools/list":
		s.result(id, map[string]any{"tools": s.tools()})
	case "tools/call":
		var params struct {
			Name string `json:"name"`
			Meta struct {
				ProgressToken any `json:"progressToken"`
			} `json:"_meta"`
		}
		_ = json.Unmarshal(msg["params"], &params)
		// A call is handled in a goroutine: it may wait for the client's
		// answers to the server's own requests, which the loop reads.
		go s.call(id, params.Name, params.Meta.ProgressToken)
	default:
		if id != nil {
			s.send(map[string]any{"id": id, "error": map[string]any{"code": -32601, "message": "method not found: " + method}})
		}
	}
}

// tools is the scenario's tools/list.
func (s *rawServer) tools() []any {
	obj := map[string]any{"type": "object"}
	tool := func(name string, schema any) map[string]any {
		t := map[string]any{"name": name, "description": "raw tool " + name}
		if schema != nil {
			t["inputSchema"] = schema
		}
		return t
	}
	tools := []any{tool("echo", obj)}
	switch s.scenario {
	case "misc":
		for _, name := range []string{"ask", "flood", "odd-content", "error-empty", "twice", "bigtext", "bigtext-idlast", "deep", "manyitems", "exit-after", "progress-exit-after", "changed", "loud"} {
			tools = append(tools, tool(name, obj))
		}
	case "oddtools":
		tools = append(tools,
			tool("", obj),
			tool("with space", obj),
			tool("ünïcode", obj),
			tool("dup", obj),
			tool("dup", obj),
			tool("get.file", obj),
			tool("get_file", obj),
			tool(strings.Repeat("long", 20), obj),
			tool("noschema", nil),
			tool("trueschema", true),
			tool("stringschema", map[string]any{"type": "string"}),
		)
	case "manytools":
		big := map[string]any{"type": "object", "description": strings.Repeat("x", 1<<20)}
		tools = append(tools, tool("bigschema", big))
		for i := range 3000 {
			tools = append(tools, tool(fmt.Sprintf("t%04d", i), obj))
		}
	}
	return tools
}

// call answers a tools/call as the scenario says.
func (s *rawServer) call(id json.RawMessage, name string, token any) {
	text := func(t string) map[string]any {
		return map[string]any{"content": []any{map[string]any{"type": "text", "text": t}}}
	}
	switch s.scenario {
	case "banner":
		s.line("[INFO] handling " + name)
		s.line(`{"level":"info","msg":"a JSON log line, not JSON-RPC"}`)
		s.line("")
		s.result(id, text("echoed"))
	case "oddtools":
		s.result(id, text("called "+name))
	case "misc":
		s.misc(id, name, token)
	default:
		s.result(id, text("echoed"))
	}
}

// misc answers the tools of the "misc" scenario.
func (s *rawServer) misc(id json.RawMessage, name string, token any) {
	text := func(t string) map[string]any {
		return map[string]any{"content": []any{map[string]any{"type": "text", "text": t}}}
	}
	switch name {
	case "ask":
		// Requests a client may not support, in the middle of a call; the
		// result says how each was answered.
		var got []string
		for i, method := range []string{"sampling/createMessage", "elicitation/create", "roots/list", "no/such-method"} {
			params := map[string]any{}
			switch method {
			case "sampling/createMessage":
				params = map[string]any{"messages": []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "hi"}}}, "maxTokens": 10}
			case "elicitation/create":
				params = map[string]any{"message": "your name?", "requestedSchema": map[string]any{"type": "object", "properties": map[string]any{}}}
			}
			s.send(map[string]any{"id": fmt.Sprintf("srv-%d", i), "method": method, "params": params})
			reply := <-s.replies
			if e, ok := reply["error"]; ok {
				got = append(got, method+": error "+string(e))
			} else {
				got = append(got, method+": "+string(reply["result"]))
			}
		}
		s.result(id, text(strings.Join(got, "\n")))
	case "flood":
		for i := range 20000 {
			s.send(map[string]any{"method": "notifications/progress", "params": map[string]any{"progressToken": token, "progress": i + 1, "total": 20000, "message": strings.Repeat("m", 1000)}})
			s.send(map[string]any{"method": "notifications/message", "params": map[string]any{"level": "info", "data": "log line"}})
		}
		s.result(id, text("flooded"))
	case "odd-content":
		s.result(id, map[string]any{"content": []any{
			map[string]any{"type": "text", "text": "before"},
			map[string]any{"type": "video", "uri": "file:///v.mp4"},
			map[string]any{"type": "text", "text": "after"},
		}, "structuredContent": map[string]any{"unexpected": true}})
	case "error-empty":
		s.result(id, map[string]any{"isError": true, "content": []any{}})
	case "twice":
		s.send(map[string]any{"id": 987654, "result": text("for a request never made")})
		s.result(id, text("first answer"))
		s.result(id, text("second answer"))
	case "bigtext":
		// Written by hand: marshalling 17 MiB is slow in a race build.
		s.line(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 17<<20) + `"}]}}`)
	case "bigtext-idlast":
		// The id after the 17 MiB: not found within the bound.
		s.line(`{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 17<<20) + `"}]},"id":` + string(id) + `}`)
	case "deep":
		// Valid JSON nested past the SDK decoder's depth of 1000.
		s.line(deepAnswer(string(id)))
	case "manyitems":
		items := make([]any, 8000)
		for i := range items {
			items[i] = map[string]any{"type": "text", "text": fmt.Sprintf("item %d", i)}
		}
		s.result(id, map[string]any{"content": items})
	case "changed":
		s.send(map[string]any{"method": "notifications/tools/list_changed"})
		s.result(id, text("changed"))
	case "exit-after":
		s.result(id, text("bye"))
		os.Exit(0)
	case "progress-exit-after":
		s.send(map[string]any{"method": "notifications/progress", "params": map[string]any{"progressToken": token, "progress": 1, "message": "answering"}})
		s.result(id, text("bye"))
		os.Exit(0)
	case "loud":
		// A 200 KiB stderr line (a stack dump, a logged payload), then an
		// ordinary one; a write to a closed pipe would kill the server.
		fmt.Fprintln(os.Stderr, "dump: "+strings.Repeat("y", 200<<10))
		fmt.Fprintln(os.Stderr, "after the dump")
		s.result(id, text("still here"))
	default:
		s.result(id, text("echoed"))
	}
}

// deepAnswer is a valid result to request id whose structured content is
// nested 1000 deep: the whole message passes the SDK decoder's depth bound.
func deepAnswer(id string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"deep"}],"structuredContent":{"v":` +
		strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}}}`
}
