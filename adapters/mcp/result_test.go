package mcp

import (
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"strings"
	"testing"
	"testing/synctest"
)

// TestOutputLimitHonoured: Options.OutputLimit caps a result at any size
// the embedder picks, down to one byte; 0 means DefaultOutputLimit.
func TestOutputLimitHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := newMemServer(t)
		for _, tc := range []struct {
			limit int
			kind  string
			want  func(string) bool
		}{
			{1, "text", func(s string) bool { return s == "o\n[truncated: 6 more bytes]" }},
			{2, "text", func(s string) bool { return s == "on\n[truncated: 5 more bytes]" }},
			{0, "text", func(s string) bool { return s == "one\ntwo" }},
			{0, "huge", func(s string) bool {
				return len(s) == DefaultOutputLimit+len("\n[truncated: 36864 more bytes]") && strings.HasSuffix(s, "\n[truncated: 36864 more bytes]")
			}},
		} {
			c := startClient(t, Options{Servers: []ServerConfig{ms.config("srv")}, OutputLimit: tc.limit})
			r := c.Run(t.Context(), call("mcp__srv__content", `{"text":"`+tc.kind+`"}`))
			if !tc.want(r.Content) {
				t.Errorf("limit %d, %s: %d bytes, %q", tc.limit, tc.kind, len(r.Content), r.Content[:min(len(r.Content), 60)])
			}
			c.Close()
		}
	})
}

// TestEmptyEmbeddedResource: an embedded resource without its resource
// (the SDK decodes a server's {"type":"resource"} with no "resource" field
// into one) is described, not dereferenced.
func TestEmptyEmbeddedResource(t *testing.T) {
	r := toolResult(&sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "see"}, &sdk.EmbeddedResource{}}}, DefaultOutputLimit)
	if r.Content != "see\n[embedded resource: empty]" {
		t.Errorf("got %q", r.Content)
	}
}
