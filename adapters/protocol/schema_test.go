package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/mcp"
	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// lifeKinds are every lifecycle kind the kernel has: LifeKind values up
// to the first that has no name.
func lifeKinds() []kernel.LifeKind {
	var kinds []kernel.LifeKind
	for k := kernel.LifeKind(1); !strings.HasPrefix(k.String(), "life("); k++ {
		kinds = append(kinds, k)
	}
	return kinds
}

// TestEveryKindMaps: every kind of lifecycle record the kernel emits has
// its filler, an event type of its own name in the table and the schema,
// and a section in docs/protocol.md — so a kind the kernel gains cannot
// vanish from the protocol, nor reach it undocumented.
func TestEveryKindMaps(t *testing.T) {
	doc, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	schema := parseSchema(t)
	kinds := lifeKinds()
	if len(kinds) < 20 {
		t.Fatalf("only %d lifecycle kinds found", len(kinds))
	}
	for _, k := range kinds {
		name := k.String()
		if _, ok := fillers[k]; !ok {
			t.Errorf("lifecycle kind %s has no filler in the view", name)
		}
		if _, ok := shapes[name]; !ok {
			t.Errorf("lifecycle kind %s is no event type", name)
		}
		if _, ok := schema.Defs["event_"+name]; !ok {
			t.Errorf("lifecycle kind %s is not in the schema", name)
		}
		if !strings.Contains(string(doc), "| `"+name+"` |") {
			t.Errorf("docs/protocol.md has no row for %s", name)
		}
	}
	if len(fillers) != len(kinds) {
		t.Errorf("%d fillers for %d kinds", len(fillers), len(kinds))
	}
}

// schemaDoc is the part of the events schema the tests read.
type schemaDoc struct {
	Properties struct {
		Type struct{ Enum []string } `json:"type"`
	}
	AllOf []struct {
		If struct {
			Properties struct {
				Type struct{ Const string } `json:"type"`
			}
		}
		Then struct {
			Ref string `json:"$ref"`
		}
	}
	Defs map[string]struct {
		Required             []string
		AdditionalProperties *bool `json:"additionalProperties"`
		Properties           map[string]json.RawMessage
		Enum                 []string
		Type                 string
	} `json:"$defs"`
}

func parseSchema(t *testing.T) schemaDoc {
	t.Helper()
	var s schemaDoc
	if err := json.Unmarshal(Schema(), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSchemaIsTheTable: the schema has one definition per event type,
// chosen by its type, that requires exactly the fields the encoder writes,
// allows no other, and allows null exactly where the encoder may write it.
func TestSchemaIsTheTable(t *testing.T) {
	s := parseSchema(t)
	if !slices.Equal(sorted(s.Properties.Type.Enum), Types()) {
		t.Errorf("the schema's types %v, the table's %v", sorted(s.Properties.Type.Enum), Types())
	}
	chosen := map[string]string{}
	for _, a := range s.AllOf {
		chosen[a.If.Properties.Type.Const] = a.Then.Ref
	}
	for _, typ := range Types() {
		if chosen[typ] != "#/$defs/event_"+typ {
			t.Errorf("type %s chooses %q", typ, chosen[typ])
		}
		def, ok := s.Defs["event_"+typ]
		if !ok {
			t.Errorf("no definition of %s", typ)
			continue
		}
		names, nullable := Fields(typ)
		if !slices.Equal(def.Required, names) {
			t.Errorf("%s: the schema requires %v, the encoder writes %v", typ, def.Required, names)
		}
		if def.AdditionalProperties == nil || *def.AdditionalProperties || len(def.Properties) != len(names) {
			t.Errorf("%s: the schema allows other fields", typ)
		}
		for _, name := range names {
			var compact bytes.Buffer
			_ = json.Compact(&compact, def.Properties[name])
			if allowsNull := strings.Contains(compact.String(), `{"type":"null"}`); allowsNull != nullable[name] {
				t.Errorf("%s.%s: the schema allows null %v, the encoder writes null %v", typ, name, allowsNull, nullable[name])
			}
		}
	}
}

// TestSchemaEnumsAreTheKernels: the names the schema allows for states,
// triggers, outcomes, reasons, op ends, call statuses and MCP events are
// exactly the kernel's (and the MCP client's, less the two it never
// shows): a name the kernel gains fails here until the protocol says it.
func TestSchemaEnumsAreTheKernels(t *testing.T) {
	s := parseSchema(t)
	names := func(n int, name func(int) string) []string {
		var out []string
		for i := range n {
			if v := name(i); v != "" && v != "none" {
				out = append(out, v)
			}
		}
		return out
	}
	upTo := func(name func(int) string) []string {
		var out []string
		for i := 0; !strings.Contains(name(i), "("); i++ {
			if v := name(i); v != "" && v != "none" {
				out = append(out, v)
			}
		}
		return out
	}
	want := map[string][]string{
		"state":       names(fsm.NumStates, func(i int) string { return fsm.State(i).String() }),
		"trigger":     names(fsm.NumTriggers, func(i int) string { return fsm.Trigger(i).String() }),
		"outcome":     upTo(func(i int) string { return kernel.Outcome(i).String() }),
		"reason":      upTo(func(i int) string { return kernel.Reason(i).String() }),
		"op_end":      upTo(func(i int) string { return kernel.OpEnd(i).String() }),
		"call_status": upTo(func(i int) string { return kernel.CallStatus(i).String() }),
		"mcp_event": {string(mcp.EventProgress), string(mcp.EventCancelSent), string(mcp.EventLateResult),
			string(mcp.EventStarted), string(mcp.EventStopped), string(mcp.EventToolsChanged)},
	}
	for def, names := range want {
		if got := s.Defs[def].Enum; !slices.Equal(sorted(got), sorted(names)) {
			t.Errorf("the schema's %s names %v; want %v", def, got, names)
		}
	}
}

// TestDocsListEveryField: docs/protocol.md's table of events gives each
// type's fields in the order they are written, a nullable one marked "?".
func TestDocsListEveryField(t *testing.T) {
	doc, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([^|]*) \\|")
	seen := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		typ := m[1]
		names, nullable := Fields(typ)
		if names == nil {
			continue // a row of another table
		}
		seen[typ] = true
		var want []string
		for _, n := range names[3:] {
			if nullable[n] {
				n += "?"
			}
			want = append(want, "`"+n+"`")
		}
		if got := strings.TrimSpace(m[2]); got != strings.Join(want, " ") {
			t.Errorf("docs/protocol.md lists %s as\n\t%s\nthe encoder writes\n\t%s", typ, got, strings.Join(want, " "))
		}
	}
	for _, typ := range Types() {
		if !seen[typ] {
			t.Errorf("docs/protocol.md has no row for %s", typ)
		}
	}
}

// TestVersionIsTheSchemas: the schema's protocol const and title, and the
// documentation, carry Version.
func TestVersionIsTheSchemas(t *testing.T) {
	doc, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("version %d", Version)
	for name, text := range map[string]string{"events schema": string(Schema()), "input schema": string(InputSchema()), "docs/protocol.md": string(doc)} {
		if !strings.Contains(text, want) {
			t.Errorf("%s does not say %q", name, want)
		}
	}
	if !strings.Contains(string(Schema()), fmt.Sprintf(`"const": %d`, Version)) {
		t.Error("the events schema's protocol field is not Version")
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
