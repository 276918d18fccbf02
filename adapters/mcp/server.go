package mcp

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"
)

// server is one configured server: its current session, started at Start
// and again on the first use after the previous one ended.
type server struct {
	c   *Client
	cfg ServerConfig

	mu       sync.Mutex
	sess     *session      // the live session; nil before the first start and after an end
	starting chan struct{} // closed when the start in progress ends
	lastEnd  error         // why the previous session ended (for the restart event)
	closed   bool

	// wg owns every goroutine of every session (watchers, pingers, stderr
	// readers, pings in flight); close waits for it.
	wg sync.WaitGroup
}

func newServer(c *Client, cfg ServerConfig) *server {
	return &server{c: c, cfg: cfg}
}

// errClosed is returned for calls that arrive after Close.
var errClosed = errors.New("the MCP client is closed")

// startFirst starts the first session and lists the server's tools (see
// offers for what is offered).
func (s *server) startFirst(ctx context.Context) ([]offer, error) {
	ctx, cancel := context.WithTimeout(ctx, s.c.opts.StartTimeout)
	defer cancel()
	sess, err := s.open(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.cfg.where(), err)
	}
	tools, more, err := listTools(ctx, sess.cs)
	if err != nil {
		err = startCause(ctx, err)
		sess.abort()
		return nil, fmt.Errorf("%s: listing its tools: %w%s", s.cfg.where(), err, sess.endDetail())
	}
	list, notes := offers(s.cfg.Name, tools)
	s.mu.Lock()
	s.sess = sess
	s.mu.Unlock()
	s.c.emit(Event{Kind: EventStarted, Server: s.cfg.Name, Detail: startedDetail(len(list), more, notes)})
	return list, nil
}

// startCause says a start ran out of time rather than "context deadline
// exceeded".
func startCause(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no answer within the start timeout (%w)", err)
	}
	return err
}

// session returns the live session, starting a new one when there is none
// (the previous one crashed or was killed). Callers that arrive while a
// start is in progress wait for it; every wait ends with ctx.
func (s *server) session(ctx context.Context) (*session, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, errClosed
		}
		if s.sess != nil && !s.sess.ending() {
			sess := s.sess
			s.mu.Unlock()
			return sess, nil
		}
		if wait := s.starting; wait != nil {
			s.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		s.starting = done
		why := s.lastEnd
		s.mu.Unlock()

		sctx, cancel := context.WithTimeout(ctx, s.c.opts.StartTimeout)
		sess, err := s.open(sctx)
		if err != nil {
			err = startCause(sctx, err)
		}
		cancel()
		s.mu.Lock()
		s.starting = nil
		close(done)
		if err == nil {
			if s.closed {
				s.mu.Unlock()
				sess.kill(errClosed)
				return nil, errClosed
			}
			s.sess = sess
		}
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		detail := "restarted"
		if why != nil {
			detail = "restarted after: " + why.Error()
		}
		s.c.emit(Event{Kind: EventStarted, Server: s.cfg.Name, Detail: detail})
		return sess, nil
	}
}

// open starts a session: the transport (a process, an HTTP connection),
// the initialize handshake, the session's watcher and pinger.
func (s *server) open(ctx context.Context) (*session, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	sess := &session{srv: s, dead: make(chan struct{}), killed: make(chan struct{}), calls: map[*pending]context.CancelCauseFunc{}}
	sess.tap = newTap(&s.c.calls, func(p *pending) {
		s.c.emit(p.event(EventLateResult))
	}, s.progress)
	dial := s.cfg.dial
	if dial == nil {
		switch s.cfg.Type {
		case TypeStdio:
			dial = dialStdio
		case TypeHTTP:
			dial = dialHTTP
		}
	}
	transport, err := dial(ctx, sess)
	if err != nil {
		return nil, err
	}

	client := sdk.NewClient(&sdk.Implementation{Name: "escapement", Version: "1"}, &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			s.c.emit(Event{Kind: EventToolsChanged, Server: s.cfg.Name})
		},
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			if sess.conn == nil { // an HTTP session: its tap sees no reads
				if token, ok := req.Params.ProgressToken.(string); ok {
					if p := s.c.calls.get(token); p != nil {
						s.progress(p, req.Params)
					}
				}
			}
		},
	})
	cs, err := client.Connect(ctx, transport, &sdk.ClientSessionOptions{ProtocolVersion: ProtocolVersion})
	if err != nil {
		err = startCause(ctx, err)
		sess.abort()
		return nil, fmt.Errorf("initialize: %w%s", err, sess.endDetail())
	}
	sess.cs = cs
	sess.watching = true
	s.wg.Go(sess.watch)
	if s.c.opts.PingInterval > 0 {
		s.wg.Go(sess.keepAlive)
	}
	return sess, nil
}

// Progress events of one call are rate-limited: a server may send
// thousands a second (a loop, a chatty library), and each becomes a line on
// stderr or in --json output. A burst of progressBurst passes at once, then
// progressRate a second; the rest are dropped (progress is a snapshot: the
// next one shown is current). A message is cut to progressMessageKeep bytes.
const (
	progressBurst       = 10
	progressRate        = 10
	progressMessageKeep = 400
)

// progress reports a call's progress notification, unless the call was
// cancelled (a server may go on reporting a cancelled operation) or its
// rate is exceeded.
func (s *server) progress(p *pending, params *sdk.ProgressNotificationParams) {
	if p.cancelled.Load() || p.tool.server != s || !p.progressLimit.Allow() {
		return
	}
	e := p.event(EventProgress)
	e.Progress, e.Total, e.Message = params.Progress, params.Total, textcut.Clip(params.Message, progressMessageKeep)
	s.c.emit(e)
}

// call runs one tools/call on the live session.
func (s *server) call(ctx context.Context, t *remoteTool, call ports.Call, args []byte) ports.ToolResult {
	sess, err := s.session(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ports.ToolResult{Status: kernel.ToolCancelled, Content: "cancelled while the MCP server was starting"}
		}
		return toolError(t.name, fmt.Sprintf("%s could not be started: %v", s.cfg.where(), err))
	}
	p := &pending{token: s.c.newToken(), tool: t, call: call, sent: make(chan struct{}), cancelSent: make(chan struct{}),
		progressLimit: rate.NewLimiter(progressRate, progressBurst)}
	callCtx, ok := sess.begin(ctx, p)
	if !ok {
		return s.gone(ctx, sess, t)
	}
	defer sess.end(p)

	// Once the kernel cancels the call, the server has PingTimeout to
	// acknowledge (acknowledge answers a ping sent after the SDK's
	// notifications/cancelled); past that it is unresponsive and killed,
	// which also frees this Run if a write to the server is stuck.
	watch := sess.watchAck(ctx, t.name)
	defer watch()

	params := &sdk.CallToolParams{Name: t.remote, Arguments: jsonArgs(args)}
	params.SetProgressToken(p.token)
	res, err := sess.cs.CallTool(callCtx, params)
	var werr *jsonrpc.Error
	switch {
	case err == nil:
		return toolResult(res, s.c.opts.OutputLimit)
	case ctx.Err() != nil:
		return sess.acknowledge(p)
	case sess.ending():
		return s.gone(ctx, sess, t)
	case errors.As(err, &werr):
		// The answer that stood in for one the transport could not read
		// (frames.go) says why; the session goes on.
		if why, ok := sess.tap.takeUnreadable(p.requestID()); ok {
			return toolError(t.name, "the server's answer could not be read: "+why)
		}
		if !transportCode(werr.Code) {
			return toolError(t.name, fmt.Sprintf("the server refused the call: %s (JSON-RPC error %d)", werr.Message, werr.Code))
		}
	}
	// Either the server's answer could not be read (a content type this
	// client does not know, a result of the wrong shape: the SDK fails the
	// call, not the connection), or the transport failed (a process that
	// exited, a connection that broke). A ping tells them apart: a session
	// that still answers keeps serving, and the call is an error result
	// saying what was wrong; one that does not cannot be trusted with
	// another call.
	if perr := sess.ping(s.c.opts.PingTimeout); perr == nil {
		return toolError(t.name, fmt.Sprintf("the server's answer could not be read: %v (the server still answers; it was not restarted)", err))
	}
	sess.kill(fmt.Errorf("the call failed: %w", err))
	return s.gone(ctx, sess, t)
}

// transportCode reports the JSON-RPC codes the SDK gives calls its
// connection failed (client closing -32003, server closing -32004,
// rejected by transport -32005): not a server's answer.
func transportCode(code int64) bool { return code >= -32005 && code <= -32003 }

// gone is the result of a call whose session ended under it: it waits
// (within ctx) for the session to be gone, so the result can say why.
func (s *server) gone(ctx context.Context, sess *session, t *remoteTool) ports.ToolResult {
	select {
	case <-sess.dead:
	case <-ctx.Done():
		return ports.ToolResult{Status: kernel.ToolCancelled, Content: "cancelled; the MCP server had stopped"}
	}
	return toolError(t.name, fmt.Sprintf("%s stopped during the call: %v; it is restarted on the next call", s.cfg.where(), sess.why()))
}

// close stops the server for good and waits for its goroutines.
func (s *server) close() {
	s.mu.Lock()
	s.closed = true
	sess := s.sess
	s.mu.Unlock()
	if sess != nil {
		sess.shutdown(s.c.opts.KillGrace)
	}
	s.wg.Wait()
}

// killNow kills the live session without waiting.
func (s *server) killNow(why error) {
	s.mu.Lock()
	s.closed = true
	sess := s.sess
	s.mu.Unlock()
	if sess != nil {
		sess.kill(why)
	}
}

// ended records why a session ended, for the restart's event.
func (s *server) ended(sess *session, why error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess == sess {
		s.lastEnd = why
	}
}

// jsonArgs passes the call's arguments through unchanged.
type jsonArgs []byte

func (a jsonArgs) MarshalJSON() ([]byte, error) { return a, nil }
