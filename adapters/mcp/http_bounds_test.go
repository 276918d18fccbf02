package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
)

// hugeAnswerBytes is how large the "huge" tool's answer is: far past the
// 16 MiB bound, streamed lazily (the test server never holds it).
const hugeAnswerBytes = 48 << 20

// rawHTTP is a hand-written streamable HTTP MCP server that answers every
// request with one JSON body, or (events) one server-sent event, and whose
// tools misbehave: "huge" streams an answer of hugeAnswerBytes, "deep"
// answers valid JSON nested past the decoder's depth, "echo" answers.
// written counts the bytes of the huge answer the client took.
type rawHTTP struct {
	events  bool
	written atomic.Int64
}

func (h *rawHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.NewDecoder(r.Body).Decode(&msg) != nil || msg.ID == nil {
		w.WriteHeader(http.StatusAccepted) // a notification
		return
	}
	id := string(msg.ID)
	switch msg.Method {
	case "initialize":
		h.reply(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"protocolVersion":"`+ProtocolVersion+`","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}}`)
	case "tools/list":
		h.reply(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"tools":[{"name":"huge","inputSchema":{"type":"object"}},{"name":"deep","inputSchema":{"type":"object"}},{"name":"echo","inputSchema":{"type":"object"}}]}}`)
	case "tools/call":
		switch msg.Params.Name {
		case "huge":
			h.huge(w, id)
		case "deep":
			h.reply(w, deepAnswer(id))
		default:
			h.reply(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"content":[{"type":"text","text":"echoed"}]}}`)
		}
	default:
		h.reply(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{}}`)
	}
}

// reply writes one message as the body or as one event.
func (h *rawHTTP) reply(w http.ResponseWriter, msg string) {
	if h.events {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message\ndata: "+msg+"\n\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, msg)
}

// huge streams a text result of hugeAnswerBytes, 64 KiB at a time, until
// the client stops reading.
func (h *rawHTTP) huge(w http.ResponseWriter, id string) {
	head, tail := `{"jsonrpc":"2.0","id":`+id+`,"result":{"content":[{"type":"text","text":"`, `"}]}}`
	if h.events {
		w.Header().Set("Content-Type", "text/event-stream")
		head, tail = "event: message\ndata: "+head, tail+"\n\n"
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	chunk := []byte(strings.Repeat("x", 64<<10))
	if _, err := io.WriteString(w, head); err != nil {
		return
	}
	for sent := 0; sent < hugeAnswerBytes; sent += len(chunk) {
		n, err := w.Write(chunk)
		h.written.Add(int64(n))
		if err != nil {
			return
		}
	}
	io.WriteString(w, tail)
}

// TestHTTPAnswerBounded: an HTTP server's answer over the 16 MiB a message
// may hold — as a JSON body or as a server-sent event — is an error result
// with the same text a stdio server's gets, read no further than the
// bound (the server could send little more than it before the client
// stopped reading), and the session goes on.
func TestHTTPAnswerBounded(t *testing.T) {
	for _, events := range []bool{false, true} {
		t.Run(fmt.Sprintf("events=%v", events), func(t *testing.T) {
			h := &rawHTTP{events: events}
			srv := httptest.NewServer(h)
			defer srv.Close()
			ev := newEvents()
			c, err := Start(t.Context(), Options{Servers: []ServerConfig{{Name: "web", File: "web.json", Type: TypeHTTP, URL: srv.URL}}, Observer: ev.add, PingInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			r := c.Run(t.Context(), call("mcp__web__huge", `{}`))
			if r.Status != kernel.ToolError || r.Content != "error: mcp__web__huge: "+tooLargeText {
				t.Errorf("huge: %v %q", r.Status, textcut.Clip(r.Content, 300))
			}
			// The client stops at the bound; what the server got written
			// beyond it is what the sockets' buffers held.
			t.Logf("the server wrote %d MiB of its answer", h.written.Load()>>20)
			if n := h.written.Load(); n > 32<<20 {
				t.Errorf("the server wrote %d MiB of its answer before the client stopped reading", n>>20)
			}
			if r := c.Run(t.Context(), call("mcp__web__echo", `{}`)); r.Status != kernel.ToolOK || r.Content != "echoed" {
				t.Errorf("after the huge answer: %+v", r)
			}
			if s := ev.of(EventStopped); len(s) != 0 {
				t.Errorf("the session was ended: %+v", s)
			}
		})
	}
}

// TestHTTPDeepAnswerEndsCallAtOnce: an HTTP server's valid answer nested
// deeper than the decoder takes is an error result for its call at once,
// saying why, as a stdio server's is; the session goes on.
func TestHTTPDeepAnswerEndsCallAtOnce(t *testing.T) {
	for _, events := range []bool{false, true} {
		t.Run(fmt.Sprintf("events=%v", events), func(t *testing.T) {
			srv := httptest.NewServer(&rawHTTP{events: events})
			defer srv.Close()
			ev := newEvents()
			c, err := Start(t.Context(), Options{Servers: []ServerConfig{{Name: "web", File: "web.json", Type: TypeHTTP, URL: srv.URL}}, Observer: ev.add, PingInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			r := c.Run(ctx, call("mcp__web__deep", `{}`))
			if r.Status != kernel.ToolError || r.Content != "error: mcp__web__deep: the server's answer could not be read: unmarshaling jsonrpc message: json: exceeded maximum nesting depth of 1000" {
				t.Errorf("deep: %v %q", r.Status, r.Content)
			}
			if r := c.Run(t.Context(), call("mcp__web__echo", `{}`)); r.Status != kernel.ToolOK || r.Content != "echoed" {
				t.Errorf("after the deep answer: %+v", r)
			}
			if s := ev.of(EventStopped); len(s) != 0 {
				t.Errorf("the session was ended: %+v", s)
			}
		})
	}
}
