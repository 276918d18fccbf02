package protocol

import (
	"context"

	"github.com/escapement/escapement/kernel"
)

// Decider takes a person's decision on a tool call that waits for
// approval (docs/semantics.md, "Approvals"): the live driver, once it
// takes decisions as inputs. Inspect runs fn on the kernel's goroutine,
// between steps; Decide steps kernel.Decide with the driver's clock.
type Decider interface {
	Inspect(ctx context.Context, fn func(*kernel.Kernel)) error
	Decide(ctx context.Context, agent kernel.AgentID, callID, digest string, v kernel.Verdict, note string) error
}

// Decide hands d the decision an approve or deny line asks for, addressed
// on d's kernel (Input.Decision). Its error is the line's refusal (an
// ErrInput) or d's.
func Decide(ctx context.Context, d Decider, in Input) error {
	var (
		ev  kernel.Event
		err error
	)
	if ierr := d.Inspect(ctx, func(k *kernel.Kernel) { ev, err = in.Decision(k) }); ierr != nil {
		return ierr
	}
	if err != nil {
		return err
	}
	return d.Decide(ctx, ev.Agent, ev.CallID, ev.Digest, ev.Verdict, ev.Text)
}
