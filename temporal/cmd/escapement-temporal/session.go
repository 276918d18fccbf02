package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"golang.org/x/term"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/temporal/protocol"
	"github.com/escapement/escapement/temporal/remote"
)

// remoteRun is one run or chat command's view of a tree's workflow: the
// session, the renderer, and the root's turn as the follower last saw it.
type remoteRun struct {
	a       *app
	f       *clientFlags
	cl      client.Client
	s       *remote.Session
	out     io.Writer
	errw    io.Writer
	r       *renderer
	state   turnState
	notify  chan struct{}
	ended   chan struct{} // closed when the workflow has ended
	endErr  error         // why it ended, when it failed (read after ended)
	stop    chan struct{}
	stopped chan struct{}
}

// turnState is the root's turn as the follower last saw it; the command's
// goroutine reads it when notified.
type turnState struct {
	mu    sync.Mutex
	busy  bool
	turn  uint64
	ended uint64 // root turns ended since the command began
	last  kernel.Lifecycle
	// The last record the follower has shown: its run and sequence number.
	run int
	seq uint64
}

func (s *turnState) get() (busy bool, turn, ended uint64, last kernel.Lifecycle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy, s.turn, s.ended, s.last
}

// lockedWriter serialises writes from the follower's goroutine and the
// command's.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// connect dials the service and starts or attaches to the workflow; then
// the follower reads it (from the start of a new workflow's run; from now
// on for one attached to, whose turn in progress is shown from here).
func connect(ctx context.Context, a *app, f *clientFlags) (*remoteRun, error) {
	cl, err := f.conn.dial(a)
	if err != nil {
		return nil, err
	}
	s, attached, err := remote.Start(ctx, cl, remote.StartOptions{WorkflowID: f.workflow, TaskQueue: f.conn.taskQueue, Tree: f.tree()})
	if err != nil {
		cl.Close()
		return nil, &exitError{Code: exitCheckFailed, Err: err}
	}
	errw := &lockedWriter{w: a.err}
	rr := &remoteRun{
		a: a, f: f, cl: cl, s: s, out: &lockedWriter{w: a.out}, errw: errw,
		notify: make(chan struct{}, 1), ended: make(chan struct{}), stop: make(chan struct{}), stopped: make(chan struct{}),
	}
	rr.r = newRenderer(rr.out, errw, f.json, isTerminal(a.out))
	rr.r.session, rr.r.resumed, rr.r.resume = s.ID(), attached, resumeCommand(&f.conn, s.ID())
	if attached {
		fmt.Fprintf(errw, "escapement: attached to workflow %s\n", s.ID())
	} else {
		fmt.Fprintf(errw, "escapement: workflow %s (continue it with --workflow %s)\n", s.ID(), s.ID())
	}
	fol, err := rr.followFrom(ctx, !attached)
	if err != nil {
		cl.Close()
		return nil, err
	}
	// The first page tells whether a turn runs (an attached tree's); when
	// no worker answers yet, the follower keeps asking and says so.
	_ = rr.pollOnce(ctx, fol, true)
	go rr.follow(fol) // owned: close waits for it
	return rr, nil
}

// followFrom starts the follower; an attaching client skips the records
// the run holds, which takes a worker to answer: it waits for one, saying
// so once.
func (rr *remoteRun) followFrom(ctx context.Context, fromStart bool) (*remote.Follower, error) {
	told := false
	for {
		qctx, cancel := context.WithTimeout(ctx, queryTimeout)
		fol, err := rr.s.Follow(qctx, fromStart)
		cancel()
		if err == nil {
			return fol, nil
		}
		if ctx.Err() != nil {
			return nil, &exitError{Code: exitInterrupted, Err: ctx.Err()}
		}
		if !told {
			told = true
			rr.r.say("%v; retrying (is a worker running on task queue %s?)", err, rr.f.conn.taskQueue)
		}
		select {
		case <-time.After(rr.f.poll):
		case <-ctx.Done():
		}
	}
}

// queryTimeout bounds one read of the workflow (a query waits for a
// worker to answer it).
const queryTimeout = 10 * time.Second

// close stops the follower, emits the result event (the last one) and
// closes the connection.
func (rr *remoteRun) close() {
	close(rr.stop)
	<-rr.stopped
	rr.r.result()
	rr.cl.Close()
}

// follow polls the tree's lifecycle every --poll until close, showing
// every record and keeping the turn state. A query that fails (no worker
// answered in time) is retried; the user is told once while it lasts.
func (rr *remoteRun) follow(fol *remote.Follower) {
	defer close(rr.stopped)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // owned: ends with follow (cancel)
		select {
		case <-rr.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	tick := time.NewTicker(rr.f.poll)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-rr.stop:
			return
		case <-tick.C:
		}
		qctx, qcancel := context.WithTimeout(ctx, queryTimeout)
		err := rr.pollOnce(qctx, fol, false)
		qcancel()
		switch {
		case err == nil:
			if failing {
				rr.r.say("reading the workflow again")
			}
			failing = false
		case ctx.Err() != nil:
			return
		case errors.Is(err, errEnded):
			return
		case !failing:
			failing = true
			rr.r.say("%v; retrying (is a worker running on task queue %s?)", err, rr.f.conn.taskQueue)
			if ended, cerr := fol.Check(ctx); ended {
				rr.finish(cerr)
				return
			}
		}
	}
}

// errEnded stops the follower once the workflow has ended.
var errEnded = errors.New("workflow ended")

// pollOnce reads what is new and shows it. first only reads the state
// (an attached tree's records so far are not shown).
func (rr *remoteRun) pollOnce(ctx context.Context, fol *remote.Follower, first bool) error {
	for {
		b, err := fol.Poll(ctx)
		if err != nil {
			return err
		}
		if b.Missed > 0 {
			rr.r.say("%d lifecycle record(s) were no longer held when read; the output skips them", b.Missed)
		}
		changed := first
		rr.r.start(&b.Page)
		for i := range b.Records {
			l := &b.Records[i]
			rr.r.show(l, &b.Page)
			rr.state.mu.Lock()
			rr.state.run, rr.state.seq = b.Page.Run, l.Seq
			rr.state.mu.Unlock()
			if l.Agent != kernel.Root {
				continue
			}
			switch l.Kind {
			case kernel.LifeTurnStarted:
				rr.state.mu.Lock()
				rr.state.busy, rr.state.turn = true, l.Turn
				rr.state.mu.Unlock()
				changed = true
			case kernel.LifeTurnEnded:
				rr.state.mu.Lock()
				rr.state.busy = false
				rr.state.ended++
				rr.state.last = *l
				rr.state.mu.Unlock()
				changed = true
			}
		}
		if first {
			rr.state.mu.Lock()
			rr.state.busy, rr.state.turn = b.Page.Busy, b.Page.Turn
			rr.state.run, rr.state.seq = b.Page.Run, b.Page.Next-1
			rr.state.mu.Unlock()
		}
		if changed {
			rr.poke()
		}
		if b.Ended {
			rr.finish(b.Err)
			return errEnded
		}
		if !b.Page.More {
			return nil
		}
	}
}

// accepted records the root's state right after an input the workflow
// accepted, as a local driver's observer does before its input returns —
// unless the follower has already shown records past that step (their
// state is newer). So a line read right after a submit is queued or
// interjected, not submitted again, and a Ctrl-C that comes before the
// follower has seen the turn start cancels it.
func (rr *remoteRun) accepted(acc protocol.Accepted) {
	rr.state.mu.Lock()
	defer rr.state.mu.Unlock()
	if acc.Run < rr.state.run || acc.Run == rr.state.run && acc.Seq <= rr.state.seq {
		return
	}
	rr.state.busy = acc.State != fsm.Idle.String()
	rr.state.turn = acc.Turn
}

// finish records the workflow's end and wakes the command.
func (rr *remoteRun) finish(err error) {
	select {
	case <-rr.ended:
		return
	default:
	}
	rr.endErr = err
	close(rr.ended)
	rr.poke()
}

func (rr *remoteRun) poke() {
	select {
	case rr.notify <- struct{}{}:
	default: // a notification is already pending
	}
}

// whileBusy resolves --while-busy as the escapement CLI does: interject
// when stdin is a terminal, queue otherwise.
func (rr *remoteRun) whileBusy() string {
	if rr.f.whileBusy != "" {
		return rr.f.whileBusy
	}
	if f, ok := rr.a.in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return busyInterject
	}
	return busyQueue
}
