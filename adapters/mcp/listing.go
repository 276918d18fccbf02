package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/internal/textcut"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bounds on what one server may offer. Every tool's schema goes with every
// model request, so a server that lists thousands of tools, or one schema
// of megabytes, would make each request huge (and chat APIs refuse it);
// the bounds also stop a server that paginates forever from filling memory
// while it starts.
const (
	// MaxToolsPerServer is how many tools of one server are offered; a
	// server that lists more has the first ones offered, and says so.
	MaxToolsPerServer = 512
	// MaxSchemaBytes bounds one tool's input schema (as JSON); a tool with
	// a larger one is not offered.
	MaxSchemaBytes = 64 << 10
	// MaxDescriptionBytes bounds the description a tool is offered with:
	// it goes out with every request, like the schema, but a long one is
	// cut (and says so) rather than costing the tool.
	MaxDescriptionBytes = 4 << 10
	// notesShown bounds the notes about skipped tools one start reports.
	notesShown = 5
)

// offer is one server tool as the model will see it.
type offer struct {
	name string // model-facing
	tool *sdk.Tool
	spec ports.ToolSpec
}

// idempotent reports whether a tool's annotations say that calling it
// again has no further effect: idempotentHint, or readOnlyHint (a tool
// that changes nothing; the MCP specification reads idempotentHint only
// for tools that are not read-only).
func idempotent(t *sdk.Tool) bool {
	return t.Annotations != nil && (t.Annotations.IdempotentHint || t.Annotations.ReadOnlyHint)
}

// listTools lists the session's tools, at most MaxToolsPerServer of them.
func listTools(ctx context.Context, cs *sdk.ClientSession) (tools []*sdk.Tool, more bool, err error) {
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, false, err
		}
		if len(tools) == MaxToolsPerServer {
			return tools, true, nil
		}
		tools = append(tools, t)
	}
	return tools, false, nil
}

// offers makes the tools a server listed into what the model is offered,
// in the server's order. What the model cannot be offered as is becomes a
// note, and a server's odd list never stops escapement from starting:
//
//   - a tool without a name, or whose schema is over MaxSchemaBytes, is
//     not offered;
//   - a name listed twice is offered once (a call names the tool, so the
//     two cannot be told apart);
//   - of the tools whose model-facing names clash ("get.file" and
//     "get_file"), one keeps the plain name — by the names alone
//     (plainWinner), whatever the listing's order — and the others get
//     the name with the hash (hashedToolName);
//   - an input schema that is not an object schema (absent, `true`,
//     {"type": "string"}) becomes the empty object schema.
//
// Names that collide across servers are refused by Start: renaming a
// server in its configuration fixes those.
func offers(server string, tools []*sdk.Tool) ([]offer, []string) {
	type candidate struct {
		t      *sdk.Tool
		schema json.RawMessage
		plain  string
	}
	var (
		cands  []candidate
		notes  []string
		remote = map[string]bool{}
	)
	for _, t := range tools {
		if t == nil || t.Name == "" {
			notes = append(notes, "a tool without a name is not offered")
			continue
		}
		if remote[t.Name] {
			notes = append(notes, fmt.Sprintf("tool %q is listed twice; offered once", noted(t.Name)))
			continue
		}
		remote[t.Name] = true
		schema, problem := inputSchema(t.InputSchema)
		if len(schema) > MaxSchemaBytes {
			notes = append(notes, fmt.Sprintf("tool %q is not offered: its input schema has %d bytes (at most %d)", noted(t.Name), len(schema), MaxSchemaBytes))
			continue
		}
		if problem != "" {
			notes = append(notes, fmt.Sprintf("tool %q: %s; offered without parameters", noted(t.Name), problem))
		}
		cands = append(cands, candidate{t: t, schema: schema, plain: ToolName(server, t.Name)})
	}
	// Which of the tools that share a plain name keeps it is decided by the
	// names alone, never by the listing's order, so a session resumed
	// against a server that now lists its tools in another order calls the
	// same tools (plainWinner).
	owner := map[string]string{}
	for _, c := range cands {
		if w, ok := owner[c.plain]; !ok || plainWinner(c.plain, c.t.Name, w) {
			owner[c.plain] = c.t.Name
		}
	}
	taken := map[string]bool{}
	for plain := range owner {
		taken[plain] = true
	}
	var out []offer
	for _, c := range cands {
		name := c.plain
		if owner[c.plain] != c.t.Name {
			name = hashedToolName(server, c.t.Name)
			if taken[name] {
				notes = append(notes, fmt.Sprintf("tool %q is not offered: no name left for it", noted(c.t.Name)))
				continue
			}
			taken[name] = true
			notes = append(notes, fmt.Sprintf("tool %q is offered as %s (its plain name is another tool's)", noted(c.t.Name), name))
		}
		out = append(out, offer{name: name, tool: c.t, spec: ports.ToolSpec{Name: name, Description: description(server, c.t), Parameters: c.schema}})
	}
	return out, notes
}

// plainWinner reports whether the tool named a, rather than b, keeps the
// plain name both sanitise to: the one whose name needed no change
// ("get_file" before "get.file"), else the one whose name sorts first.
func plainWinner(plain, a, b string) bool {
	exactA, exactB := strings.HasSuffix(plain, "__"+a), strings.HasSuffix(plain, "__"+b)
	if exactA != exactB {
		return exactA
	}
	return a < b
}

// startedDetail is the EventStarted detail of a first start: how many
// tools, and the first notes about the list.
func startedDetail(n int, more bool, notes []string) string {
	d := fmt.Sprintf("%d tools", n)
	if more {
		d += fmt.Sprintf(" (it lists more; the first %d are offered)", MaxToolsPerServer)
	}
	if len(notes) > notesShown {
		notes = append(notes[:notesShown:notesShown], fmt.Sprintf("%d more notes", len(notes)-notesShown))
	}
	if len(notes) > 0 {
		d += "; " + strings.Join(notes, "; ")
	}
	return d
}

// description is what the model reads about a server tool.
func description(server string, t *sdk.Tool) string {
	d := strings.TrimSpace(t.Description)
	if d == "" {
		d = strings.TrimSpace(t.Title)
	}
	if d == "" {
		d = "Tool " + noted(t.Name)
	}
	if len(d) > MaxDescriptionBytes {
		d = textcut.Prefix(d, MaxDescriptionBytes) + fmt.Sprintf(" … [description cut: %d bytes]", len(d))
	}
	return d + " (MCP server " + server + ")"
}

// noted is a server's tool name as a note or a description quotes it: a
// name has no bound of its own.
func noted(name string) string { return textcut.Clip(name, 100) }

// inputSchema is the tool's input schema as the model's function
// parameters. MCP requires an object schema; one without "properties" gets
// an empty one (some chat APIs refuse an object schema without it), and a
// missing schema becomes the empty object schema. Anything else (`true`,
// a schema of another type) would make chat APIs refuse every request that
// offers it: it becomes the empty object schema too, and problem says why.
func inputSchema(schema any) (params json.RawMessage, problem string) {
	empty := json.RawMessage(`{"type":"object","properties":{}}`)
	if schema == nil {
		return empty, ""
	}
	b, err := json.Marshal(schema)
	if err != nil {
		return empty, "its input schema does not encode"
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil || m == nil {
		return empty, "its input schema is not a JSON object"
	}
	if typ, ok := m["type"]; ok && string(typ) != `"object"` {
		return empty, fmt.Sprintf("its input schema has type %s, not \"object\"", typ)
	}
	if _, ok := m["type"]; !ok {
		m["type"] = json.RawMessage(`"object"`)
	}
	if _, ok := m["properties"]; !ok {
		m["properties"] = json.RawMessage(`{}`)
	}
	out, err := json.Marshal(m)
	if err != nil {
		return empty, "its input schema does not encode"
	}
	return out, ""
}
