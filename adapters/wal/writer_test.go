package wal

import (
	"errors"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
)

// submitStep steps a submit on k and returns it as the driver hands it to
// WriteAhead (a submit always needs an fsync).
func submitStep(k *kernel.Kernel, text string) ports.Step {
	ev := kernel.Submit(k.Now(), text)
	target := k.Target(ev)
	before := k.AgentState(target)
	return ports.Step{Kernel: k, Event: ev, Target: target, Before: before, Effects: k.Step(ev)}
}

// TestWriterFailureIsFinal: after an fsync fails, every Record and Close
// returns that failure and writes nothing more: a step recorded after a
// lost one would make a log that replays a history that never happened.
func TestWriterFailureIsFinal(t *testing.T) {
	cfg := kernelConfig()
	k := kernel.MustNew(cfg)
	d := &disk{failSync: 2} // the header's fsync is the first
	w, err := NewWriter(d, trace.HeaderOf(cfg))
	if err != nil {
		t.Fatal(err)
	}
	first := w.Record(submitStep(k, "one"))
	if !errors.Is(first, errDisk) || !strings.Contains(first.Error(), "fsync after step 1") {
		t.Fatalf("Record: %v, want the fsync failure", first)
	}
	written := len(d.bytes())
	if err := w.Record(submitStep(k, "two")); err != first {
		t.Errorf("Record after the failure: %v, want %v", err, first)
	}
	if err := w.Close(k.Now()); err != first {
		t.Errorf("Close after the failure: %v, want %v", err, first)
	}
	if n := len(d.bytes()); n != written || w.Records() != 1 {
		t.Errorf("%d bytes written after the failure, records %d", n-written, w.Records())
	}
}

// TestWriterCloseMarksCleanOnce: Close writes the end line once and fsyncs
// it; the log then reads as clean, and a second Close writes nothing.
func TestWriterCloseMarksCleanOnce(t *testing.T) {
	cfg := kernelConfig()
	k := kernel.MustNew(cfg)
	d := &disk{}
	w, err := NewWriter(d, trace.HeaderOf(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Record(submitStep(k, "one")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(k.Now()); err != nil {
		t.Fatal(err)
	}
	data := d.bytes()
	if synced, _ := d.holds(`{"type":"end",`); !synced {
		t.Errorf("the end line is not synced:\n%s", data)
	}
	if err := w.Close(k.Now()); err != nil || len(d.bytes()) != len(data) {
		t.Errorf("second Close: %v, %d more bytes", err, len(d.bytes())-len(data))
	}
	l, err := Parse("log", data)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Clean || l.Steps() != 1 {
		t.Errorf("clean %v, steps %d; want a clean log of one step", l.Clean, l.Steps())
	}
	if err := w.Record(submitStep(k, "two")); err == nil || !strings.Contains(err.Error(), "record after close") {
		t.Errorf("Record after Close: %v", err)
	}
}

// TestUserInputsAreSynced: every user input — a compact and an approval
// decision among them — is fsynced in its step, as docs/durable.md's sync
// table says, and a plain chunk is not.
func TestUserInputsAreSynced(t *testing.T) {
	w := &Writer{}
	for _, ev := range []kernel.Event{
		kernel.Submit(0, "hi"), kernel.Interject(0, "and"), kernel.Cancel(0, kernel.Root), kernel.Shutdown(0),
		kernel.Recover(0), kernel.Compact(0, ""), kernel.Deny(0, kernel.Root, "c1", "no"),
	} {
		if !w.needsSync(ports.Step{Event: ev}) {
			t.Errorf("%s is not synced", ev.Kind)
		}
	}
	if w.needsSync(ports.Step{Event: kernel.TextDelta(0, 1, 1, "x")}) {
		t.Error("a plain chunk is synced")
	}
}
