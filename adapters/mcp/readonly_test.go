package mcp

import (
	"context"
	"slices"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestReadOnlyFromAnnotations: ReadOnly names the tools whose server
// annotates them readOnlyHint: true, by their model-facing names; a tool
// without annotations, or annotated otherwise, can change something (the
// CLI's --ask writes asks for it).
func TestReadOnlyFromAnnotations(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "ro", Version: "1"}, nil)
	noop := func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{}, nil
	}
	srv.AddTool(&sdk.Tool{Name: "stat", InputSchema: objectSchema, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}}, noop)
	srv.AddTool(&sdk.Tool{Name: "rm", InputSchema: objectSchema, Annotations: &sdk.ToolAnnotations{Title: "remove"}}, noop)
	srv.AddTool(&sdk.Tool{Name: "touch", InputSchema: objectSchema}, noop)
	cfg := ServerConfig{Name: "fs", File: "test.json", Type: TypeStdio, dial: func(ctx context.Context, sess *session) (sdk.Transport, error) {
		st, ct := sdk.NewInMemoryTransports()
		if _, err := srv.Connect(context.Background(), st, nil); err != nil {
			return nil, err
		}
		return &tapTransport{inner: ct, tap: sess.tap, got: func(c *tapConn) { sess.conn = c }}, nil
	}}
	c, err := Start(t.Context(), Options{Servers: []ServerConfig{cfg}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, want := c.ReadOnly(), []string{"mcp__fs__stat"}; !slices.Equal(got, want) {
		t.Errorf("ReadOnly %v, want %v", got, want)
	}
}
