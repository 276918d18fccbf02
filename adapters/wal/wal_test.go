package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
)

// diskRun runs a driver whose log goes to a fake disk.
func diskRun(t *testing.T, dk *disk, cfg kernel.Config, m ports.Model, tl ports.Tools) (*live.Driver, *Writer, chan kernel.Lifecycle, chan error) {
	t.Helper()
	w, err := NewWriter(dk, trace.HeaderOf(cfg))
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan kernel.Lifecycle, 16)
	d, err := live.New(live.Config{Kernel: cfg, Model: m, Tools: tl, WriteAhead: w.Record, Observer: observeEnds(ended)})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { errc <- d.Run(ctx) }()
	return d, w, ended, errc
}

// readShellThenAnswer: the first request asks for the tools named, the
// second answers.
func callsThenAnswer(names ...string) func(string, int, ports.Request) reply {
	return func(_ string, n int, _ ports.Request) reply {
		if n > 1 {
			return reply{text: []string{"all ", "done"}}
		}
		var calls []kernel.CallDelta
		for i, name := range names {
			calls = append(calls, kernel.CallDelta{Index: i, ID: fmt.Sprintf("c%d", i+1), Name: name, Args: `{"x":1}`})
		}
		return reply{text: []string{"looking"}, calls: calls}
	}
}

// TestWriteAheadOrderAndSyncPolicy: every event is one record written with
// one write before anything it caused happens — the model sees a request
// only once the record that started it is fsynced, a shell call runs only
// once its start is fsynced, and an idempotent tool's start is written but
// needs no fsync; chunks are not synced one by one; a root turn end is.
func TestWriteAheadOrderAndSyncPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dk := &disk{}
		var problems []string
		m := newModel(func(path string, n int, req ports.Request) reply {
			if synced, _ := dk.holds(fmt.Sprintf(`{"kind":"start_llm","agent":0,"op":%d}`, req.Op)); !synced {
				problems = append(problems, fmt.Sprintf("request %d streamed before its start was fsynced", req.Op))
			}
			if n == 1 {
				return callsThenAnswer("read_file")(path, n, req)
			}
			if n == 2 {
				return callsThenAnswer("shell")(path, 1, req)
			}
			return reply{text: []string{"done"}}
		})
		tl := newTools()
		tl.check = func(c ports.Call) {
			synced, written := dk.holds(fmt.Sprintf(`{"kind":"start_tool","agent":0,"op":%d,`, c.Op))
			if !written || (c.Name == "shell" && !synced) {
				problems = append(problems, fmt.Sprintf("%s ran with its start written=%v synced=%v", c.Name, written, synced))
			}
		}
		d, w, ended, errc := diskRun(t, dk, kernelConfig(), m, tl)
		if err := d.Submit(t.Context(), "go"); err != nil {
			t.Fatal(err)
		}
		if end := <-ended; end.Outcome != kernel.OutcomeCompleted {
			t.Fatalf("outcome %s", end.Outcome)
		}
		synctest.Wait() // the turn end's record is synced before its effects run; the observer runs after
		if problems != nil {
			t.Fatal(strings.Join(problems, "\n"))
		}
		// One write per record: the header, then one step line each.
		for i, wr := range dk.writes {
			if strings.Count(wr, "\n") != 1 || !strings.HasSuffix(wr, "\n") {
				t.Fatalf("write %d is not one line: %q", i+1, wr)
			}
		}
		if len(dk.writes) != 1+w.Records() {
			t.Fatalf("%d writes for %d records and the header", len(dk.writes), w.Records())
		}
		// Which records were synced: by the kind of step.
		syncedAfter := map[int]bool{}
		for _, n := range dk.syncsAt {
			syncedAfter[n] = true
		}
		var got []string
		for i, wr := range dk.writes[1:] {
			if syncedAfter[i+2] {
				got = append(got, stepKind(wr))
			}
		}
		want := "submit(start_llm) tool_result(start_llm) llm_end(start_tool shell) tool_result(start_llm) llm_end(turn_ended)"
		if g := strings.Join(got, " "); g != want {
			t.Errorf("synced after:\n got %s\nwant %s", g, want)
		}
		cancelRun(t, d, errc)
	})
}

// stepKind summarises a step line for TestWriteAheadOrderAndSyncPolicy: its
// event and why it was synced.
func stepKind(line string) string {
	ev, _ := trace.StepEvent([]byte(strings.TrimSuffix(line, "\n")))
	why := ""
	switch {
	case strings.Contains(line, `"kind":"turn_ended","agent":0`):
		why = "turn_ended"
	case strings.Contains(line, `"start_llm"`):
		why = "start_llm"
	case strings.Contains(line, `"start_tool"`):
		_, rest, _ := strings.Cut(line, `"start_tool"`)
		_, rest, _ = strings.Cut(rest, `"name":"`)
		name, _, _ := strings.Cut(rest, `"`)
		why = "start_tool " + name
	}
	return ev.Kind.String() + "(" + why + ")"
}

func cancelRun(t *testing.T, d *live.Driver, errc chan error) {
	t.Helper()
	if err := d.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestDiskFailureStopsTheRun: when the record that would start a shell
// call cannot be written (or fsynced), the shell never runs, no request
// follows, and Run fails loudly with ErrWriteAhead and the cause; every op
// goroutine is gone (goleak) and inputs are refused.
func TestDiskFailureStopsTheRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		dk   *disk
	}{
		// Writes: 1 header, 2 submit, 3 text chunk, 4 call fragment, 5 llm_end
		// (starts the shell).
		{"write", &disk{failWrite: 5}},
		// Syncs: 1 header, 2 submit, 3 llm_end (starts the shell).
		{"fsync", &disk{failSync: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newModel(callsThenAnswer("shell"))
				tl := newTools()
				d, _, _, errc := diskRun(t, tc.dk, kernelConfig(), m, tl)
				if err := d.Submit(t.Context(), "go"); err != nil {
					t.Fatal(err)
				}
				err := <-errc
				if !errors.Is(err, live.ErrWriteAhead) || !errors.Is(err, errDisk) {
					t.Fatalf("Run returned %v, want ErrWriteAhead wrapping the disk's error", err)
				}
				if n := tl.count("shell"); n != 0 {
					t.Fatalf("the shell ran %d times after its record failed", n)
				}
				if n := len(m.requests()); n != 1 {
					t.Fatalf("%d requests", n)
				}
				if err := d.Submit(t.Context(), "again"); !errors.Is(err, live.ErrStopped) {
					t.Fatalf("input after the failure: %v", err)
				}
				if a := d.Abandoned(); len(a) != 0 {
					t.Fatalf("left running: %v", a)
				}
			})
		})
	}
}

// TestTornRecordNeverActed: a crash that tears the write of the record that
// starts a shell call leaves half a line; the shell never ran (the write
// comes first). Read drops the torn line, the rebuilt kernel is where the
// last whole record left it (the request still streaming), and after the
// recovery the model asks again and the shell runs — once in all.
func TestTornRecordNeverActed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dk := &disk{failWrite: 5, tear: true} // the llm_end that starts the shell
		m := newModel(callsThenAnswer("shell"))
		tl := newTools()
		d, _, _, errc := diskRun(t, dk, kernelConfig(), m, tl)
		if err := d.Submit(t.Context(), "go"); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; !errors.Is(err, errDisk) {
			t.Fatalf("Run: %v", err)
		}
		if tl.count("shell") != 0 {
			t.Fatal("the shell ran although its record was torn")
		}
		path := logPath(t)
		if err := os.WriteFile(path, dk.bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := Read(path)
		if err != nil {
			t.Fatal(err)
		}
		if l.Torn == 0 || l.Steps() != 3 || l.Clean {
			t.Fatalf("torn=%d steps=%d clean=%v, want a torn fourth record dropped", l.Torn, l.Steps(), l.Clean)
		}
		k, err := l.Rebuild(nil)
		if err != nil {
			t.Fatal(err)
		}
		if st := k.Agent(kernel.Root).State().String(); st != "Streaming" {
			t.Fatalf("rebuilt root is %s", st)
		}
		m2 := newModel(callsThenAnswer("shell"))
		r, _ := resumeRun(t, path, m2, tl)
		if end := <-r.ended; end.Outcome != kernel.OutcomeCompleted {
			t.Fatalf("outcome %s", end.Outcome)
		}
		r.stop(t)
		if n := tl.count("shell"); n != 1 {
			t.Fatalf("the shell ran %d times, want once", n)
		}
		// The file was cut where the torn bytes began and then appended to.
		if _, err := Read(path); err != nil {
			t.Fatalf("the resumed log: %v", err)
		}
	})
}

// recordedLog runs a short turn to a log file and returns its bytes.
func recordedLog(t *testing.T) []byte {
	t.Helper()
	var data []byte
	synctest.Test(t, func(t *testing.T) {
		path := logPath(t)
		r := startRun(t, path, kernelConfig(), newModel(callsThenAnswer("read_file")), newTools())
		if err := r.d.Submit(t.Context(), "go"); err != nil {
			t.Fatal(err)
		}
		<-r.ended
		// Crash: no end line.
		var err error
		if data, err = os.ReadFile(r.crash(t, path)); err != nil {
			t.Fatal(err)
		}
	})
	return data
}

// TestRebuildChecksEveryStep: the rebuilt kernel reproduces every logged
// step; a log whose record differs from what the kernel does (one lifecycle
// field changed, or a different configuration in the header) is refused
// with the step and line named.
func TestRebuildChecksEveryStep(t *testing.T) {
	data := recordedLog(t)
	l, err := Parse("log", data)
	if err != nil {
		t.Fatal(err)
	}
	var seen []kernel.EventKind
	if _, err := l.Rebuild(func(s ports.Step) { seen = append(seen, s.Event.Kind) }); err != nil {
		t.Fatal(err)
	}
	if len(seen) != l.Steps() || seen[0] != kernel.EvSubmit {
		t.Fatalf("the observer saw %v of %d steps", seen, l.Steps())
	}
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	changed := bytes.Replace(lines[4], []byte(`"seq":`), []byte(`"seq":9`), 1)
	for _, tc := range []struct {
		name    string
		data    []byte
		step    int
		wantErr string
	}{
		{"effect", join(lines[:4], changed, lines[5:]), 4, "log:5: step 4: the rebuilt kernel's step differs"},
		{"config", bytes.Replace(data, []byte(`"max_requests":10`), []byte(`"max_requests":1`), 1), 0, "differs"},
	} {
		l, err := Parse("log", tc.data)
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.Rebuild(nil)
		var me *MismatchError
		if !errors.As(err, &me) || !strings.Contains(err.Error(), tc.wantErr) || (tc.step != 0 && me.Step != tc.step) {
			t.Fatalf("%s: got %v", tc.name, err)
		}
	}
}

func join(a [][]byte, b []byte, c [][]byte) []byte {
	all := append(append(append([][]byte(nil), a...), b), c...)
	return append(bytes.Join(all, []byte("\n")), '\n')
}

// textCut is a delta record up to its "text": key, then tail.
func textCut(line []byte, tail string) []byte {
	key := []byte(`"text":`)
	i := bytes.Index(line, key)
	return append(bytes.Clone(line[:i+len(key)]), tail...)
}

// TestParseRefusesDamage: damage other than a torn last line is an error
// naming the line; a clean log is not resumed.
func TestParseRefusesDamage(t *testing.T) {
	data := recordedLog(t)
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	end := []byte(`{"type":"end","step":9,"at":"1s"}`)
	for _, tc := range []struct {
		name, want string
		data       []byte
	}{
		{"empty", "no header line", nil},
		{"torn header", "no header line", lines[0][:20]},
		{"garbage", "log:3: not a header, step", join(lines[:2], []byte("garbage"), lines[2:])},
		{"after end", "log:4: a record after the end line", join(lines[:2], end, lines[2:])},
		{"bad event", "log:5: step record: event", join(lines[:4], bytes.Replace(lines[4], []byte(`"kind":"`), []byte(`"kind":"x`), 1), lines[5:])},
		// A delta record (lines[2], a plain chunk) damaged: unreadable, no
		// op, or one the replay does not reproduce (another op's chunk).
		{"bad delta", "log:3: delta record", join(lines[:2], bytes.Replace(lines[2], []byte(`"op":2`), []byte(`"op":"2"`), 1), lines[3:])},
		{"delta without op", "log:3: delta record without its time or op", join(lines[:2], bytes.Replace(lines[2], []byte(`,"op":2`), nil, 1), lines[3:])},
		// A delta record cut right after its text key, or with only a
		// closing brace after it: damaged, not read past its end.
		{"delta cut after its text key", "log:3: delta record", join(lines[:2], textCut(lines[2], ""), lines[3:])},
		{"delta with a brace for its text", "log:3: delta record", join(lines[:2], textCut(lines[2], "}"), lines[3:])},
		{"delta of another op", "log:3: step 2: the rebuilt kernel's step differs", join(lines[:2], bytes.Replace(lines[2], []byte(`"op":2`), []byte(`"op":3`), 1), lines[3:])},
		{"blank last line", fmt.Sprintf("log:%d: not a header, step", len(lines)+1), append(bytes.Clone(data), '\n')},
	} {
		l, err := Parse("log", tc.data)
		if err == nil {
			_, err = l.Rebuild(nil)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
	path := logPath(t)
	if err := os.WriteFile(path, append(data, append(end, '\n')...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Reopen(path, nil); !errors.Is(err, ErrClean) {
		t.Fatalf("resume of a clean log: %v", err)
	}
	// Log.Reopen, given a clean log rebuilt by hand, refuses it too.
	_, l, err := Rebuilt(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Reopen(nil); !errors.Is(err, ErrClean) {
		t.Fatalf("Log.Reopen of a clean log: %v", err)
	}
	// A clean log is ErrClean before any replay, even one whose steps
	// would not replay: there is nothing to resume.
	damaged := join(lines[:2], bytes.Replace(lines[2], []byte(`"kind":"`), []byte(`"kind":"x`), 1), append(lines[3:], end))
	if err := os.WriteFile(path, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Reopen(path, nil); !errors.Is(err, ErrClean) {
		t.Fatalf("resume of a clean log with a step that does not replay: %v", err)
	}
}

// TestTornBytesCounted: Parse drops a last line without its newline and
// says how many bytes it dropped; Size is what is left.
func TestTornBytesCounted(t *testing.T) {
	data := recordedLog(t)
	whole, err := Parse("log", data)
	if err != nil {
		t.Fatal(err)
	}
	torn := `{"type":"step","st`
	l, err := Parse("log", append(bytes.Clone(data), torn...))
	if err != nil {
		t.Fatal(err)
	}
	if l.Torn != len(torn) || l.Size != int64(len(data)) || l.Steps() != whole.Steps() || whole.Torn != 0 {
		t.Errorf("torn %d, size %d, steps %d (whole: torn %d, steps %d); want torn %d, size %d", l.Torn, l.Size, l.Steps(), whole.Torn, whole.Steps(), len(torn), len(data))
	}
}

// TestLastAt: the clock of a resumed run goes on from the last record.
func TestLastAt(t *testing.T) {
	l, err := Parse("log", recordedLog(t))
	if err != nil {
		t.Fatal(err)
	}
	at, err := l.LastAt()
	k, _ := l.Rebuild(nil)
	if err != nil || at != k.Now() || at < time.Second {
		t.Fatalf("last at %v (%v), kernel now %v", at, err, k.Now())
	}
}

// redactingMem is a log file in memory whose records pass a redactor, as a
// host writes its log (each record one Write).
type redactingMem struct {
	memFile
	redact func(string) string
}

func (r *redactingMem) Write(p []byte) (int, error) {
	if _, err := r.memFile.WriteString(r.redact(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// TestRebuildComparesRedacted: a secret the kernel put together from
// events that each hold only a piece of it (two chunks of an answer, joined
// in the turn's end) is redacted in the effects of the step that joined it
// while its events stay whole; the rebuild, told the redactor, compares
// that step redacted as it was logged, and without it reports the step.
func TestRebuildComparesRedacted(t *testing.T) {
	const secret = "abcdefgh1234"
	red := func(s string) string { return strings.ReplaceAll(s, secret, "[redacted]") }
	cfg := kernelConfig()
	k := kernel.MustNew(cfg)
	f := &redactingMem{redact: red}
	w, err := NewWriter(f, trace.HeaderOf(cfg))
	if err != nil {
		t.Fatal(err)
	}
	var req kernel.OpID
	at := time.Duration(0)
	feed := func(ev kernel.Event) {
		at += time.Millisecond
		ev.At = at
		target := k.Target(ev)
		before := k.AgentState(target)
		effs := k.Step(ev)
		for _, e := range effs {
			if e.Kind == kernel.EffStartLLM {
				req = e.Op
			}
		}
		if err := w.Record(ports.Step{Kernel: k, Event: ev, Target: target, Before: before, Effects: effs}); err != nil {
			t.Fatal(err)
		}
	}
	feed(kernel.Submit(0, "go"))
	feed(kernel.TextDelta(0, req, 1, "abcdefgh"))
	feed(kernel.TextDelta(0, req, 2, "12345678"))
	feed(kernel.LLMEnd(0, req))
	if !strings.Contains(f.String(), "[redacted]5678") {
		t.Fatalf("the turn's end was not redacted:\n%s", f.String())
	}
	l, err := Parse("log", f.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	var me *MismatchError
	if _, err := l.Rebuild(nil); !errors.As(err, &me) || me.Step != 4 {
		t.Fatalf("without the redactor: %v, want a mismatch at step 4", err)
	}
	l.Redact = red
	if _, err := l.Rebuild(nil); err != nil {
		t.Fatalf("with the redactor: %v", err)
	}
}
