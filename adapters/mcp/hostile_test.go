package mcp

import (
	"slices"
	"testing"

	"github.com/escapement/escapement/kernel"
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
