package headless

import (
	"context"
	"fmt"
	"io"

	"github.com/escapement/escapement/adapters/console"
	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/kernel"
)

// ContextCommands are chat's /compact [FOCUS] and /usage (docs/live.md,
// "escapement chat"), run on the command's goroutine.
type ContextCommands struct {
	// Driver is the live driver (*live.Driver).
	Driver interface {
		Compact(ctx context.Context, focus string) error
		Inspect(ctx context.Context, fn func(*kernel.Kernel)) error
	}
	// Turns are the root's turns as the observer saw them.
	Turns *Turns
	// View is the run's protocol view, kept on the driver's goroutine:
	// read only through Inspect.
	View *protocol.View
	// Prior is the usage the session file recorded before this run.
	Prior kernel.Usage
	// Say prints a notice; Out gets /usage's text.
	Say func(format string, args ...any)
	Out io.Writer
}

// Run runs command name ("compact" or "usage") with its argument; started
// says a compaction's turn runs (its end shows the prompt).
func (c ContextCommands) Run(ctx context.Context, name, arg string) (started bool) {
	switch {
	case name == "usage" && arg != "":
		c.Say("/usage takes no argument; nothing was sent")
	case name == "usage":
		var run protocol.Usage
		if err := c.Driver.Inspect(ctx, func(*kernel.Kernel) { run = c.View.Total() }); err != nil {
			c.Say("/usage: %v", err)
			return false
		}
		fmt.Fprintln(c.Out, console.UsageText(c.Prior, run))
	default:
		// A compaction runs as a turn of its own; the kernel refuses it
		// while a turn runs, and does nothing when there is nothing to
		// compact (docs/semantics.md, "Compaction").
		if err := c.Driver.Compact(ctx, arg); err != nil {
			c.Say("/compact: %v", err)
			return false
		}
		if busy, _, _, _ := c.Turns.Get(); busy {
			return true
		}
		c.Say("/compact: nothing to compact")
	}
	return false
}
