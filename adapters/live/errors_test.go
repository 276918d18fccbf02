package live

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// TestRefusalsMatchKernelSentinels: an input the kernel refuses comes back
// from Submit, Interject, Say and Cancel wrapping both ErrRejected and the
// kernel's own error, so a host tells an empty text from an unknown agent
// from a busy root with errors.Is / errors.As, never by parsing the text.
func TestRefusalsMatchKernelSentinels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		streaming := make(chan struct{}, 1)
		// A model that streams until released, ignoring its cancel until
		// then, so the tree is still shutting down when the late input
		// below arrives.
		m := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			streaming <- struct{}{}
			<-release
			return ctx.Err()
		})
		d := newDriver(t, m, noTools, newRecorder(), nil)
		stop := start(t, d)
		defer stop()
		ctx := t.Context()

		for name, input := range map[string]func() error{
			"Submit":    func() error { return d.Submit(ctx, "") },
			"Interject": func() error { return d.Interject(ctx, "") },
			"Say":       func() error { return d.Say(ctx, "") },
		} {
			err := input()
			if !errors.Is(err, ErrRejected) || !errors.Is(err, kernel.ErrEmptyText) {
				t.Errorf("%s(\"\"): %v, want ErrRejected wrapping kernel.ErrEmptyText", name, err)
			}
		}
		if err := d.Cancel(ctx, 99, 0); !errors.Is(err, ErrRejected) || !errors.Is(err, kernel.ErrUnknownAgent) {
			t.Errorf("Cancel(99): %v, want ErrRejected wrapping kernel.ErrUnknownAgent", err)
		}

		if err := d.Submit(ctx, "go"); err != nil {
			t.Fatal(err)
		}
		<-streaming
		err := d.Submit(ctx, "again")
		var ue *fsm.UndeclaredError
		if !errors.Is(err, ErrRejected) || !errors.As(err, &ue) || ue.State != fsm.Streaming || ue.Trigger != fsm.Submit {
			t.Errorf("Submit while streaming: %v, want ErrRejected wrapping *fsm.UndeclaredError{Streaming, Submit}", err)
		}
		if errors.Is(err, kernel.ErrEmptyText) || errors.Is(err, kernel.ErrShutdown) || errors.Is(err, kernel.ErrUnknownAgent) {
			t.Errorf("Submit while streaming: %v matches a sentinel it is not", err)
		}

		if err := d.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		for name, input := range map[string]func() error{
			"Submit":    func() error { return d.Submit(ctx, "late") },
			"Interject": func() error { return d.Interject(ctx, "late") },
			"Say":       func() error { return d.Say(ctx, "late") },
		} {
			if err := input(); !errors.Is(err, ErrStopped) || !errors.Is(err, kernel.ErrShutdown) {
				t.Errorf("%s while shutting down: %v, want ErrStopped wrapping kernel.ErrShutdown", name, err)
			}
		}
		if err := d.Cancel(ctx, kernel.Root, 0); !errors.Is(err, ErrStopped) || errors.Is(err, kernel.ErrShutdown) {
			t.Errorf("Cancel while shutting down: %v, want ErrStopped alone (a cancel is not refused by a shutdown)", err)
		}
		close(release)
	})
}

// TestInspectNilIsAnError: Inspect with a nil function is a caller's mistake
// that comes back as an error; it must not panic on the kernel's goroutine,
// which would take the whole process down with the tree.
func TestInspectNilIsAnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newDriver(t, ports.ModelFunc(func(context.Context, ports.Request, ports.Sink) error { return nil }), noTools, newRecorder(), nil)
		stop := start(t, d)
		defer stop()
		if err := d.Inspect(t.Context(), nil); err == nil {
			t.Error("Inspect(nil): nil error")
		}
		var state fsm.State
		if err := d.Inspect(t.Context(), func(k *kernel.Kernel) { state = k.AgentState(kernel.Root) }); err != nil || state != fsm.Idle {
			t.Errorf("Inspect after Inspect(nil): %v, root %s; the driver must run on", err, state)
		}
	})
}
