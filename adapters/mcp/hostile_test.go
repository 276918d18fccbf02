package mcp

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// startRaw starts a client on one raw (misbehaving) stdio server.
func startRaw(t *testing.T, scenario string, opts Options) *Client {
	t.Helper()
	opts.Servers = []ServerConfig{stdioConfig(t, "raw", rawRolePrefix+scenario)}
	if opts.PingInterval == 0 {
		opts.PingInterval = -1
	}
	c, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestStdoutNoiseTolerated: a server that writes a banner, a log line and
// a JSON line that is not JSON-RPC to its stdout, before and between its
// messages (a common mistake: stdout is the protocol's channel), still
// works: the lines are skipped and shown as the server's output.
func TestStdoutNoiseTolerated(t *testing.T) {
	ev := newEvents()
	c := startRaw(t, "banner", Options{Observer: ev.add})
	for range 2 {
		r := c.Run(t.Context(), call("mcp__raw__echo", `{}`))
		if r.Status != kernel.ToolOK || r.Content != "echoed" {
			t.Fatalf("call: %v %q", r.Status, r.Content)
		}
	}
	var noise []string
	for _, e := range ev.of(EventStdoutNoise) {
		noise = append(noise, e.Message)
	}
	want := []string{"Weather MCP server v1.2 starting on stdio...", "[INFO] handling echo", `{"level":"info","msg":"a JSON log line, not JSON-RPC"}`}
	want = append(want, want[1:]...)
	if !slices.Equal(noise, want) {
		t.Errorf("stdout noise reported %q\nwant %q", noise, want)
	}
}

// TestOddToolLists: a server's tools/list with names the model cannot take
// as they are (spaces, non-ASCII, too long), the same name twice, two names
// that map to one, a tool without a name, and input schemas that are
// absent, `true` or not an object: the server starts (it is not refused
// for a list its user cannot change), every distinct named tool is offered
// once under a valid, unique name with an object schema, the start event
// says what was changed, and each offered tool calls the server's tool of
// that name.
func TestOddToolLists(t *testing.T) {
	ev := newEvents()
	c := startRaw(t, "oddtools", Options{Observer: ev.add})
	var names []string
	for _, s := range c.Specs() {
		names = append(names, s.Name)
		if len(s.Name) > MaxNameLen || !validName(s.Name) {
			t.Errorf("invalid name %q", s.Name)
		}
		var schema map[string]any
		if err := json.Unmarshal(s.Parameters, &schema); err != nil || schema["type"] != "object" {
			t.Errorf("%s: parameters %s", s.Name, s.Parameters)
		}
	}
	// "get.file" is listed before "get_file"; the name that needed no
	// change keeps the plain name.
	want := []string{"mcp__raw__echo", "mcp__raw__with_space", "mcp__raw____n__code", "mcp__raw__dup", hashedToolName("raw", "get.file"),
		"mcp__raw__get_file", ToolName("raw", strings.Repeat("long", 20)), "mcp__raw__noschema", "mcp__raw__trueschema", "mcp__raw__stringschema"}
	if !slices.Equal(names, want) {
		t.Errorf("names %q\nwant  %q", names, want)
	}
	started := ev.of(EventStarted)
	if len(started) != 1 {
		t.Fatalf("started events %+v", started)
	}
	mustContain(t, "start detail", started[0].Detail, "10 tools", "a tool without a name is not offered", `tool "dup" is listed twice; offered once`,
		`tool "get.file" is offered as `+want[4], `tool "trueschema": its input schema is not a JSON object; offered without parameters`, `tool "stringschema": its input schema has type "string", not "object"`)
	for _, name := range want {
		r := c.Run(t.Context(), call(name, `{}`))
		if r.Status != kernel.ToolOK {
			t.Errorf("%s: %v %q", name, r.Status, r.Content)
		}
	}
	if r := c.Run(t.Context(), call(want[4], `{}`)); r.Content != "called get.file" {
		t.Errorf("%s called %q, want the server's get.file", want[4], r.Content)
	}
	if r := c.Run(t.Context(), call(want[5], `{}`)); r.Content != "called get_file" {
		t.Errorf("%s called %q, want the server's get_file", want[5], r.Content)
	}
}

// TestHugeToolList: a server listing 3000 tools, one of them with a 1 MiB
// input schema, starts; the first MaxToolsPerServer tools are offered
// (every model request carries them all), the huge schema is not, and the
// start event says both.
func TestHugeToolList(t *testing.T) {
	ev := newEvents()
	c := startRaw(t, "manytools", Options{Observer: ev.add})
	specs := c.Specs()
	if len(specs) != MaxToolsPerServer-1 || specs[1].Name != "mcp__raw__t0000" {
		t.Errorf("%d tools offered, the second %q; want %d (the first %d listed, without bigschema)", len(specs), specs[1].Name, MaxToolsPerServer-1, MaxToolsPerServer)
	}
	mustContain(t, "start detail", ev.of(EventStarted)[0].Detail, "511 tools (it lists more; the first 512 are offered)", `tool "bigschema" is not offered: its input schema has 10486`)
}

// TestServerRequestsDuringCall: a server that, during a call, asks the
// client for sampling, elicitation, its roots and a method no one knows
// gets an answer to each (an error for what the client does not offer, no
// roots), and the call goes on to its result.
func TestServerRequestsDuringCall(t *testing.T) {
	c := startRaw(t, "misc", Options{})
	r := c.Run(t.Context(), call("mcp__raw__ask", `{}`))
	if r.Status != kernel.ToolOK {
		t.Fatalf("%v %q", r.Status, r.Content)
	}
	mustContain(t, "answers", r.Content, "sampling/createMessage: error", "elicitation/create: error", `roots/list: {"roots":[]}`, "no/such-method: error", "-32601")
}

// TestOddResults: answers a strict client could choke on. A content type
// this client does not know fails the call, not the session (it is not
// restarted: the next call runs on the same process); isError without
// content says so; a second answer to one call and an answer with an id
// never used are dropped.
func TestOddResults(t *testing.T) {
	c := startRaw(t, "misc", Options{})
	pid := liveSession(t, c, 0).proc.Pid()
	for _, tc := range []struct {
		name   string
		status kernel.ToolStatus
		want   string
	}{
		{"odd-content", kernel.ToolError, `error: mcp__raw__odd-content: the server's answer could not be read: calling "tools/call": unrecognized content type "video" (the server still answers; it was not restarted)`},
		{"error-empty", kernel.ToolError, "(the tool reported an error and returned no content)"},
		{"twice", kernel.ToolOK, "first answer"},
		{"echo", kernel.ToolOK, "echoed"},
	} {
		r := c.Run(t.Context(), call("mcp__raw__"+tc.name, `{}`))
		if r.Status != tc.status || r.Content != tc.want {
			t.Errorf("%s: %v %q\nwant %v %q", tc.name, r.Status, r.Content, tc.status, tc.want)
		}
	}
	if now := liveSession(t, c, 0).proc.Pid(); now != pid {
		t.Errorf("the server was restarted (pid %d, was %d)", now, pid)
	}
}

// TestCancelDuringFlood: a call whose server floods notifications (progress
// and log messages, back to back) is still cancelled as any other: the
// cancel goes out, the ping after it is answered between the flood's
// messages, and Run returns cancelled.
func TestCancelDuringFlood(t *testing.T) {
	ev := newEvents()
	c := startRaw(t, "misc", Options{Observer: ev.add})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	var r resultOf
	go func() {
		defer close(done)
		r.set(c.Run(ctx, call("mcp__raw__flood", `{}`)))
	}()
	ev.next(t, EventProgress)
	cancel()
	<-done
	if got := r.get(); got.Status != kernel.ToolCancelled || got.Content != "cancelled; the MCP server received notifications/cancelled" {
		t.Errorf("cancelled call: %v %q", got.Status, got.Content)
	}
}

// TestCommandNotRunnable: a server command that is a directory, a file
// without the execute bit, or a script without a #! line is refused at
// start with an error naming the server, its file and what is wrong.
func TestCommandNotRunnable(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "server.py")
	noShebang := filepath.Join(dir, "server.sh")
	if err := os.WriteFile(plain, []byte("print('hi')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(noShebang, []byte("echo hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ command, want string }{
		{dir, "is a directory"},
		{plain, "is not executable"},
		{noShebang, "a script needs a #! line"},
	} {
		c, err := Start(t.Context(), Options{Servers: []ServerConfig{{Name: "bad", File: "cfg.json", Type: TypeStdio, Command: tc.command}}, PingInterval: -1})
		if err == nil {
			c.Close()
			t.Errorf("%s started", tc.command)
			continue
		}
		mustContain(t, "error", err.Error(), `MCP server "bad" (cfg.json): start `+tc.command, tc.want)
	}
}

// TestServerExitsBetweenCalls: a server that exits after answering a call
// is started again by the next call, which works.
func TestServerExitsBetweenCalls(t *testing.T) {
	ev := newEvents()
	c := startRaw(t, "misc", Options{Observer: ev.add})
	if r := c.Run(t.Context(), call("mcp__raw__exit-after", `{}`)); r.Content != "bye" {
		t.Fatalf("exit-after: %+v", r)
	}
	mustContain(t, "stopped", ev.next(t, EventStopped).Detail, "exit status 0")
	if r := c.Run(t.Context(), call("mcp__raw__echo", `{}`)); r.Status != kernel.ToolOK || r.Content != "echoed" {
		t.Fatalf("call after the exit: %+v", r)
	}
	mustContain(t, "restart", ev.of(EventStarted)[1].Detail, "restarted after")
}

// TestServerExitsBeforeItsAnswerIsRead: a server sends a progress
// notification, its answer, and exits; the client is still showing the
// progress (the observer holds its reader) when it notices that the process
// ended. The answer was written before the end, so the call gets it: the
// server stopped after answering, not during the call. (A client that cut
// the connection, or cancelled its calls, when the process ended lost the
// answer: the observer waits until the session has ended and its
// connection was cut, or 200ms.)
func TestServerExitsBeforeItsAnswerIsRead(t *testing.T) {
	var client atomic.Pointer[Client]
	var once sync.Once
	ev := newEvents()
	c := startRaw(t, "misc", Options{Observer: func(e Event) {
		ev.add(e)
		if e.Kind != EventProgress {
			return
		}
		once.Do(func() {
			srv := client.Load().servers[0]
			srv.mu.Lock()
			sess := srv.sess
			srv.mu.Unlock()
			<-sess.killed // the client saw the process end
			select {
			case <-sess.conn.kill.Done():
			case <-time.After(200 * time.Millisecond):
			}
		})
	}})
	client.Store(c)
	if r := c.Run(t.Context(), call("mcp__raw__progress-exit-after", `{}`)); r.Status != kernel.ToolOK || r.Content != "bye" {
		t.Fatalf("progress-exit-after: %v %q", r.Status, r.Content)
	}
	mustContain(t, "stopped", ev.next(t, EventStopped).Detail, "the server process ended", "exit status 0")
	if r := c.Run(t.Context(), call("mcp__raw__echo", `{}`)); r.Status != kernel.ToolOK || r.Content != "echoed" {
		t.Fatalf("call after the exit: %+v", r)
	}
}

// TestHugeResults: 8000 content blocks are cut at the output limit; a
// 17 MiB answer (over the 16 MiB a message may have) is an error result
// saying so, not a buffer without bound, and the server, which still
// answers, keeps serving; an answer whose id comes only after the 16 MiB
// cannot be matched to its call and ends the session, saying so, and the
// next call starts the server again.
func TestHugeResults(t *testing.T) {
	ev := newEvents()
	c := startRaw(t, "misc", Options{Observer: ev.add})
	r := c.Run(t.Context(), call("mcp__raw__manyitems", `{}`))
	if r.Status != kernel.ToolOK || !strings.HasPrefix(r.Content, "item 0\nitem 1\n") || len(r.Content) > DefaultOutputLimit+40 || !strings.Contains(r.Content, "[truncated: ") {
		t.Errorf("many items: %v, %d bytes", r.Status, len(r.Content))
	}
	r = c.Run(t.Context(), call("mcp__raw__bigtext", `{}`))
	if r.Status != kernel.ToolError || r.Content != "error: mcp__raw__bigtext: "+tooLargeText {
		t.Fatalf("big text: %v %q", r.Status, textcut.Clip(r.Content, 300))
	}
	if r := c.Run(t.Context(), call("mcp__raw__echo", `{}`)); r.Content != "echoed" {
		t.Errorf("after the big text: %+v", r)
	}
	if s := ev.of(EventStopped); len(s) != 0 {
		t.Errorf("the server was stopped: %+v", s)
	}
	r = c.Run(t.Context(), call("mcp__raw__bigtext-idlast", `{}`))
	if r.Status != kernel.ToolError {
		t.Fatalf("big text, id last: %v %d bytes", r.Status, len(r.Content))
	}
	mustContain(t, "big text, id last", r.Content, "stopped during the call", "a line of more than 16 MiB", "restarted on the next call")
	if r := c.Run(t.Context(), call("mcp__raw__echo", `{}`)); r.Content != "echoed" {
		t.Errorf("after the big text with its id last: %+v", r)
	}
}

// tooLargeText is what a call whose answer is over the bound gets, on
// every transport.
const tooLargeText = "the server's answer could not be read: it is larger than 16 MiB, the most one MCP message may hold"

// TestDeepAnswerEndsCallAtOnce: a valid answer nested deeper than the
// JSON-RPC decoder takes (1000 levels) is an error result for its call at
// once, saying why — not a line of noise skipped while the call waits for
// its tool_timeout — and the server keeps serving.
func TestDeepAnswerEndsCallAtOnce(t *testing.T) {
	ev := newEvents()
	c := startRaw(t, "misc", Options{Observer: ev.add})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second) // the old hang's bound
	defer cancel()
	r := c.Run(ctx, call("mcp__raw__deep", `{}`))
	if r.Status != kernel.ToolError || r.Content != "error: mcp__raw__deep: the server's answer could not be read: unmarshaling jsonrpc message: json: exceeded maximum nesting depth of 1000" {
		t.Fatalf("deep: %v %q", r.Status, r.Content)
	}
	if r := c.Run(t.Context(), call("mcp__raw__echo", `{}`)); r.Content != "echoed" {
		t.Errorf("after the deep answer: %+v", r)
	}
	if s := ev.of(EventStopped); len(s) != 0 {
		t.Errorf("the server was stopped: %+v", s)
	}
}

// TestHTTPServerMisbehaves: an HTTP endpoint that answers 500, HTML, or
// starts an event stream and then hangs: the start fails with the status
// and what was wrong (the hang within the start timeout), naming the
// server and its file.
func TestHTTPServerMisbehaves(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    []string
	}{
		{"500", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "database is down", http.StatusInternalServerError)
		}, []string{"500", "database is down"}},
		{"html", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html><body>Sign in</body></html>")
		}, []string{"text/html"}},
		{"hang", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, ": keepalive\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}, []string{"no answer within the start timeout"}},
	} {
		srv := httptest.NewServer(tc.handler)
		_, err := Start(t.Context(), Options{Servers: []ServerConfig{{Name: "web", File: "web.json", Type: TypeHTTP, URL: srv.URL}}, PingInterval: -1, StartTimeout: 500 * time.Millisecond})
		srv.CloseClientConnections()
		srv.Close()
		if err == nil {
			t.Errorf("%s: started", tc.name)
			continue
		}
		mustContain(t, tc.name, err.Error(), append([]string{`MCP server "web" (web.json): initialize:`}, tc.want...)...)
	}
}

// TestToolListChanged: notifications/tools/list_changed is reported and
// changes nothing: the tools offered stay those listed at start.
func TestToolListChanged(t *testing.T) {
	ev := newEvents()
	c := startRaw(t, "misc", Options{Observer: ev.add})
	before := c.Specs()
	if r := c.Run(t.Context(), call("mcp__raw__changed", `{}`)); r.Content != "changed" {
		t.Fatalf("%+v", r)
	}
	if e := ev.next(t, EventToolsChanged); e.Server != "raw" {
		t.Errorf("event %+v", e)
	}
	if after := c.Specs(); len(after) != len(before) {
		t.Errorf("%d tools after the change, %d before", len(after), len(before))
	}
}

// TestLongStderrLine: a stderr line far longer than what is kept of it (a
// stack dump) is cut in what is reported, and the pipe is read on: the
// server lives to answer the call and to write more, and the next line
// arrives whole.
func TestLongStderrLine(t *testing.T) {
	ev := newEvents()
	c := startRaw(t, "misc", Options{Observer: ev.add})
	if r := c.Run(t.Context(), call("mcp__raw__loud", `{}`)); r.Status != kernel.ToolOK || r.Content != "still here" {
		t.Fatalf("loud: %+v", r)
	}
	if r := c.Run(t.Context(), call("mcp__raw__echo", `{}`)); r.Content != "echoed" {
		t.Fatalf("the call after: %+v", r)
	}
	if s := ev.of(EventStopped); len(s) != 0 {
		t.Fatalf("the server stopped: %+v", s)
	}
	// The stderr reader runs beside the calls: wait for the line after the
	// dump (the hang guard is next's).
	dump := false
	for {
		e := ev.next(t, EventStderr)
		if strings.HasPrefix(e.Message, "dump: yyy") {
			dump = true
			if len(e.Message) > maxStderrLine+64 || !strings.Contains(e.Message, "more bytes") {
				t.Errorf("the long line is reported as %d bytes ending %q", len(e.Message), e.Message[max(0, len(e.Message)-60):])
			}
		}
		if e.Message == "after the dump" {
			break
		}
	}
	if !dump {
		t.Error("the long line was not reported")
	}
}

// hangUpServer is an in-memory server that answers its one tool's call and
// hangs up at once: the answer, then the end of the connection.
type hangUpServer struct{ wg sync.WaitGroup }

func (h *hangUpServer) config() ServerConfig {
	return ServerConfig{Name: "mem", File: "test.json", Type: TypeStdio, dial: h.dial}
}

func (h *hangUpServer) dial(ctx context.Context, sess *session) (sdk.Transport, error) {
	st, ct := sdk.NewInMemoryTransports()
	conn, err := st.Connect(ctx)
	if err != nil {
		return nil, err
	}
	h.wg.Go(func() { serveThenHangUp(conn) })
	return &tapTransport{inner: ct, tap: sess.tap, got: func(c *tapConn) { sess.conn = c }}, nil
}

// serveThenHangUp answers the handshake, the listing and pings, and closes
// the connection right after answering a tools/call.
func serveThenHangUp(conn sdk.Connection) {
	defer conn.Close()
	ctx := context.Background()
	for {
		msg, err := conn.Read(ctx)
		if err != nil {
			return
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok || !req.ID.IsValid() {
			continue
		}
		var result string
		switch req.Method {
		case "initialize":
			result = `{"protocolVersion":"` + ProtocolVersion + `","capabilities":{"tools":{}},"serverInfo":{"name":"hangup","version":"1"}}`
		case "tools/list":
			result = `{"tools":[{"name":"bye","inputSchema":{"type":"object"}}]}`
		case "tools/call":
			result = `{"content":[{"type":"text","text":"bye"}]}`
		default:
			result = `{}`
		}
		if conn.Write(ctx, &jsonrpc.Response{ID: req.ID, Result: json.RawMessage(result)}) != nil || req.Method == "tools/call" {
			return
		}
	}
}

// TestServerHangsUpAfterAnswering: a server that ends the connection right
// after answering a call (the connection's end reaches the client together
// with the answer) gives the call its answer, every time; the client then
// reports the server stopped, and the next call starts it again. (A client
// that cancelled its running calls when the connection ended raced the
// answers they already had; fifty calls lost some.)
func TestServerHangsUpAfterAnswering(t *testing.T) {
	h := &hangUpServer{}
	ev := newEvents()
	c, err := Start(t.Context(), Options{Servers: []ServerConfig{h.config()}, PingInterval: -1, Observer: ev.add})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if r := c.Run(t.Context(), call("mcp__mem__bye", `{}`)); r.Status != kernel.ToolOK || r.Content != "bye" {
			t.Fatalf("call %d: %v %q", i+1, r.Status, r.Content)
		}
		// A call sent before the client knows the server is gone may
		// reach a server that no longer reads: the next one waits.
		mustContain(t, "stopped", ev.next(t, EventStopped).Detail, "the connection closed")
	}
	c.Close()
	h.wg.Wait()
}
