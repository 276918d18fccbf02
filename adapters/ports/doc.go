// Package ports holds the small interfaces and value types through which the
// live driver (adapters/live) meets the world: a Model that streams one chat
// request into a Sink, Tools that run one call, the ToolSpec a model is
// offered (and DelegateSpec, the kernel's own delegation tool), and the Step
// a driver hands its observer and its write-ahead hook.
//
// The adapters implement or consume these and nothing of the driver:
// adapters/openai is a Model, adapters/tools, adapters/mcp and
// adapters/toolset are Tools (Toolbox: with their specs), adapters/wal
// records Steps. So an adapter builds and tests without the driver, and a
// program can put its own model or tools behind the same ports
// (ModelFunc, ToolsFunc). The contract each method carries — what a Sink
// call does once the request is cancelled, when a Stream or a Run is
// abandoned — is the driver's, documented here on the method
// (docs/embedding.md, "The live driver").
package ports
