// Package spans derives OpenTelemetry-shaped spans from the kernel's steps:
// one invoke_agent span per agent turn, one chat span per model request,
// one execute_tool span per tool op, and one execute_tool span per
// delegation, under which the child's invoke_agent span nests (the GenAI
// conventions' tool-based transfer: the delegate tool is the tool an agent
// calls to hand a task to another agent).
//
// The derivation is pure: it reads each step's event and effects (the
// lifecycle records among them), reads no clock and starts nothing, so the
// same steps give the same spans — the live exporter (adapters/otel), the
// Perfetto timeline (sim.Perfetto) and the simulator's oracle, which holds
// every span to ending exactly once, under the right parent, whatever ended
// it (docs/semantics.md, "Spans"), all read one derivation. A recovered
// process feeds a fresh Deriver the steps its write-ahead log replays and
// holds the spans the crashed one held, with the same ids.
//
// A span ends in the step that ends what it stands for — the turn, the op,
// the delegation's call and its child's turn — or, when something under it
// still runs then (a request an interjection cut, winding down in its
// grace), in the step the last of those ends: a span never ends before the
// spans under it.
package spans
