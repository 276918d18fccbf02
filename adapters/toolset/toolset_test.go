package toolset

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/tools"
	"github.com/escapement/escapement/kernel"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// group is a fake group of tools that records what happens to it.
type group struct {
	names    []string
	log      *[]string
	closeErr error
}

func (g *group) Specs() []ports.ToolSpec {
	var specs []ports.ToolSpec
	for _, n := range g.names {
		specs = append(specs, ports.ToolSpec{Name: n, Description: "fake", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)})
	}
	return specs
}

func (g *group) Run(ctx context.Context, c ports.Call) ports.ToolResult {
	return ports.ToolResult{Status: kernel.ToolOK, Content: "group ran " + c.Name}
}

func (g *group) Close() error {
	*g.log = append(*g.log, "close "+g.names[0])
	return g.closeErr
}

func (g *group) KillAll() { *g.log = append(*g.log, "kill "+g.names[0]) }

func call(name, args string) ports.Call {
	return ports.Call{ToolCall: kernel.ToolCall{ID: "c", Name: name, Arguments: args}}
}

// TestComposes: the workspace tools, another group and Go functions in one
// set: Specs lists all in the order added, each call reaches its own tool.
func TestComposes(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	box, err := tools.New(tools.Config{Workspace: dir})
	if err != nil {
		t.Fatal(err)
	}
	var log []string
	set, err := New(box, &group{names: []string{"mcp__srv__x"}, log: &log})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	err = set.AddFunc(ports.ToolSpec{Name: "add", Description: "adds two numbers",
		Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`)},
		func(ctx context.Context, args json.RawMessage) (string, error) {
			var in struct{ A, B float64 }
			if err := json.Unmarshal(args, &in); err != nil {
				return "", err
			}
			return jsonNum(in.A + in.B), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := set.AddFunc(ports.ToolSpec{Name: "now", Description: "no arguments"}, func(context.Context, json.RawMessage) (string, error) { return "noon", nil }); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range set.Specs() {
		names = append(names, s.Name)
	}
	want := []string{"read_file", "write_file", "list_dir", "grep", "delegate", "mcp__srv__x", "add", "now"}
	if !slices.Equal(names, want) {
		t.Errorf("specs %v\nwant  %v", names, want)
	}
	if p := set.Specs()[7].Parameters; string(p) != `{"type":"object","properties":{}}` {
		t.Errorf("empty parameters became %s", p)
	}
	for _, tc := range []struct {
		call   ports.Call
		status kernel.ToolStatus
		want   string
	}{
		{call("read_file", `{"path":"a.txt"}`), kernel.ToolOK, "hello"},
		{call("mcp__srv__x", `{}`), kernel.ToolOK, "group ran mcp__srv__x"},
		{call("add", `{"a":2,"b":3}`), kernel.ToolOK, "5"},
		{call("now", ``), kernel.ToolOK, "noon"},
		{call("add", `{"a":"x"}`), kernel.ToolError, "error: add: json: cannot unmarshal"},
		{call("nope", `{}`), kernel.ToolError, `error: unknown tool "nope" (available: read_file, write_file, list_dir, grep, delegate, mcp__srv__x, add, now)`},
	} {
		r := set.Run(context.Background(), tc.call)
		if r.Status != tc.status || !strings.HasPrefix(r.Content, tc.want) {
			t.Errorf("%s %s: %v %q, want %v %q", tc.call.Name, tc.call.Arguments, r.Status, r.Content, tc.status, tc.want)
		}
	}
}

func jsonNum(f float64) string {
	b, _ := json.Marshal(f)
	return string(b)
}

// TestDuplicatesRefused: a name already in the set is refused, from a group
// (which is then added not at all) or a function; so are names the model
// cannot call and parameters that are not a schema object.
func TestDuplicatesRefused(t *testing.T) {
	var log []string
	set, err := New(&group{names: []string{"a", "b"}, log: &log})
	if err != nil {
		t.Fatal(err)
	}
	fn := func(context.Context, json.RawMessage) (string, error) { return "", nil }
	for _, tc := range []struct {
		add  func() error
		want string
	}{
		{func() error { return set.Add(&group{names: []string{"c", "b"}, log: &log}) }, `tool "b" of *toolset.group is already in the set (from *toolset.group)`},
		{func() error { return set.Add(&group{names: []string{"d", "d"}, log: &log}) }, `*toolset.group lists the tool "d" twice`},
		{func() error { return set.AddFunc(ports.ToolSpec{Name: "a"}, fn) }, `tool "a" of AddFunc is already in the set (from *toolset.group)`},
		{func() error { return set.AddFunc(ports.ToolSpec{Name: "has space"}, fn) }, `tool name "has space" is not a function name`},
		{func() error { return set.AddFunc(ports.ToolSpec{Name: strings.Repeat("x", 65)}, fn) }, `is not a function name`},
		{func() error { return set.AddFunc(ports.ToolSpec{Name: ""}, fn) }, `tool name "" is not a function name`},
		{func() error { return set.AddFunc(ports.ToolSpec{Name: "e", Parameters: json.RawMessage(`[]`)}, fn) }, `parameters must be a JSON Schema object`},
		{func() error { return set.AddFunc(ports.ToolSpec{Name: "e"}, nil) }, `tool "e" has no function`},
	} {
		err := tc.add()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
	var names []string
	for _, s := range set.Specs() {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"a", "b"}) {
		t.Errorf("refused additions left tools behind: %v", names)
	}
	if r := set.Run(context.Background(), call("c", `{}`)); r.Status != kernel.ToolError {
		t.Errorf("a tool of a refused group runs: %+v", r)
	}
	if _, err := New(&group{names: []string{"a"}, log: &log}, &group{names: []string{"a"}, log: &log}); err == nil {
		t.Error("New accepted two groups with one name")
	}
}

// TestFuncCancel: a function that returns because its context ended gives
// the cancel's acknowledgement, not an error.
func TestFuncCancel(t *testing.T) {
	set, _ := New()
	started := make(chan struct{})
	_ = set.AddFunc(ports.ToolSpec{Name: "wait"}, func(ctx context.Context, _ json.RawMessage) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan ports.ToolResult)
	go func() { done <- set.Run(ctx, call("wait", `{}`)) }()
	<-started
	cancel()
	if r := <-done; r.Status != kernel.ToolCancelled {
		t.Errorf("cancelled function: %+v", r)
	}
}

// TestCloseAndKillAll: Close closes every group that can be closed, the
// last added first, and joins their errors; KillAll reaches every group
// that has it.
func TestCloseAndKillAll(t *testing.T) {
	var log []string
	boom := errors.New("boom")
	set, err := New(&group{names: []string{"one"}, log: &log}, &group{names: []string{"two"}, log: &log, closeErr: boom})
	if err != nil {
		t.Fatal(err)
	}
	set.KillAll()
	if err := set.Close(); !errors.Is(err, boom) {
		t.Errorf("Close = %v, want boom", err)
	}
	if want := []string{"kill one", "kill two", "close two", "close one"}; !slices.Equal(log, want) {
		t.Errorf("log %v, want %v", log, want)
	}
}

// TestFunctionNameCharset: exactly ^[a-zA-Z0-9_-]{1,64}$ is accepted: the
// ends of each range and a name of 64 bytes pass, the bytes just outside
// each range and a name of 65 bytes are refused.
func TestFunctionNameCharset(t *testing.T) {
	fn := func(context.Context, json.RawMessage) (string, error) { return "", nil }
	for _, name := range []string{"a", "z", "A", "Z", "0", "9", "_", "-", "azAZ09_-", strings.Repeat("x", 64)} {
		set, err := New()
		if err != nil {
			t.Fatal(err)
		}
		if err := set.AddFunc(ports.ToolSpec{Name: name}, fn); err != nil {
			t.Errorf("%q refused: %v", name, err)
		}
	}
	for _, name := range []string{"`", "{", "@", "[", "/", ":", "a.b", "a b", "é", strings.Repeat("x", 65)} {
		set, err := New()
		if err != nil {
			t.Fatal(err)
		}
		if err := set.AddFunc(ports.ToolSpec{Name: name}, fn); err == nil || !strings.Contains(err.Error(), "is not a function name") {
			t.Errorf("%q: %v, want a refusal", name, err)
		}
	}
}

// TestFuncGetsAnObject: a function tool called with no arguments (an empty
// or blank string, as some models send for a tool without parameters) gets
// the empty object; any other arguments reach it unchanged.
func TestFuncGetsAnObject(t *testing.T) {
	var got []string
	set, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if err := set.AddFunc(ports.ToolSpec{Name: "f"}, func(_ context.Context, args json.RawMessage) (string, error) {
		got = append(got, string(args))
		return "ok", nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{"", " \n", "7", `{"a":1}`} {
		if r := set.Run(context.Background(), call("f", args)); r.Status != kernel.ToolOK {
			t.Errorf("%q: %+v", args, r)
		}
	}
	if want := []string{"{}", "{}", "7", `{"a":1}`}; !slices.Equal(got, want) {
		t.Errorf("the function got %q, want %q", got, want)
	}
}

// idemGroup is a group that names some of its tools idempotent — and a
// name it does not offer, which the set must not take up.
type idemGroup struct {
	group
	idem []string
}

func (g *idemGroup) Idempotent() []string { return g.idem }

// TestIdempotent: the set's idempotent tools are the ones each group names
// (the workspace readers, an MCP client's annotated tools), in the set's
// order, through a nested set too; a function's tool and a group without
// the method contribute none. Without it a session with an MCP server
// lost read_file's re-run after a crash (the CLI asks the set).
func TestIdempotent(t *testing.T) {
	box, err := tools.New(tools.Config{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var log []string
	remote := &idemGroup{group: group{names: []string{"mcp__s__get", "mcp__s__put"}, log: &log}, idem: []string{"mcp__s__get", "mcp__s__ghost"}}
	inner, err := New(remote)
	if err != nil {
		t.Fatal(err)
	}
	set, err := New(box, inner, &group{names: []string{"plain"}, log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if err := set.AddFunc(ports.ToolSpec{Name: "now"}, func(context.Context, json.RawMessage) (string, error) { return "", nil }); err != nil {
		t.Fatal(err)
	}
	want := append(box.Idempotent(), "mcp__s__get")
	if got := set.Idempotent(); !slices.Equal(got, want) {
		t.Errorf("Idempotent() = %v, want %v", got, want)
	}
}
