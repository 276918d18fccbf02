package remote

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/temporal/protocol"
)

// Follower reads a tree's lifecycle records, in order, across the runs of
// its workflow: it queries one run (protocol.LifecycleQuery) from the
// sequence number it has reached, and when that run says it is closing
// and has nothing more, moves to the run that continued it. Queries cost
// the workflow's history nothing; a client polls (Poll) as often as it
// wants its output to move.
type Follower struct {
	s     *Session
	runID string
	next  uint64
}

// Batch is what one Poll read.
type Batch struct {
	// Records are new lifecycle records of one run, in order.
	Records []kernel.Lifecycle
	// Page is the query's answer they came with (the agents' paths, the
	// calls' arguments, the root's state).
	Page protocol.Page
	// Missed counts records the run no longer held when they were asked
	// for (a client that fell more than the kernel's log capacity behind).
	Missed uint64
	// NewRun: the workflow continued as new; Records are the new run's
	// first (sequence numbers restarted).
	NewRun bool
	// Ended: the workflow has ended; Result is what it returned, or Err
	// why it failed (it was terminated, or its tree's configuration was
	// refused).
	Ended  bool
	Result protocol.Result
	Err    error
}

// Follow starts reading the workflow's current run. With fromStart false
// it skips the records that run already holds (an attaching client that
// only wants what happens next).
func (s *Session) Follow(ctx context.Context, fromStart bool) (*Follower, error) {
	desc, err := s.c.DescribeWorkflowExecution(ctx, s.id, "")
	if err != nil {
		return nil, fmt.Errorf("workflow %s: %w", s.id, err)
	}
	f := &Follower{s: s, runID: desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(), next: 1}
	for skip := !fromStart; skip; {
		p, err := f.query(ctx)
		if err != nil {
			return nil, err
		}
		f.next, skip = p.Next, p.More
	}
	return f, nil
}

// Poll reads what is new: at most one page of records, or the move to the
// next run, or the workflow's end. An error is a failed query or lookup
// (no worker answered in time, the service is unreachable): try again.
//
// A run's close is reported only after a query made once the run had
// closed found nothing more: the page that says the run is closing may be
// older than its close, which logs the tree's last records (the turn a
// shutdown ended) in between. A closed run answers queries too (its
// history replayed), so its last records are read, never skipped.
func (f *Follower) Poll(ctx context.Context) (Batch, error) {
	p, err := f.query(ctx)
	if err != nil {
		return Batch{}, err
	}
	b := f.batch(p)
	if len(p.Records) > 0 || p.More || p.Closing == "" {
		return b, nil
	}
	return f.closing(ctx, b)
}

// closing finishes a Poll whose run takes no more input and has shown
// everything: it ends, or continues as new, once its tree is idle. b is
// what the Poll read (no records).
func (f *Follower) closing(ctx context.Context, b Batch) (Batch, error) {
	desc, err := f.s.c.DescribeWorkflowExecution(ctx, f.s.id, f.runID)
	if err != nil {
		return Batch{}, err
	}
	status := desc.GetWorkflowExecutionInfo().GetStatus()
	if status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return b, nil
	}
	last, err := f.query(ctx)
	switch {
	case err == nil && (len(last.Records) > 0 || last.More):
		return f.batch(last), nil
	case err != nil && (status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED || status == enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW):
		return Batch{}, err
	}
	// Nothing more: a run that failed, was terminated or timed out may
	// not answer at all (its history cannot be replayed to its end).
	return f.closed(ctx, b, status)
}

// closed is a Poll's answer once the run has closed with status and shown
// everything: the next run's first records, or the workflow's end.
func (f *Follower) closed(ctx context.Context, b Batch, status enumspb.WorkflowExecutionStatus) (Batch, error) {
	switch status {
	case enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		next, err := f.successor(ctx)
		if err != nil {
			return Batch{}, err
		}
		f.runID, f.next = next, 1
		nb, err := f.Poll(ctx)
		nb.NewRun = true
		return nb, err
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		b.Ended = true
		b.Err = f.s.c.GetWorkflow(ctx, f.s.id, f.runID).Get(ctx, &b.Result)
		return b, nil
	default:
		b.Ended = true
		b.Err = fmt.Errorf("workflow %s %s", f.s.id, status)
		return b, nil
	}
}

// batch is a page's records, counting those the run no longer held, and
// moves the follower past them.
func (f *Follower) batch(p protocol.Page) Batch {
	b := Batch{Page: p, Records: p.Records}
	if len(p.Records) > 0 && p.Records[0].Seq > f.next {
		b.Missed = p.Records[0].Seq - f.next
	}
	f.next = p.Next
	return b
}

// Check reports, for a follower whose queries fail, whether the run it
// reads has ended some other way than through its tree (terminated,
// failed, timed out): then there is nothing more to read.
func (f *Follower) Check(ctx context.Context) (ended bool, err error) {
	desc, err := f.s.c.DescribeWorkflowExecution(ctx, f.s.id, f.runID)
	if err != nil {
		return false, err
	}
	switch st := desc.GetWorkflowExecutionInfo().GetStatus(); st {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW,
		enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return false, nil
	default:
		return true, fmt.Errorf("workflow %s %s", f.s.id, st)
	}
}

// RunID is the run being read.
func (f *Follower) RunID() string { return f.runID }

func (f *Follower) query(ctx context.Context) (protocol.Page, error) {
	v, err := f.s.c.QueryWorkflow(ctx, f.s.id, f.runID, protocol.LifecycleQuery, f.next)
	if err != nil {
		return protocol.Page{}, fmt.Errorf("reading workflow %s: %w", f.s.id, err)
	}
	var p protocol.Page
	if err := v.Get(&p); err != nil {
		return protocol.Page{}, fmt.Errorf("reading workflow %s: %w", f.s.id, err)
	}
	return p, nil
}

// successor is the run that continued the one being read, from the
// latter's close event.
func (f *Follower) successor(ctx context.Context) (string, error) {
	it := f.s.c.GetWorkflowHistory(ctx, f.s.id, f.runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return "", err
		}
		if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
			return a.GetNewExecutionRunId(), nil
		}
	}
	return "", fmt.Errorf("workflow %s run %s continued as new, but its close event names no new run", f.s.id, f.runID)
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}
