// Package remote drives an agent tree that runs as a Temporal workflow
// (package host): it starts the workflow or attaches to a running one,
// sends the user's input as updates (getting the kernel's refusal back as
// an error, as live.Driver does) and follows the tree's lifecycle records
// across the workflow's runs (Follower).
package remote

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/temporal/protocol"
)

// ErrRejected is live.ErrRejected: an input's refusal wraps it, as a
// local driver's does, and also the kernel's own refusal when it has one
// (kernel.ErrEmptyText, kernel.ErrShutdown, kernel.ErrUnknownAgent), so
// errors.Is matches them wherever the tree runs.
var ErrRejected = live.ErrRejected

// ErrEnded is returned by inputs sent to a workflow that has ended (its
// tree was shut down).
var ErrEnded = errors.New("the workflow has ended")

// Session is one agent tree's workflow, seen from a client.
type Session struct {
	c     client.Client
	id    string
	first string // the first run of the workflow's chain
	// resend is how long to wait before sending again an input a closing
	// run refused (it continues as new).
	resend time.Duration
}

// StartOptions configure Start.
type StartOptions struct {
	// WorkflowID names the workflow; a new unique id when empty. A running
	// workflow of that id is attached to (Tree is then ignored: the
	// running workflow keeps its own configuration); one that has ended is
	// an error.
	WorkflowID string
	// TaskQueue is the workers' task queue; protocol.DefaultTaskQueue when
	// empty.
	TaskQueue string
	// Tree is a new workflow's configuration.
	Tree protocol.Tree
}

// Start starts a workflow for a new tree, or attaches to the running
// workflow named opts.WorkflowID. attached says which.
func Start(ctx context.Context, c client.Client, opts StartOptions) (s *Session, attached bool, err error) {
	if opts.WorkflowID != "" {
		desc, err := c.DescribeWorkflowExecution(ctx, opts.WorkflowID, "")
		switch {
		case err == nil && desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
			return &Session{c: c, id: opts.WorkflowID, first: desc.GetWorkflowExecutionInfo().GetFirstRunId(), resend: 100 * time.Millisecond}, true, nil
		case err == nil:
			// Starting a tree afresh under the id of one that ended would
			// look like its continuation and have none of its conversation.
			return nil, false, fmt.Errorf("workflow %s has ended (%s): its tree was shut down; start a new one", opts.WorkflowID, desc.GetWorkflowExecutionInfo().GetStatus())
		case !isNotFound(err):
			return nil, false, fmt.Errorf("workflow %s: %w", opts.WorkflowID, err)
		}
	} else {
		opts.WorkflowID = NewWorkflowID()
	}
	if opts.TaskQueue == "" {
		opts.TaskQueue = protocol.DefaultTaskQueue
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       opts.WorkflowID,
		TaskQueue:                opts.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
	}, protocol.Workflow, opts.Tree)
	if err != nil {
		return nil, false, fmt.Errorf("starting workflow %s: %w", opts.WorkflowID, err)
	}
	return &Session{c: c, id: opts.WorkflowID, first: run.GetRunID(), resend: 100 * time.Millisecond}, false, nil
}

// Attach attaches to the workflow named id, running or not (a finished
// one can still be read).
func Attach(ctx context.Context, c client.Client, id string) (*Session, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return nil, fmt.Errorf("workflow %s: %w", id, err)
	}
	return &Session{c: c, id: id, first: desc.GetWorkflowExecutionInfo().GetFirstRunId(), resend: 100 * time.Millisecond}, nil
}

// NewWorkflowID is a fresh workflow id: "escapement-" and 12 random hex
// digits.
func NewWorkflowID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "escapement-" + hex.EncodeToString(b[:])
}

// ID is the workflow's id.
func (s *Session) ID() string { return s.id }

// Client is the Temporal client the session uses.
func (s *Session) Client() client.Client { return s.c }

// Submit starts a turn with text (the root must be Idle; an Interrupted
// root queues it for when the tree has settled).
func (s *Session) Submit(ctx context.Context, text string) (protocol.Accepted, error) {
	return s.update(ctx, protocol.SubmitUpdate, text)
}

// Say is what a REPL sends for a typed line: a submit when the root is
// Idle, an interjection otherwise, decided by the workflow.
func (s *Session) Say(ctx context.Context, text string) (protocol.Accepted, error) {
	return s.update(ctx, protocol.SayUpdate, text)
}

// Compact asks for the root's history to be compacted now, with focus for
// the summary (the root must be Idle: kernel.ErrNotIdle otherwise).
func (s *Session) Compact(ctx context.Context, focus string) (protocol.Accepted, error) {
	return s.update(ctx, protocol.CompactUpdate, focus)
}

// Decide decides on a call that waits for approval (kernel.Decide).
func (s *Session) Decide(ctx context.Context, d protocol.Decision) (protocol.Accepted, error) {
	return s.update(ctx, protocol.DecideUpdate, d)
}

// Interject sends text typed while the root works.
func (s *Session) Interject(ctx context.Context, text string) (protocol.Accepted, error) {
	return s.update(ctx, protocol.InterjectUpdate, text)
}

// Cancel cancels agent's turn; turn binds it to one turn (0: the current
// one), so a late Ctrl-C cannot cancel the next turn. It returns once the
// kernel has cancelled every stream and tool of the turn.
func (s *Session) Cancel(ctx context.Context, agent kernel.AgentID, turn uint64) (protocol.Accepted, error) {
	return s.update(ctx, protocol.CancelUpdate, protocol.Cancel{Agent: agent, Turn: turn})
}

// Shutdown asks the workflow to shut its tree down (every running turn
// ends interrupted, reason shutdown) and end once it has settled. It
// returns once the signal is recorded; a workflow that already ended is
// not an error.
func (s *Session) Shutdown(ctx context.Context) error {
	err := s.c.SignalWorkflow(ctx, s.id, "", protocol.ShutdownSignal, nil)
	if err != nil && isNotFound(err) {
		return nil
	}
	return err
}

// update sends one input and waits for the kernel's answer. A run that is
// continuing as new refuses it; it is sent again, to the next run.
func (s *Session) update(ctx context.Context, name string, arg any) (protocol.Accepted, error) {
	for {
		var acc protocol.Accepted
		h, err := s.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID:          s.id,
			FirstExecutionRunID: s.first,
			UpdateName:          name,
			Args:                []any{arg},
			WaitForStage:        client.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			err = h.Get(ctx, &acc)
		}
		if err == nil {
			return acc, nil
		}
		var app *temporal.ApplicationError
		switch {
		case errors.As(err, &app) && app.Type() == protocol.RefusedContinuing:
			select {
			case <-time.After(s.resend):
				continue
			case <-ctx.Done():
				return acc, ctx.Err()
			}
		case errors.As(err, &app):
			return acc, refused(name, app)
		case isNotFound(err):
			return acc, fmt.Errorf("%s: %w", name, ErrEnded)
		}
		return acc, fmt.Errorf("%s: %w", name, err)
	}
}

// Refusal is an input the tree refused: which input (the update's name),
// the kind of refusal (protocol's Refused* types) and the kernel's text.
// It wraps ErrRejected and the kernel's sentinel error for its kind.
type Refusal struct {
	Input string
	Type  string
	Text  string
}

// Error reads as a local driver's refusal does: "submit: kernel rejected
// the input: …".
func (r *Refusal) Error() string { return r.Input + ": " + ErrRejected.Error() + ": " + r.Text }

// Unwrap lets errors.Is match ErrRejected and the kernel's refusal.
func (r *Refusal) Unwrap() []error {
	errs := []error{ErrRejected}
	for _, k := range protocol.Refusals {
		if k.Type == r.Type {
			errs = append(errs, k.Err)
		}
	}
	if r.Type == protocol.RefusedStopped {
		errs = append(errs, ErrEnded)
	}
	return errs
}

func refused(name string, app *temporal.ApplicationError) error {
	return &Refusal{Input: name, Type: app.Type(), Text: app.Message()}
}
