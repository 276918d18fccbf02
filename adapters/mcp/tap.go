package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tap watches the JSON-RPC messages of one session. The SDK sends
// notifications/cancelled by itself when a call's context ends, from a
// goroutine of its own; the tap is how a call learns its request's id (by
// the progress token it carries) and when that notification has gone out,
// so the cancelled call can then ask the server for an acknowledgement
// (a ping answered after the notification). On a stdio session it also
// sees the responses that arrive for calls already cancelled: late results,
// dropped by the SDK and recorded here.
type tap struct {
	calls     *callTable // the client's running calls, by progress token
	late      func(p *pending)
	progress  func(p *pending, params *sdk.ProgressNotificationParams)
	mu        sync.Mutex
	byID      map[string]*pending // calls whose request was written, by request id
	cancelled map[string]*pending // requests whose cancel went out, no answer yet
	// unreadable says why the answer to a call (by request id) could not
	// be read, for the call that gets the stand-in error answer (frames.go).
	unreadable map[string]string
}

// cancelledBound bounds how many cancelled requests a session remembers to
// recognise their late answers (servers mostly never answer them).
const cancelledBound = 1024

// newTap returns a session's tap; late is called when a response arrives
// for a request whose cancel went out, progress with each progress
// notification read (on stdio and in-memory sessions).
func newTap(calls *callTable, late func(*pending), progress func(*pending, *sdk.ProgressNotificationParams)) *tap {
	return &tap{calls: calls, late: late, progress: progress, byID: map[string]*pending{}, cancelled: map[string]*pending{}, unreadable: map[string]string{}}
}

// forget drops a finished call's request id.
func (t *tap) forget(p *pending) {
	id := p.requestID()
	t.mu.Lock()
	defer t.mu.Unlock()
	if id != "" && t.byID[id] == p {
		delete(t.byID, id)
		delete(t.unreadable, id)
	}
}

// sending is called before msg is written; the function it returns is
// called with the write's outcome.
func (t *tap) sending(msg jsonrpc.Message) func(error) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return func(error) {}
	}
	switch req.Method {
	case "tools/call":
		var params struct {
			Meta struct {
				ProgressToken any `json:"progressToken"`
			} `json:"_meta"`
		}
		token, ok := "", false
		if json.Unmarshal(req.Params, &params) == nil {
			token, ok = params.Meta.ProgressToken.(string)
		}
		if !ok || !req.ID.IsValid() {
			return func(error) {}
		}
		id := idText(req.ID.Raw())
		p := t.calls.get(token)
		t.mu.Lock()
		if p != nil {
			p.idMu.Lock()
			p.id, p.writing = id, true
			p.idMu.Unlock()
			t.byID[id] = p
		}
		t.mu.Unlock()
		if p == nil {
			return func(error) {}
		}
		return func(err error) {
			if err == nil {
				p.sentOnce.Do(func() { close(p.sent) })
			}
		}
	case "notifications/cancelled":
		var params struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(req.Params, &params) != nil {
			return func(error) {}
		}
		id := compactJSON(params.RequestID)
		t.mu.Lock()
		p := t.byID[id]
		t.mu.Unlock()
		if p == nil {
			return func(error) {}
		}
		return func(err error) {
			if err != nil {
				return
			}
			t.mu.Lock()
			if len(t.cancelled) < cancelledBound {
				t.cancelled[id] = p
			}
			t.mu.Unlock()
			p.cancelSentOnce.Do(func() { close(p.cancelSent) })
		}
	}
	return func(error) {}
}

// received is called with each message read (stdio and in-memory
// sessions), in the order the server sent them. Progress is routed here,
// not by the SDK's handler, which runs apart from the reader: a progress
// notification sent before the result would otherwise race the result and
// be dropped as belonging to a finished call.
func (t *tap) received(msg jsonrpc.Message) {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "notifications/progress" {
		var params sdk.ProgressNotificationParams
		if json.Unmarshal(req.Params, &params) != nil {
			return
		}
		if token, ok := params.ProgressToken.(string); ok {
			if p := t.calls.get(token); p != nil {
				t.progress(p, &params)
			}
		}
		return
	}
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || !resp.ID.IsValid() {
		return
	}
	id := idText(resp.ID.Raw())
	t.mu.Lock()
	p := t.cancelled[id]
	delete(t.cancelled, id)
	t.mu.Unlock()
	if p != nil && t.late != nil {
		t.late(p)
	}
}

// wasWritten reports whether the call's request has been handed to the
// transport (the server may have it), and returns sent, closed once the
// write succeeded.
func (t *tap) wasWritten(p *pending) bool {
	p.idMu.Lock()
	defer p.idMu.Unlock()
	return p.writing
}

// requestID is the call's request id as JSON text ("" before its write).
func (p *pending) requestID() string {
	p.idMu.Lock()
	defer p.idMu.Unlock()
	return p.id
}

// idText is a request id as JSON text, the key both a request and the
// cancel notification naming it map to.
func idText(raw any) string {
	b, err := json.Marshal(raw)
	if err != nil {
		return ""
	}
	return string(b)
}

func compactJSON(b []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return string(b)
	}
	return buf.String()
}

// tapTransport wraps a stdio or in-memory transport: its connection reports
// every message to the tap, and closing it makes a pending Read return at
// once (a kill).
type tapTransport struct {
	inner sdk.Transport
	tap   *tap
	got   func(*tapConn) // receives the connection once made
}

func (t *tapTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	conn, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	kill, cancel := context.WithCancel(context.Background())
	c := &tapConn{inner: conn, tap: t.tap, kill: kill, cancel: cancel}
	t.got(c)
	return c, nil
}

// tapConn is a connection whose traffic the tap sees.
type tapConn struct {
	inner  sdk.Connection
	tap    *tap
	kill   context.Context
	cancel context.CancelFunc
}

func (c *tapConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	// The SDK reads with a context that never ends; the kill context
	// unblocks a Read when the session is killed.
	msg, err := c.inner.Read(c.kill)
	if err == nil {
		c.tap.received(msg)
	}
	return msg, err
}

func (c *tapConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	done := c.tap.sending(msg)
	err := c.inner.Write(ctx, msg)
	done(err)
	return err
}

func (c *tapConn) Close() error {
	c.cancel()
	return c.inner.Close()
}

func (c *tapConn) SessionID() string { return c.inner.SessionID() }
