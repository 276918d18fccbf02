package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolResult maps a tools/call result to what the model gets:
//
//   - text content is the result, blocks joined by newlines;
//   - isError makes it an error result (kernel.ToolError);
//   - structured content is added as JSON, unless a text block already
//     holds the same JSON (servers are asked to send both);
//   - an image, audio, resource link or embedded resource becomes a short
//     typed placeholder such as "[image: image/png, 1024 bytes]" (an embedded
//     text resource keeps its text): nothing is dropped silently;
//   - an empty result says so.
//
// The whole is cut to limit bytes, the cut marked.
func toolResult(res *sdk.CallToolResult, limit int) ports.ToolResult {
	var parts []string
	for _, c := range res.Content {
		parts = append(parts, contentText(c))
	}
	if res.StructuredContent != nil {
		if js, err := json.Marshal(res.StructuredContent); err == nil && !textHoldsJSON(res.Content, js) {
			parts = append(parts, string(js))
		}
	}
	text := strings.Join(parts, "\n")
	switch {
	case len(parts) == 0 && res.IsError:
		text = "(the tool reported an error and returned no content)"
	case len(parts) == 0:
		text = "(the tool returned no content)"
	}
	status := kernel.ToolOK
	if res.IsError {
		status = kernel.ToolError
	}
	return ports.ToolResult{Status: status, Content: cut(text, limit)}
}

// contentText is one content block as text for the model.
func contentText(c sdk.Content) string {
	switch c := c.(type) {
	case *sdk.TextContent:
		return c.Text
	case *sdk.ImageContent:
		return fmt.Sprintf("[image: %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data))
	case *sdk.AudioContent:
		return fmt.Sprintf("[audio: %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data))
	case *sdk.ResourceLink:
		var about []string
		for _, s := range []string{c.Name, c.Title, c.MIMEType, c.Description} {
			if s != "" {
				about = append(about, s)
			}
		}
		if c.Size != nil {
			about = append(about, fmt.Sprintf("%d bytes", *c.Size))
		}
		if len(about) == 0 {
			return "[resource link: " + c.URI + "]"
		}
		return "[resource link: " + c.URI + " (" + strings.Join(about, ", ") + ")]"
	case *sdk.EmbeddedResource:
		r := c.Resource
		if r == nil {
			return "[embedded resource: empty]"
		}
		if r.Blob != nil || r.Text == "" {
			return fmt.Sprintf("[embedded resource: %s, %s, %d bytes]", r.URI, orUnknown(r.MIMEType), len(r.Blob))
		}
		return fmt.Sprintf("[embedded resource: %s, %s]\n%s", r.URI, orUnknown(r.MIMEType), r.Text)
	case nil:
		return "[empty content block]"
	}
	return fmt.Sprintf("[content of type %T]", c)
}

func orUnknown(mime string) string {
	if mime == "" {
		return "unknown type"
	}
	return mime
}

// textHoldsJSON reports whether a text block is the same JSON value as js.
func textHoldsJSON(content []sdk.Content, js []byte) bool {
	want, err := canonicalJSON(js)
	if err != nil {
		return false
	}
	for _, c := range content {
		t, ok := c.(*sdk.TextContent)
		if !ok || !json.Valid([]byte(t.Text)) {
			continue
		}
		if got, err := canonicalJSON([]byte(t.Text)); err == nil && bytes.Equal(got, want) {
			return true
		}
	}
	return false
}

// canonicalJSON re-encodes a JSON value with sorted keys and no spaces.
func canonicalJSON(b []byte) ([]byte, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// cut caps text at limit bytes, marking the cut with what was dropped.
func cut(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	head := textcut.Prefix(s, limit)
	return head + fmt.Sprintf("\n[truncated: %d more bytes]", len(s)-len(head))
}
