package kernel_test

import (
	"errors"
	"testing"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// refusal steps ev and returns the Err of the one EffError it must produce.
func refusal(t *testing.T, k *kernel.Kernel, ev kernel.Event) error {
	t.Helper()
	var errs []error
	for _, e := range k.Step(ev) {
		if e.Kind == kernel.EffError {
			if e.Err == nil || e.Err.Error() != e.Detail {
				t.Fatalf("%s: EffError with Err %v, Detail %q: Err must be set and read as Detail", ev.Kind, e.Err, e.Detail)
			}
			errs = append(errs, e.Err)
		}
	}
	if len(errs) != 1 {
		t.Fatalf("%s: %d EffErrors, want 1", ev.Kind, len(errs))
	}
	return errs[0]
}

// TestRefusalsMatchSentinels: the sentinels the package documents are what
// an error effect's Err wraps, so a host matches them with errors.Is rather
// than by the text of Detail.
func TestRefusalsMatchSentinels(t *testing.T) {
	k := kernel.MustNew(kernel.Config{Limits: kernel.DefaultLimits()})
	for _, tc := range []struct {
		ev   kernel.Event
		want error
	}{
		{kernel.Submit(0, ""), kernel.ErrEmptyText},
		{kernel.Interject(0, ""), kernel.ErrEmptyText},
		{kernel.Cancel(0, 42), kernel.ErrUnknownAgent},
		{kernel.CancelTurn(0, -7, 1), kernel.ErrUnknownAgent},
	} {
		if err := refusal(t, k, tc.ev); !errors.Is(err, tc.want) {
			t.Errorf("%s: Err %q does not match %q", tc.ev.Kind, err, tc.want)
		}
	}

	k.Step(kernel.Shutdown(0))
	for _, ev := range []kernel.Event{kernel.Submit(0, "late"), kernel.Interject(0, "late")} {
		if err := refusal(t, k, ev); !errors.Is(err, kernel.ErrShutdown) {
			t.Errorf("%s after shutdown: Err %q does not match ErrShutdown", ev.Kind, err)
		}
	}
}

// TestUndeclaredRefusalIsTyped: a refusal by the state machine (a submit
// while the root streams) is a *fsm.UndeclaredError naming the pair.
func TestUndeclaredRefusalIsTyped(t *testing.T) {
	k := kernel.MustNew(kernel.Config{Limits: kernel.DefaultLimits()})
	k.Step(kernel.Submit(0, "hello"))
	err := refusal(t, k, kernel.Submit(0, "again"))
	var ue *fsm.UndeclaredError
	if !errors.As(err, &ue) || ue.State != fsm.Streaming || ue.Trigger != fsm.Submit {
		t.Fatalf("submit while streaming: Err %v (%T), want *fsm.UndeclaredError{Streaming, Submit}", err, err)
	}
	if errors.Is(err, kernel.ErrEmptyText) || errors.Is(err, kernel.ErrShutdown) {
		t.Fatalf("undeclared refusal %q matches a bad-input sentinel", err)
	}
}
