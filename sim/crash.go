package sim

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/internal/keys"
	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
	"github.com/escapement/escapement/sim/oracle"
)

// hostLog is the simulated host's write-ahead log (docs/durable.md): the
// trace line of every step it delivered, in order — what adapters/wal
// writes for a live host. A crash rebuilds a fresh core from the events
// decoded from those lines, as wal.Rebuild does, and holds it to the
// lines (Sim.rebuild).
type hostLog struct {
	// lines holds the step lines back to back; ends[i] is where line i
	// ends (one arena, not a slice per line: a long run logs many steps).
	lines []byte
	ends  []int
	tw    *trace.Writer
	out   trace.LastLine
}

func newHostLog() *hostLog {
	h := &hostLog{}
	h.tw = trace.ContinueWriter(&h.out, 0)
	return h
}

// record logs the line of one step (the event as the core was fed it and
// what it did).
func (h *hostLog) record(tree trace.Tree, ev kernel.Event, target kernel.AgentID, before fsm.State, effs []kernel.Effect) {
	h.tw.Step(tree, ev, target, before, effs)
	_ = h.tw.Flush() // LastLine.Write never fails
	h.lines = append(h.lines, h.out.B...)
	h.ends = append(h.ends, len(h.lines))
}

func (h *hostLog) line(i int) []byte {
	start := 0
	if i > 0 {
		start = h.ends[i-1]
	}
	return h.lines[start:h.ends[i]]
}

// crashDue crashes the host when Options.CrashAt says so: after the k-th
// delivered event (the recovery's own step counts, so a crash point right
// after one crashes the host again as soon as it has recovered).
func (m *Sim) crashDue() {
	for m.crashes < len(m.opt.CrashAt) && m.res.Events >= m.opt.CrashAt[m.crashes] {
		m.crashes++
		m.Recover()
	}
}

// rebuild is the restart of a crashed host (docs/durable.md, "Recovery"):
// the crashed core is dropped, and a fresh one, built as the first was, is
// fed every event the host logged. Each replayed step must write exactly
// the line that was logged for it, and the rebuilt tree must be the one
// the crashed core held — every agent's view, the lifecycle log a late
// subscriber reads, quiescence (I24). A host whose core does not rebuild
// would refuse to resume (wal.Rebuild's MismatchError); the simulation
// reports the violation and goes on with the crashed core, so nothing
// after it is blamed on the rebuild.
func (m *Sim) rebuild() {
	logged := len(m.log.ends)
	m.o.SetClock(m.now) // a violation is located at the crash
	m.note(m.now, "crash: the host is rebuilt from its "+strconv.Itoa(logged)+" logged step(s)")
	fresh, err := m.factory(m.cfg)
	if err != nil {
		m.o.Violate(oracle.RebuildsExactly, kernel.NoAgent, "the restarted host cannot build its core: %v", err)
		return
	}
	var out trace.LastLine
	tw := trace.ContinueWriter(&out, 0)
	for i := range logged {
		want := m.log.line(i)
		ev, err := trace.StepEvent(bytes.TrimSuffix(want, []byte("\n")))
		if err != nil {
			m.o.Violate(oracle.RebuildsExactly, kernel.NoAgent, "logged step %d cannot be read back: %v", i+1, err)
			return
		}
		target := fresh.Target(ev)
		before := fresh.AgentState(target)
		tw.Step(fresh, ev, target, before, fresh.Step(ev))
		_ = tw.Flush() // LastLine.Write never fails
		if !bytes.Equal(out.B, want) {
			logged, replayed := around(want, out.B)
			m.o.Violate(oracle.RebuildsExactly, target, "logged step %d replays differently\n  logged:   %s\n  replayed: %s", i+1, logged, replayed)
			return
		}
	}
	if err := sameTree(m.core, fresh); err != nil {
		m.o.Violate(oracle.RebuildsExactly, kernel.NoAgent, "the tree rebuilt from %d logged step(s) is not the crashed one: %v", logged, err)
		return
	}
	m.core = fresh
	m.o.Rebuilt(fresh)
}

// around quotes two lines where they first differ.
func around(a, b []byte) (string, string) {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(0, i-80)
	quote := func(l []byte) string {
		s := strings.TrimSpace(string(l[min(from, len(l)):]))
		if from > 0 {
			s = "…" + s
		}
		return textcut.Clip(s, 240)
	}
	return quote(a), quote(b)
}

// sameTree compares what a driver can read of two cores: every agent's
// view, quiescence, name lookups and the lifecycle log.
func sameTree(was, now Core) error {
	if was.NumAgents() != now.NumAgents() {
		return fmt.Errorf("%d agents, the crashed host had %d", now.NumAgents(), was.NumAgents())
	}
	for id := 0; id < was.NumAgents(); id++ {
		a, b := was.View(kernel.AgentID(id)), now.View(kernel.AgentID(id))
		if !reflect.DeepEqual(a, b) {
			return fmt.Errorf("agent %s: view %s, the crashed host's %s", a.Path, viewDiff(b, a), viewDiff(a, b))
		}
		if _, ok := now.Find(a.Path); !ok && !a.Freed {
			return fmt.Errorf("agent %s cannot be found by its path", a.Path)
		}
	}
	if was.Quiescent() != now.Quiescent() {
		return fmt.Errorf("quiescent %v, the crashed host's %v", now.Quiescent(), was.Quiescent())
	}
	if was.LogOldest() != now.LogOldest() {
		return fmt.Errorf("the lifecycle log starts at %d, the crashed host's at %d", now.LogOldest(), was.LogOldest())
	}
	var wl, nl []kernel.Lifecycle
	collect := func(c Core, into *[]kernel.Lifecycle) error {
		return c.LogRange(c.LogOldest(), func(l kernel.Lifecycle) bool { *into = append(*into, l); return true })
	}
	if err := errors.Join(collect(was, &wl), collect(now, &nl)); err != nil {
		return fmt.Errorf("read the lifecycle log: %w", err)
	}
	if !reflect.DeepEqual(wl, nl) {
		return fmt.Errorf("the lifecycle log holds %d record(s), the crashed host's %d, and they differ", len(nl), len(wl))
	}
	return nil
}

// viewDiff names the first field of a view that differs from other's.
func viewDiff(v, other oracle.View) string {
	rv, ro := reflect.ValueOf(v), reflect.ValueOf(other)
	for i := 0; i < rv.NumField(); i++ {
		if !reflect.DeepEqual(rv.Field(i).Interface(), ro.Field(i).Interface()) {
			return textcut.Clip(fmt.Sprintf("%s=%+v", rv.Type().Field(i).Name, rv.Field(i).Interface()), 300)
		}
	}
	return "(equal)"
}

// checkCrashAt holds Options.CrashAt to ascending step counts from 1.
func checkCrashAt(at []int) error {
	for i, k := range at {
		if k < 1 || (i > 0 && k < at[i-1]) {
			return fmt.Errorf("crash points %v: each is a step count from 1, in ascending order", at)
		}
	}
	return nil
}

// crashHeader records the crash options in a trace header.
func crashHeader(opt Options, o map[string]string) {
	if opt.Durable {
		o["durable"] = "true"
	}
	if len(opt.CrashAt) > 0 {
		o["crash_at"] = FormatCrashAt(opt.CrashAt)
	}
}

// crashFromHeader reads one crash option of a trace header back.
func crashFromHeader(opt *Options, key, v string) error {
	if key == "durable" {
		opt.Durable = v == "true"
		return nil
	}
	at, err := ParseCrashAt(v)
	opt.CrashAt = at
	return err
}

// FormatCrashAt writes crash points as ParseCrashAt reads them: "5,12".
func FormatCrashAt(at []int) string {
	parts := make([]string, len(at))
	for i, k := range at {
		parts[i] = strconv.Itoa(k)
	}
	return strings.Join(parts, ",")
}

// ParseCrashAt reads comma-separated crash points ("5,12"), ascending step
// counts from 1.
func ParseCrashAt(s string) ([]int, error) {
	var at []int
	for _, p := range strings.Split(s, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("crash point %q: %w", p, err)
		}
		at = append(at, k)
	}
	return at, checkCrashAt(at)
}

// Crash is one crash of the simulated host and how its recovery changed
// the run's story (docs/semantics.md, "Expectations under a crash").
type Crash struct {
	// After is how many events had been delivered when the host crashed.
	After int
	At    time.Duration
	// Changed says, op by op, how the recovery changed the story: what it
	// redid after it had taken time or shown something, what it reported
	// lost, what it ended early. Empty when the recovery only started
	// again, at the instant they had started, ops that had shown nothing —
	// the world then answers them as it would have, and the run goes on as
	// if the host had never crashed.
	Changed []string
}

// shutdownEnds is how a crash after a shutdown changes the story: the
// recovery ends the shutdown, and inputs are accepted again
// (docs/semantics.md, "Recovery").
const shutdownEnds = "the shutdown the crashed host had begun ends with the recovery: later inputs are accepted again"

// keepLost is the first half of a crash's bookkeeping: it keeps what each
// op in flight was getting, for the op a recovery starts in its place
// (startLLM, startTool: a provider asked the same again answers the same,
// docs/semantics.md "Scripts"), and says how losing it changes the story.
// A request not being cancelled is restarted by the recovery; a tool call
// not being cancelled runs again when its tool is idempotent, else it is
// answered tool_lost; an op being cancelled ends at once.
func (w *world) keepLost(now time.Duration, c Core) []string {
	ids := make([]kernel.OpID, 0, len(w.ops))
	for id := range w.ops { // determinism: sorted below
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var changed []string
	for _, id := range ids {
		op := w.ops[id]
		if what := w.lose(now, op); what != "" {
			changed = append(changed, c.AgentPath(op.agent)+": "+what)
		}
	}
	return changed
}

// lose keeps one op for its replacement and says how its loss changes the
// story ("" when it does not).
func (w *world) lose(now time.Duration, op *worldOp) string {
	since := now - op.start
	switch {
	case op.cancelled:
		return fmt.Sprintf("op %d, being cancelled, ends at the crash", op.id)
	case op.tool:
		if !slices.Contains(w.idempotent, op.name) {
			return fmt.Sprintf("tool call %s (%s) was lost: it gets a tool_lost result", op.call, op.name)
		}
		if w.againTool == nil {
			w.againTool = make(map[callKey]*worldOp)
		}
		w.againTool[callKey{op.agent, op.call}] = op
		if since > 0 {
			return fmt.Sprintf("tool call %s (%s) runs again from its start, %v after it first started", op.call, op.name, since)
		}
	default:
		if w.again == nil {
			w.again = make(map[kernel.AgentID]*worldOp)
		}
		w.again[op.agent] = op
		switch {
		case op.next > 0:
			return fmt.Sprintf("request %d is asked again after %d chunk(s) of its reply had arrived", op.id, op.next)
		case op.attempt > 0:
			return fmt.Sprintf("request %d is asked again after its rate-limit retries began", op.id)
		case since > 0:
			return fmt.Sprintf("request %d is asked again %v after it was first asked", op.id, since)
		}
	}
	return ""
}

// recovered is the second half: after the recovery's step, what was kept
// for an op the recovery did not start again is dropped — a restart the
// turn's max_requests refused changes the story too.
func (w *world) recovered(c Core) []string {
	var changed []string
	for _, id := range keys.Sorted(w.again) {
		changed = append(changed, fmt.Sprintf("%s: request %d is not asked again: its turn had spent max_requests", c.AgentPath(id), w.again[id].id))
	}
	clear(w.again)
	clear(w.againTool)
	return changed
}

// meetFaults applies to a starting op the faults that hit the op it
// replaces after a crash (lost; each hits it again, as a fresh op), or
// else the first fault armed for it.
func (w *world) meetFaults(now time.Duration, c Core, op, lost *worldOp, toolName string) {
	if lost != nil {
		for _, fi := range lost.faults {
			w.applyFault(now, op, fi, true)
		}
		return
	}
	if fi := w.takeArmed(c, op.agent, op.tool, toolName); fi >= 0 {
		w.applyFault(now, op, fi, true)
	}
}

// crashJudged sets aside the expectations a run no longer meets after a
// crash that changed its story (Result.CrashChanged): they describe the
// story the crash changed, in a way docs/durable.md allows and the
// invariants judge. A run whose every crash changed nothing is held to
// its expectations as any run.
func crashJudged(res *Result, spent []oracle.SpentTurn, out []oracle.Violation) []oracle.Violation {
	for _, sp := range spent { // the note goes to the last crash before the turn's end
		for i := len(res.Crashes) - 1; i >= 0; i-- {
			if res.Crashes[i].At <= sp.At {
				res.Crashes[i].Changed = append(res.Crashes[i].Changed, sp.Note)
				break
			}
		}
	}
	changed := false
	for _, c := range res.Crashes {
		changed = changed || len(c.Changed) > 0
	}
	if !changed {
		return out
	}
	kept := out[:0]
	for _, v := range out {
		if v.Invariant == oracle.Expectation {
			res.CrashChanged = append(res.CrashChanged, v)
			continue
		}
		kept = append(kept, v)
	}
	return kept
}
