package kernel

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/escapement/escapement/fsm"
)

// TestTranscripts runs the kernel's interaction files, testdata/*.txt: each
// is a short story told as commands (the user's inputs, the world's answers,
// the clock) with, under every command, the lines the kernel answered — the
// event as fed, then one Describe line per effect and lifecycle record, in
// the order Step returned them. A kernel change that alters behaviour shows
// up here as a text diff. After an intended change, rewrite the expected
// output and read the diff:
//
//	go test ./kernel -run TestTranscripts -rewrite
//
// The commands are listed in transcriptCommands; the package doc says how
// to read and add a file.
func TestTranscripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		d := newTranscriptDriver(string(src))
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			return d.exec(t, td)
		})
	})
}

// transcriptCommand is one command of the files: its name, its usage (the
// reference doc.go points to) and what runs it.
type transcriptCommand struct {
	name, usage string
	run         func(d *transcriptDriver, dir directive) ([]string, error)
}

// transcriptCommands lists every command. The stream commands (chunk,
// call, end, fail, retry) answer an agent's last request, or op=N.
var transcriptCommands = []transcriptCommand{
	{"config", `config key=value ...  limits by their scenario names (tool_timeout=2s max_parallel_tools=1 ...), system=, child_system=, log_capacity=, idempotent=a,b, ask=a,b (or ask=* for every tool), profiles=[{"name": ...}] (kernel.Profile as JSON), root_profile=; before any event`, (*transcriptDriver).configure},
	{"submit", `submit "text"  the user submits to the root`, (*transcriptDriver).input},
	{"interject", `interject "text"  the user types while the root works`, (*transcriptDriver).input},
	{"cancel", `cancel AGENT [turn=N]  the user cancels an agent, named by path or instance name (main, main/helper, helper)`, (*transcriptDriver).cancel},
	{"shutdown", `shutdown  the host stops`, (*transcriptDriver).input},
	{"compact", `compact ["focus"]  the user asks for the root's history to be compacted now`, (*transcriptDriver).compact},
	{"chunk", `chunk AGENT "text" [chunk=N] [op=N]  a text delta (chunks are numbered 1, 2, ... per request; chunk= sends a given number)`, (*transcriptDriver).chunk},
	{"call", `call AGENT INDEX [id=] [name=] [args=] [chunk=N] [op=N]  a tool-call fragment`, (*transcriptDriver).callFragment},
	{"end", `end AGENT [usage=P/C[/CACHED[/REASONING]]] [reasoning="text"] [field=NAME] [details="json"] [op=N]  the stream ends (with the server's usage, the model's reasoning)`, (*transcriptDriver).end},
	{"fail", `fail AGENT FAILURE ["detail"] [op=N]  the request fails (server, rate_limit, disconnect, stream, bad_response, cancelled, context_length)`, (*transcriptDriver).fail},
	{"retry", `retry AGENT attempt=N after=D ["cause"] [op=N]  the adapter retries the request`, (*transcriptDriver).retry},
	{"result", `result CALL_ID STATUS ["text"]  the tool running call CALL_ID answers (ok, error, cancelled)`, (*transcriptDriver).result},
	{"approve", `approve AGENT CALL_ID [digest=HEX] [for=args|tool]  a person approves the call (digest: the one its request showed); for= grants the tool for the session, with these arguments or any`, (*transcriptDriver).approve},
	{"deny", `deny AGENT CALL_ID ["note"] [digest=HEX]  a person denies the call; the note reaches the model`, (*transcriptDriver).deny},
	{"timer", `timer OP  timer OP fires now, due or not (to show stale and refused events)`, (*transcriptDriver).timer},
	{"advance", `advance D  the clock moves D; every timer due on the way fires, in (deadline, op) order`, (*transcriptDriver).advance},
	{"recover", `recover  the host crashes: a fresh kernel replays every event so far, then steps Recover`, (*transcriptDriver).recover},
	{"state", `state  every agent's state, the live timers, the calls waiting for approval, quiescence`, (*transcriptDriver).state},
	{"history", `history AGENT  the agent's chat history as the model reads it, with the kernel's flags`, (*transcriptDriver).history},
	{"sent", `sent AGENT  the messages of the agent's last request (a compaction's summarising request too), with their estimate`, (*transcriptDriver).sent},
	{"log", `log from=N  what a subscriber starting at sequence N reads from the lifecycle log`, (*transcriptDriver).replayLog},
}

// transcriptDriver plays the world around one kernel: it keeps the virtual
// clock, the timers the kernel armed, and which op answers for which agent
// and call, so a file names agents and call ids, never op numbers.
type transcriptDriver struct {
	lines  []string // the file, to read directives exactly as written
	cfg    Config
	k      *Kernel // nil until the first event
	now    time.Duration
	timers map[OpID]Effect  // live timers: the EffSetTimer that armed each
	reqs   map[AgentID]OpID // each agent's last request
	chunks map[OpID]uint32  // the last chunk number sent per request
	calls  map[string]OpID  // the tool op of each call id (its last start)
	// digests holds the digest each approval request showed, by agent and
	// call id, so a decision echoes it as a host would.
	digests map[approvalKey]string
	// started is each agent's last EffStartLLM (its messages copied).
	started map[AgentID]Effect
	run     transcriptRun
}

func newTranscriptDriver(src string) *transcriptDriver {
	return &transcriptDriver{
		lines:   strings.Split(src, "\n"),
		cfg:     Config{Limits: DefaultLimits()},
		timers:  map[OpID]Effect{},
		reqs:    map[AgentID]OpID{},
		chunks:  map[OpID]uint32{},
		calls:   map[string]OpID{},
		digests: map[approvalKey]string{},
		started: map[AgentID]Effect{},
		run:     transcriptRun{header: headerOf(src)},
	}
}

// exec runs one directive and returns its output; a directive it cannot
// run fails the test, naming the file and line.
func (d *transcriptDriver) exec(t testing.TB, td *datadriven.TestData) string {
	t.Helper()
	line, err := d.line(td.Pos)
	if err != nil {
		t.Fatalf("%s: %v", td.Pos, err)
	}
	out, err := d.run1(line)
	if err != nil {
		t.Fatalf("%s: %s: %v", td.Pos, line, err)
	}
	return strings.Join(out, "\n")
}

// run1 parses and runs one directive line.
func (d *transcriptDriver) run1(line string) ([]string, error) {
	dir, err := parseDirective(line)
	if err != nil {
		return nil, err
	}
	return d.do(dir)
}

// line is the directive at pos ("file:line") as written in the file.
func (d *transcriptDriver) line(pos string) (string, error) {
	i := strings.LastIndexByte(pos, ':')
	n, err := strconv.Atoi(pos[i+1:])
	if i < 0 || err != nil || n < 1 || n > len(d.lines) {
		return "", fmt.Errorf("cannot find the directive's line")
	}
	line := strings.TrimRight(d.lines[n-1], "\r")
	if strings.HasSuffix(line, `\`) {
		return "", fmt.Errorf("a directive is one line (no \\ continuation)")
	}
	return line, nil
}

// do runs one directive.
func (d *transcriptDriver) do(dir directive) ([]string, error) {
	for _, c := range transcriptCommands {
		if c.name == dir.cmd {
			return c.run(d, dir)
		}
	}
	usage := make([]string, len(transcriptCommands))
	for i, c := range transcriptCommands {
		usage[i] = "  " + c.usage
	}
	return nil, fmt.Errorf("unknown command %q; the commands are:\n%s", dir.cmd, strings.Join(usage, "\n"))
}

// input is one of the user's inputs to the root: submit, interject,
// shutdown.
func (d *transcriptDriver) input(dir directive) ([]string, error) {
	if dir.cmd == "shutdown" {
		if err := dir.want(0, 0); err != nil {
			return nil, err
		}
		return d.step(Shutdown(0), "")
	}
	if err := dir.want(1, 1); err != nil {
		return nil, err
	}
	if dir.cmd == "submit" {
		return d.step(Submit(0, dir.arg(0)), "")
	}
	return d.step(Interject(0, dir.arg(0)), "")
}

// kernel is the kernel, built from the configuration on first use.
func (d *transcriptDriver) kernel() *Kernel {
	if d.k == nil {
		d.k = MustNew(d.cfg)
		d.run.ask = d.cfg.Ask
	}
	return d.k
}

// agent resolves an agent's path or instance name.
func (d *transcriptDriver) agent(name string) (AgentID, error) {
	if name == "" {
		return NoAgent, fmt.Errorf("name an agent (main, main/helper, ...)")
	}
	if id, ok := d.kernel().Find(name); ok {
		return id, nil
	}
	return NoAgent, fmt.Errorf("no agent %q in the tree", name)
}

// step feeds ev at the current time and renders what happened.
func (d *transcriptDriver) step(ev Event, note string) ([]string, error) {
	k := d.kernel()
	ev.At = d.now
	s := transcriptStep{ev: ev, target: k.Target(ev)}
	for id := range k.NumAgents() {
		v := k.Agent(AgentID(id))
		s.before = append(s.before, agentBefore{state: v.State(), turn: v.Turn()})
	}
	s.effs = slices.Clone(k.Step(ev))
	for _, e := range s.effs {
		d.track(e)
	}
	if err := d.checkStep(s.effs); err != nil {
		return nil, fmt.Errorf("after %s: %w", ev.Describe(), err)
	}
	d.run.steps = append(d.run.steps, s)
	d.run.final = k
	for id := range k.NumAgents() {
		if id == len(d.run.held) {
			d.run.held = append(d.run.held, AgentView{})
		}
		if v := k.Agent(AgentID(id)); !v.Freed() {
			d.run.held[id] = v
		}
	}
	out := []string{"> " + ev.Describe() + note}
	return append(out, describeAll(s.effs)...), nil
}

// track keeps the driver's view of the world in step with an effect.
func (d *transcriptDriver) track(e Effect) {
	switch e.Kind {
	case EffStartLLM:
		d.reqs[e.Agent] = e.Op
		e.Messages = slices.Clone(e.Messages)
		d.started[e.Agent] = e
	case EffStartTool:
		d.calls[e.Call.ID] = e.Op
	case EffSetTimer:
		d.timers[e.Op] = e
	case EffStopTimer:
		delete(d.timers, e.Op)
	case EffEmit:
		if l := e.Life; l.Kind == LifeApprovalRequested {
			d.digests[approvalKey{l.Agent, l.CallID}] = l.Digest
		}
	}
}

// checkStep holds every step to what every history must be (I4, I12), so
// no file can record a kernel that breaks them.
func (d *transcriptDriver) checkStep(effs []Effect) error {
	k := d.k
	for id := range k.NumAgents() {
		v := k.Agent(AgentID(id))
		open := v.State() == fsm.Tooling || v.State() == fsm.Delegating
		if err := ValidateTranscript(v.History(), open); err != nil {
			return fmt.Errorf("%s history: %w", v.Path(), err)
		}
		for _, m := range v.History() {
			for _, ui := range UIStrings() {
				if strings.Contains(m.Content, ui) {
					return fmt.Errorf("UI text %q in %s's history (F5)", ui, v.Path())
				}
			}
		}
	}
	for _, e := range effs {
		if e.Kind == EffStartLLM {
			if err := ValidateTranscript(e.Messages, false); err != nil {
				return fmt.Errorf("request %d sends an invalid transcript: %w", e.Op, err)
			}
		}
	}
	return nil
}

// describeAll renders effects one per line: a lifecycle record as its own
// Describe (it names its agent), any other effect as the effect's.
func describeAll(effs []Effect) []string {
	out := make([]string, 0, len(effs))
	for _, e := range effs {
		if e.Kind == EffEmit {
			out = append(out, e.Life.Describe())
		} else {
			out = append(out, e.Describe())
		}
	}
	return out
}

// transcriptFiles lists testdata/*.txt, sorted.
func transcriptFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no transcript files in testdata/")
	}
	return files
}

// transcriptRun is what one file did.
type transcriptRun struct {
	name       string
	header     []string // the file's leading comment lines
	steps      []transcriptStep
	final      *Kernel  // the kernel after the last step (a recover replaces it)
	logReplays int      // log commands that replayed records emitted by earlier steps
	ask        []string // the tools whose calls ask for approval (Config.Ask)
	// held is each agent's view after the last step that held it: a
	// finished child is freed, and its view while held is the record
	// of it (docs/semantics.md, "Finished agents").
	held []AgentView
}

// agent is id's view after the last step, or, for an agent the tree has
// freed, after the last step that held it.
func (r *transcriptRun) agent(id AgentID) AgentView {
	if v := r.final.Agent(id); !v.Freed() || int(id) >= len(r.held) {
		return v
	}
	return r.held[id]
}

// transcriptStep is one Step: the event, its target, every agent's state
// and turn before it, and the effects it returned.
type transcriptStep struct {
	ev     Event
	target AgentID
	before []agentBefore
	effs   []Effect
}

type agentBefore struct {
	state fsm.State
	turn  uint64
}

// beforeOf is agent id's state and turn before the step (an agent spawned
// in it was Idle at turn 0).
func (s transcriptStep) beforeOf(id AgentID) agentBefore {
	if id >= 0 && int(id) < len(s.before) {
		return s.before[id]
	}
	return agentBefore{}
}

// headerOf returns the comment block a file starts with.
func headerOf(src string) []string {
	var h []string
	for _, line := range strings.Split(src, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "#") {
			break
		}
		h = append(h, line)
	}
	return h
}
