package protocol

import _ "embed"

//go:embed events.schema.json
var eventsSchema []byte

//go:embed input.schema.json
var inputSchema []byte

// Schema is the JSON Schema (draft 2020-12) of one line of the protocol's
// output (docs/protocol.md): an event of one of Types, with exactly its
// Fields. It is a copy; the caller may change it.
func Schema() []byte { return append([]byte(nil), eventsSchema...) }

// InputSchema is the JSON Schema of one line of --input-format json input
// (ParseInput accepts exactly what it accepts).
func InputSchema() []byte { return append([]byte(nil), inputSchema...) }
