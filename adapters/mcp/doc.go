// Package mcp offers the tools of MCP servers (Model Context Protocol) to
// the model, with the interrupt guarantees of escapement's own tools: every
// call gets a cancel, a grace, then abandonment, and everything that waits
// has a deadline (docs/mcp.md).
//
// It is a client on the official Go SDK (github.com/modelcontextprotocol/go-sdk).
// Servers come from configuration files in the .mcp.json shape (LoadConfig)
// and are started by Start: a stdio server through adapters/proc (its own
// process group, every descendant killed with it, the tools' environment
// policy), an HTTP server over the streamable HTTP transport. A Client is
// a ports.Tools: each server tool is offered as mcp__SERVER__TOOL (ToolName)
// with the server's input schema.
//
// # A call's end
//
//   - The server answers: text content is the result, isError an error
//     result, structured content JSON, other content a typed placeholder.
//   - The kernel cancels the call: the SDK retires the request and sends
//     notifications/cancelled for it. MCP servers do not answer a cancelled
//     request, so Run then pings the server: the answer, which comes after
//     the server read the notification, acknowledges the cancel and Run
//     returns kernel.ToolCancelled. A server that does not get there within
//     Options.PingTimeout is killed; until then Run blocks, and the kernel
//     abandons the call after its grace (its late result, if the server
//     ever sends one, is dropped and recorded, EventLateResult).
//   - The server crashes or its connection breaks: a call it answered
//     before it ended gets that answer (what a stdio server wrote before
//     its process ended is read to the pipe's end); a call still without
//     one ends at once as a kernel.ToolError saying what happened (the
//     process's exit status and the end of its stderr), and the turn goes
//     on.
//   - The server stops answering: a ping every Options.PingInterval that
//     goes unanswered for PingTimeout kills it, failing its running calls
//     the same way.
//   - The server's answer cannot be read — larger than 16 MiB, the bound
//     on one message on every transport, or nested deeper than the
//     JSON-RPC decoder takes: the call ends at once as a kernel.ToolError
//     saying why, and the session goes on (frames.go). Only a stdio line
//     over the bound whose first 16 MiB name no request ends the session.
//
// # Secrets
//
// Every value a configuration expanded from the environment (${NAME}),
// and every value it marks as a credential itself (a token in env or a
// header, a password or api_key in the URL), is a secret
// (ServerConfig.SecretValues): results, errors and events never hold
// one, whatever the server echoes or Go's transport quotes
// (docs/mcp.md, "What is a secret").
//
// The tools offered are those a server listed when it first started, for
// the client's life: a notifications/tools/list_changed is reported
// (EventToolsChanged) but changes nothing, and a restarted server is not
// listed again; a call to a tool the server no longer has is its error.
// The model's tool list stays the one the run began with (what the kernel
// recorded and a session resumes with).
//
// A server that ended is started again on its next use. Progress
// notifications reach Options.Observer as events; they do not extend the
// kernel's tool_timeout.
package mcp
