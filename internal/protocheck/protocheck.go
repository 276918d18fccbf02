// Package protocheck validates protocol lines against the protocol's JSON
// Schema (adapters/protocol, docs/protocol.md) for tests: every --json line
// the CLI's end-to-end tests read goes through Lines, so a field that goes
// missing, a zero written where the schema wants null, or an event the
// schema does not know fails the test that printed it.
package protocheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/escapement/escapement/adapters/protocol"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

var compiled struct {
	once          sync.Once
	events, input *jsonschema.Schema
	err           error
}

// schemas compiles both schemas once.
func schemas() (events, input *jsonschema.Schema, err error) {
	compiled.once.Do(func() {
		c := jsonschema.NewCompiler()
		for name, b := range map[string][]byte{"events.schema.json": protocol.Schema(), "input.schema.json": protocol.InputSchema()} {
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				compiled.err = fmt.Errorf("%s: %w", name, err)
				return
			}
			if err := c.AddResource(name, doc); err != nil {
				compiled.err = err
				return
			}
		}
		if compiled.events, compiled.err = c.Compile("events.schema.json"); compiled.err != nil {
			return
		}
		compiled.input, compiled.err = c.Compile("input.schema.json")
	})
	return compiled.events, compiled.input, compiled.err
}

// Event checks one output line against the events schema.
func Event(line []byte) error { return validate(line, false) }

// Input checks one input line against the input schema.
func Input(line []byte) error { return validate(line, true) }

func validate(line []byte, input bool) error {
	events, in, err := schemas()
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	s := events
	if input {
		s = in
	}
	return s.Validate(inst)
}

// Lines validates every line of out (--json stdout; a pseudo-terminal's
// CRLF line ends are taken as LF) and decodes it, failing t at the first
// line that is not a valid event or whose seq is not the one after the
// line before.
func Lines(t testing.TB, out string) []protocol.Event {
	t.Helper()
	var evs []protocol.Event
	for i, line := range strings.Split(strings.TrimRight(strings.ReplaceAll(out, "\r\n", "\n"), "\n"), "\n") {
		if line == "" && i == 0 {
			return nil
		}
		if err := Event([]byte(line)); err != nil {
			t.Fatalf("--json line %d is not a valid protocol event: %v\n%s", i+1, err, line)
		}
		var ev protocol.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("--json line %d: %v\n%s", i+1, err, line)
		}
		if want := uint64(len(evs) + 1); ev.Seq != want {
			t.Fatalf("--json line %d has seq %d, want %d\n%s", i+1, ev.Seq, want, line)
		}
		evs = append(evs, ev)
	}
	return evs
}
