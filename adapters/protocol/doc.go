// Package protocol is escapement's event protocol for programs that drive
// or watch a live run (docs/protocol.md): the JSON Lines that `escapement
// run --json` and `chat --json` print, and the JSON lines that
// `--input-format json` reads.
//
// The kernel's lifecycle records (kernel.Lifecycle) are the source; the
// protocol is a stable view of them. A View turns each ports.Step a live
// driver observes into Events — every record kind maps to a documented
// event type (a test holds it, so a new kind cannot vanish), with every
// field of its type present (null where the type says a field may have no
// value, never a zero standing for one), tool calls with their arguments
// and results (capped at TextCap, redacted), and token usage on each
// request's end and each turn's end. A run opens with Started and closes
// with Result. An Encoder numbers the events and writes them, one line
// each; ParseInput reads an input line, and an approve or deny line's
// Decision is the kernel's decision, which Decide hands to a Decider (the
// live driver, once it takes decisions). The JSON Schema of both directions
// is embedded (Schema, InputSchema) and every line the CLI's end-to-end
// tests print is validated against it.
//
// An embedder of adapters/agent or of the live driver can print the same
// protocol: feed the driver's Observer steps to a View and its events to
// an Encoder.
package protocol
