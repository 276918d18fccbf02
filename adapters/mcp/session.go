package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/proc"
	"github.com/escapement/escapement/kernel"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// session is one connection to a server: for a stdio server, one process
// and its pipes. A session that ends is never reused; the server opens a
// new one on its next use.
type session struct {
	srv *server
	cs  *sdk.ClientSession
	tap *tap

	conn     *tapConn      // stdio and in-memory: closing it ends the connection
	proc     *proc.Process // stdio
	stdin    *os.File      // stdio: closing it asks the server to exit
	stdout   *pipeReader   // stdio
	stderr   *stderrTail   // stdio
	httpStop func()        // http: cuts every request of the session

	mu      sync.Mutex
	calls   map[*pending]context.CancelCauseFunc // running calls
	whyErr  error                                // why the session ended
	closing bool                                 // ended on purpose (Close): not reported

	refusal string // http: the last answer that was not a 2xx (status, body)

	watching bool   // watch runs (set by the goroutine that opens the session)
	detail   string // how the process ended and its last stderr (set by watch)

	retireOnce sync.Once
	cutOnce    sync.Once
	killed     chan struct{} // closed by retire: the session is ending
	dead       chan struct{} // closed by watch: everything of it is gone
}

// errServerGone is the cause a running call's context is cancelled with
// when its session ends under it.
var errServerGone = errors.New("the MCP server stopped")

func (sess *session) ending() bool {
	select {
	case <-sess.killed:
		return true
	default:
		return false
	}
}

// why says why the session ended.
func (sess *session) why() error {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.whyErr == nil {
		return errServerGone
	}
	return sess.whyErr
}

// begin registers a call; false when the session is already ending.
func (sess *session) begin(ctx context.Context, p *pending) (context.Context, bool) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.ending() {
		return nil, false
	}
	callCtx, cancel := context.WithCancelCause(ctx)
	sess.calls[p] = cancel
	sess.srv.c.calls.put(p)
	return callCtx, true
}

// end unregisters a call.
func (sess *session) end(p *pending) {
	sess.mu.Lock()
	cancel := sess.calls[p]
	delete(sess.calls, p)
	sess.mu.Unlock()
	if cancel != nil {
		cancel(nil)
	}
	sess.srv.c.calls.drop(p)
	sess.tap.forget(p)
}

// kill ends the session now, for why: every running call is cancelled
// (its Run returns an error result saying why), the process and everything
// it started are killed, an HTTP session's requests are cut. Only the
// first end's reason is kept. It does not wait; watch finishes the end.
func (sess *session) kill(why error) {
	sess.retire(why)
	sess.cut(true)
}

// retire ends the session for why without cutting it off: it takes no new
// call (the server opens a new session for the next one), and its process
// and everything it started are killed. Calls already running go on until
// cut: an answer the server wrote before it ended may still be read.
func (sess *session) retire(why error) {
	sess.retireOnce.Do(func() {
		sess.mu.Lock()
		if sess.whyErr == nil {
			sess.whyErr = why
		}
		close(sess.killed) // under mu: begin registers no call after it
		sess.mu.Unlock()
		if sess.proc != nil {
			sess.proc.Kill()
		}
	})
}

// cut closes the connection (an HTTP session's requests are cut) and, with
// cancel, cancels every running call with errServerGone. Without cancel
// the calls end as the SDK ends them: with their answer, or with its error
// for a connection that closed before the answer.
func (sess *session) cut(cancel bool) {
	sess.cutOnce.Do(func() {
		var calls []context.CancelCauseFunc
		if cancel {
			sess.mu.Lock()
			for _, c := range sess.calls { // determinism: order of cancels is irrelevant
				calls = append(calls, c)
			}
			sess.mu.Unlock()
		}
		for _, c := range calls {
			c(errServerGone)
		}
		if sess.conn != nil {
			sess.conn.Close()
		}
		if sess.httpStop != nil {
			sess.httpStop()
		}
	})
}

// watch owns the session's end: it waits until the connection closes, the
// process ends or the session is killed, kills what is left, waits for it
// to be gone, and reports the end. It runs in the server's WaitGroup.
func (sess *session) watch() {
	srv := sess.srv
	connDone := make(chan struct{})
	var connErr error // why the connection ended, once connDone is closed
	if sess.cs != nil {
		srv.wg.Go(func() {
			connErr = sess.cs.Wait()
			close(connDone)
		})
	} else {
		close(connDone)
	}
	var procDone <-chan struct{}
	if sess.proc != nil {
		procDone = sess.proc.Done()
	}
	select {
	case <-connDone:
		sess.retire(connEnd(connErr))
		// The connection was read to its end, and the SDK ended every call
		// still waiting then: a call the server answered has its answer,
		// the others the SDK's error. Cancelling them now would race the
		// answers they already have.
		sess.cut(false)
	case <-procDone:
		// The process and everything it started are gone, but what it
		// wrote before it ended may still be in the pipe: a call it
		// answered gets that answer. The pipe is read to its end (a read
		// that waits KillGrace for a byte fails, should a process that
		// escaped the tree still hold it open), and the SDK then ends every
		// call still waiting, as above.
		sess.retire(errors.New("the server process ended"))
		sess.stdout.drain(srv.c.opts.KillGrace)
		<-connDone
		sess.cut(false)
	case <-sess.killed: // kill: retired and cut
	}
	if sess.httpStop != nil && sess.cs != nil {
		// Every request is cut; this ends the SDK's side of the session.
		_ = sess.cs.Close()
	}
	<-connDone
	detail := ""
	if sess.proc != nil {
		exit, err := sess.proc.Wait()
		if err != nil {
			detail = fmt.Sprintf("the server process: %v", err)
		} else {
			detail = "the server process: " + exit.String()
		}
		sess.stderr.finish(srv.c.opts.KillGrace)
		detail += sess.stderr.tail()
	}
	sess.mu.Lock()
	if sess.proc == nil && sess.refusal != "" {
		detail = "the server's last refusal: " + sess.refusal
	}
	sess.detail = detail
	if detail != "" {
		sess.whyErr = fmt.Errorf("%w (%s)", sess.whyErr, detail)
	}
	why, closing := sess.whyErr, sess.closing
	sess.mu.Unlock()
	close(sess.dead)
	if !closing {
		srv.ended(sess, why)
		srv.c.emit(Event{Kind: EventStopped, Server: srv.cfg.Name, Detail: why.Error()})
	}
}

// connEnd says why a connection that closed by itself ended. A server that
// wrote what cannot be read (a line too long) ends the connection with that
// error; an end of file says nothing more.
func connEnd(err error) error {
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
		return fmt.Errorf("the connection closed: %w", err)
	}
	return errors.New("the connection closed")
}

// keepAlive pings the server every PingInterval; one that does not answer
// within PingTimeout is killed (and restarted on its next use).
func (sess *session) keepAlive() {
	opts := sess.srv.c.opts
	t := time.NewTicker(opts.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-sess.killed:
			return
		case <-t.C:
		}
		if err := sess.ping(opts.PingTimeout); err != nil {
			sess.kill(pingFailure(err, opts.PingTimeout))
			return
		}
	}
}

// pingFailure says why a ping failed.
func pingFailure(err error, timeout time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("it stopped answering: no answer to a ping within %v; killed", timeout)
	}
	return fmt.Errorf("a ping failed: %w; killed", err)
}

// ping sends one ping and waits at most timeout (no bound when 0) for its
// answer, or until the session is killed. The ping runs in a goroutine of
// its own (owned by the server), because a write to a server that no longer
// reads its stdin blocks whatever its context says; that goroutine ends
// when the session is killed (its pipe closed).
func (sess *session) ping(timeout time.Duration) error {
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	done := make(chan error, 1)
	sess.srv.wg.Go(func() { done <- sess.cs.Ping(ctx, nil) })
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-sess.killed:
		return sess.why()
	}
}

// watchAck starts, once ctx (the kernel's cancel of one call) ends, the
// server's deadline to acknowledge: PingTimeout. A session still not
// acknowledged by then — the returned stop function not yet called — is
// killed. stop must be called when the call's Run returns.
func (sess *session) watchAck(ctx context.Context, name string) (stop func()) {
	var (
		mu    sync.Mutex
		timer *time.Timer
		done  bool
	)
	d := sess.srv.c.opts.PingTimeout
	stopAfter := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			timer = time.AfterFunc(d, func() {
				sess.kill(fmt.Errorf("it did not acknowledge the cancel of %s within %v (no answer to a ping after notifications/cancelled); killed", name, d))
			})
		}
	})
	return func() {
		mu.Lock()
		done = true
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		stopAfter()
	}
}

// acknowledge is the end of a call the kernel cancelled. The SDK has
// retired the call and sends notifications/cancelled for it by itself; a
// call whose request never reached the server needs nothing more. Otherwise
// acknowledge waits for the notification to be written and then for the
// server's answer to a ping sent after it: the server has read the cancel
// and is responsive. A server that does not get that far within
// PingTimeout is killed (watchAck), which ends the wait; the kernel has
// abandoned the call after its grace by then if the grace is shorter.
func (sess *session) acknowledge(p *pending) ports.ToolResult {
	p.cancelled.Store(true)
	if !sess.tap.wasWritten(p) {
		return ports.ToolResult{Status: kernel.ToolCancelled, Content: "cancelled before the request reached the MCP server"}
	}
	select {
	case <-p.cancelSent:
	case <-sess.killed:
		return ports.ToolResult{Status: kernel.ToolCancelled, Content: fmt.Sprintf("cancelled; the MCP server stopped: %v", sess.why())}
	}
	sess.srv.c.emit(p.event(EventCancelSent))
	if err := sess.ping(0); err != nil {
		return ports.ToolResult{Status: kernel.ToolCancelled, Content: fmt.Sprintf("cancelled; the MCP server did not acknowledge: %v", err)}
	}
	return ports.ToolResult{Status: kernel.ToolCancelled, Content: "cancelled; the MCP server received notifications/cancelled"}
}

// shutdown ends the session on purpose, politely: a stdio server's stdin is
// closed (the MCP way to ask it to exit) and it gets grace to exit before
// the kill; an HTTP session is closed (a DELETE) within grace.
func (sess *session) shutdown(grace time.Duration) {
	sess.mu.Lock()
	sess.closing = true
	sess.mu.Unlock()
	timer := time.NewTimer(grace)
	defer timer.Stop()
	switch {
	case sess.proc != nil:
		sess.stdin.Close()
		select {
		case <-sess.proc.Done():
		case <-timer.C:
		}
	case sess.httpStop != nil:
		closed := make(chan struct{})
		sess.srv.wg.Go(func() {
			_ = sess.cs.Close()
			close(closed)
		})
		select {
		case <-closed:
		case <-timer.C:
		}
	}
	sess.kill(errClosed)
	<-sess.dead
}

// abort ends a session that failed to start, quietly, and waits until it
// is gone (so its stderr is complete).
func (sess *session) abort() {
	sess.mu.Lock()
	sess.closing = true
	sess.mu.Unlock()
	sess.kill(errors.New("the start failed"))
	if !sess.watching {
		sess.watching = true
		sess.srv.wg.Go(sess.watch)
	}
	<-sess.dead
}

// endDetail is "; the server process: exit status 1; its stderr ended
// with: …" for a session that failed to start, once it is gone.
func (sess *session) endDetail() string {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.detail == "" {
		return ""
	}
	return "; " + sess.detail
}

// httpRefused records an HTTP answer that was not a 2xx, for the error
// that reports the session's end.
func (sess *session) httpRefused(msg string) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	sess.refusal = msg
}
