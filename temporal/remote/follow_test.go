package remote

import (
	"context"
	"fmt"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/temporal/protocol"
)

// closingRun is a run that is shutting its tree down, as the service
// shows it to a Follower: a query answers from the records logged so far;
// the run closes — its tree logs its last records (the running turn's end)
// and the workflow completes — in the instant between a query and the
// Follower's look at the run's status. That is the interleaving a client
// polling a real service meets now and then: the query's page says the run
// is closing and holds nothing new, the status says the run has ended.
type closingRun struct {
	client.Client
	records []kernel.Lifecycle
	logged  int  // records logged before the run closes
	closed  bool // the run has closed: every record is logged
}

func (c *closingRun) QueryWorkflow(_ context.Context, _, _, query string, args ...any) (converter.EncodedValue, error) {
	if query != protocol.LifecycleQuery || len(args) != 1 {
		return nil, fmt.Errorf("unexpected query %s%v", query, args)
	}
	from := args[0].(uint64)
	n := c.logged
	if c.closed {
		n = len(c.records)
	}
	p := protocol.Page{Closing: protocol.ClosingShutdown, Ready: true, Oldest: 1, Next: from}
	for _, l := range c.records[:n] {
		if l.Seq >= from {
			p.Records = append(p.Records, l)
			p.Next = l.Seq + 1
		}
	}
	return page{p}, nil
}

func (c *closingRun) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	c.closed = true // the run closes between the query and this look
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Status: enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED,
	}}, nil
}

func (c *closingRun) GetWorkflow(context.Context, string, string) client.WorkflowRun {
	return completed{}
}

// page is a query's answer.
type page struct{ p protocol.Page }

func (page) HasValue() bool { return true }

func (v page) Get(ptr any) error {
	*ptr.(*protocol.Page) = v.p
	return nil
}

// completed is the workflow's result: its tree was shut down.
type completed struct{ client.WorkflowRun }

func (completed) Get(_ context.Context, ptr any) error {
	*ptr.(*protocol.Result) = protocol.Result{Turns: 1, Outcome: kernel.OutcomeInterrupted, Reason: kernel.ReasonShutdown}
	return nil
}

// A Follower reports a run's end only after it has read every record the
// run logged: a closing run's page older than its close (nothing new
// then) is read again once the run has closed, so the turn the shutdown
// ended is shown before the end. Reading the status alone lost the
// turn's end, and a client waiting for it (escapement-temporal chat and
// run on SIGTERM) exited without the shutdown's line.
func TestPollShowsTheRecordsARunLoggedAsItClosed(t *testing.T) {
	c := &closingRun{logged: 5}
	for seq, kind := range []kernel.LifeKind{kernel.LifeTransition, kernel.LifeTurnStarted, kernel.LifeRequestStarted, kernel.LifeTransition, kernel.LifeInterrupted, kernel.LifeTransition, kernel.LifeTurnEnded} {
		c.records = append(c.records, kernel.Lifecycle{Seq: uint64(seq + 1), Kind: kind, Agent: kernel.Root, Turn: 1})
	}
	c.records[6].Outcome, c.records[6].Reason = kernel.OutcomeInterrupted, kernel.ReasonShutdown
	f := &Follower{s: &Session{c: c, id: "w"}, runID: "r", next: 6} // records 1-5 were shown
	var shown []kernel.Lifecycle
	for range 10 {
		b, err := f.Poll(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		shown = append(shown, b.Records...)
		if b.Ended {
			if len(shown) != 2 || shown[1].Kind != kernel.LifeTurnEnded || shown[1].Reason != kernel.ReasonShutdown {
				t.Fatalf("the run ended after showing %v; want its records 6 and 7 (the turn's end, reason shutdown) first", shown)
			}
			if b.Err != nil || b.Result.Reason != kernel.ReasonShutdown {
				t.Fatalf("ended with %v, %+v; want the workflow's result", b.Err, b.Result)
			}
			return
		}
	}
	t.Fatalf("no end after 10 polls; shown %v", shown)
}
