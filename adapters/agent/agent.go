package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/profiles"
	"github.com/escapement/escapement/adapters/session"
	"github.com/escapement/escapement/kernel"
)

// ErrClosed is the error of a turn asked of an agent that is closed or
// whose driver has stopped.
var ErrClosed = errors.New("agent closed")

// ErrBusy is the error of a turn asked while another runs: an agent runs
// one turn at a time (a host that interjects uses the Driver).
var ErrBusy = errors.New("a turn is running")

// ErrStuck is returned by Close when the tree did not stop within its grace
// period and a second (something outside the kernel is blocked): the
// session file is closed and its write-ahead log kept for a resume.
var ErrStuck = errors.New("the agent tree did not stop")

// stopSlack is how much longer than the grace period Close waits for the
// driver: the kernel makes the tree quiescent by the shutdown's time +
// grace (I3), so Run is later only when something outside it is stuck.
const stopSlack = time.Second

// spansBound is how long Close waits for the last spans to be sent.
const spansBound = 5 * time.Second

// Config configures an agent.
type Config struct {
	// Model streams the agent's requests (required): adapters/openai, or a
	// ports.ModelFunc. Every request offers the agent's tools (and the
	// delegate tool) through ports.Request.Tools.
	Model ports.Model
	// Tools run the agent's tool calls; nil for none. A ports.Toolbox
	// (adapters/toolset, adapters/tools, adapters/mcp) has its Specs
	// offered to the model; a bare ports.Tools offers none.
	Tools ports.Tools
	// Limits bound the tree (kernel.Limits); the zero value is
	// kernel.DefaultLimits(). MaxDepth > 0 lets the agent delegate.
	Limits kernel.Limits
	// System is the root agent's system prompt (its profile's when empty
	// and RootProfile names one).
	System string
	// Profiles are the kinds of agent the tree may hold
	// (docs/semantics.md, "Profiles"): each a kernel profile — its
	// system prompt, the tools it may call, the profiles it may delegate
	// to, its budgets — and the model its agents run. With profiles every
	// request offers its agent's profile's tools, and a delegate tool
	// listing the profiles it may name.
	Profiles []Profile
	// RootProfile names the root's profile among Profiles; "" gives the
	// root every tool and every profile.
	RootProfile string
	// Session, when set, is the session file the agent keeps: created
	// when it does not exist (or is empty), resumed when it holds a
	// session — its complete turns are the agent's history, and a turn a
	// killed process left unfinished is continued (Continue). One process
	// at a time keeps a session (session.ErrBusy).
	Session string
	// Notice receives what the session tells its user (what a resume cut
	// off or recovered); nil drops it.
	Notice func(string)
	// Spans, when set, exports the agent's spans — every turn, request,
	// tool call and delegation (docs/otel.md): an adapters/otel.Exporter,
	// which otel.NewFromEnv builds when the standard OTEL_* variables ask
	// for one. The agent owns it: Close sends the last spans and stops it
	// (a failure to send them is told to Notice).
	// With a Session, a run that recovers a killed one ends the spans that
	// one left open.
	Spans session.Spans
	// Ask names the tools whose calls wait for a person's approval
	// (kernel.Config.Ask; "*" for every tool but the delegate tool;
	// docs/semantics.md, "Approvals"): a turn's events then hold
	// LifeApprovalRequested, which Driver().Decide answers. Policy, when
	// set, decides first what the program can decide by itself
	// (live.Config.Policy); with a Session, grants made by "approve for
	// this session" are kept in it.
	Ask    []string
	Policy live.Policy
}

// Agent is a root agent and the tree it grows, running live. Its methods
// are safe for concurrent use; it runs one turn at a time.
type Agent struct {
	driver *live.Driver
	sess   *session.Session // nil without Config.Session
	spans  session.Spans    // Config.Spans without a session (the session owns it with one)
	notice func(string)     // Config.Notice
	grace  time.Duration
	stop   context.CancelFunc
	done   chan struct{} // closed when the driver's Run has returned
	runErr error         // Run's error, once done

	mu        sync.Mutex
	current   *Turn // the running turn, or the last one
	recovered *Turn // a turn a killed process left, until Continue takes it
	closed    bool
}

// New builds the agent and starts its driver (on a goroutine the agent
// owns until Close). With a session, the session is opened (locked) first;
// a turn its last run left unfinished starts again at once (Continue).
func New(cfg Config) (*Agent, error) {
	if isNil(cfg.Model) {
		return nil, errors.New("agent: Config.Model is required")
	}
	kcfg := kernel.Config{Limits: cfg.Limits, System: cfg.System, RootProfile: cfg.RootProfile, Ask: cfg.Ask}
	if kcfg.Limits == (kernel.Limits{}) {
		kcfg.Limits = kernel.DefaultLimits()
	}
	tools, err := offered(cfg.Tools, kcfg.Limits, len(cfg.Profiles) > 0)
	if err != nil {
		return nil, err
	}
	model, err := profiled(cfg, &kcfg, tools.specs)
	if err != nil {
		return nil, err
	}
	a := &Agent{grace: kcfg.Limits.Grace, done: make(chan struct{})}
	if idem, ok := cfg.Tools.(interface{ Idempotent() []string }); ok {
		kcfg.Idempotent = idem.Idempotent()
	}
	if err := a.build(cfg, kcfg, model, tools); err != nil {
		return nil, err
	}
	a.start()
	return a, nil
}

// build makes the driver: a session's, or a plain one.
func (a *Agent) build(cfg Config, kcfg kernel.Config, model ports.Model, tools toolbox) error {
	if cfg.Session == "" {
		return a.buildPlain(cfg, kcfg, model, tools)
	}
	sess, err := openSession(cfg.Session)
	if err != nil {
		stopSpans(cfg.Spans)
		return err
	}
	sess.Seed(&kcfg)
	if err := kcfg.Validate(); err != nil {
		sess.Release()
		stopSpans(cfg.Spans)
		return fmt.Errorf("%s: %w", cfg.Session, err)
	}
	scfg := session.Config{Kernel: kcfg, Model: model, Tools: tools, Observer: a.observe, Spans: cfg.Spans, Notice: cfg.Notice, Policy: cfg.Policy}
	if err := sess.Start(scfg); err != nil {
		sess.Release()
		return err
	}
	a.sess, a.driver = sess, sess.Driver()
	if u, ok := sess.Unfinished(); ok {
		a.recovered = &Turn{a: a, number: u.Turn, prompt: u.Prompt, changed: make(chan struct{}), ended: make(chan struct{})}
		a.current = a.recovered
	}
	return nil
}

// buildPlain makes a driver that keeps no session; its spans, if any,
// belong to a conversation of their own.
func (a *Agent) buildPlain(cfg Config, kcfg kernel.Config, model ports.Model, tools toolbox) error {
	if err := kcfg.Validate(); err != nil {
		stopSpans(cfg.Spans)
		return err
	}
	observe := a.observe
	a.notice = cfg.Notice
	if a.spans = cfg.Spans; a.spans != nil {
		a.spans.SetConversation(session.Conversation(""))
		observe = func(st ports.Step) {
			a.spans.Observe(st)
			a.observe(st)
		}
	}
	d, err := live.New(live.Config{Kernel: kcfg, Model: model, Tools: tools, Observer: observe, Policy: cfg.Policy})
	if err != nil {
		stopSpans(cfg.Spans)
	}
	a.driver = d
	return err
}

// stopSpans stops a span export, sending what has ended (waiting at most
// spansBound).
func stopSpans(sp session.Spans) error {
	if sp == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), spansBound)
	defer cancel()
	return sp.Shutdown(ctx)
}

// openSession resumes the file at path when it holds anything, else
// creates it.
func openSession(path string) (*session.Session, error) {
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() && st.Size() > 0 {
		return session.Resume(path)
	}
	return session.Create(path)
}

// start runs the driver on a goroutine the agent owns (Close waits for it).
func (a *Agent) start() {
	ctx, stop := context.WithCancel(context.Background())
	a.stop = stop
	go func() {
		err := a.driver.Run(ctx)
		a.mu.Lock()
		a.runErr = err
		t := a.current
		a.mu.Unlock()
		if t != nil {
			t.fail(stoppedErr(err))
		}
		close(a.done)
	}()
}

// stoppedErr is the error of a turn whose driver stopped before it ended:
// ErrClosed, and why the driver stopped (a write-ahead log that could not
// be written: live.ErrWriteAhead).
func stoppedErr(runErr error) error {
	if runErr == nil {
		return ErrClosed
	}
	return fmt.Errorf("%w: %w", ErrClosed, runErr)
}

// Driver is the live driver underneath, for input the agent does not
// offer (Interject, Cancel of a sub-agent, Inspect). Do not Run it.
func (a *Agent) Driver() *live.Driver { return a.driver }

// Run starts a turn with prompt and returns it at once; read its Events,
// then its Result. Cancelling ctx before the turn ends cancels it (the
// user's Esc: outcome interrupted, reason user_cancel). A turn refused —
// another runs, the agent is closed, the kernel refuses the prompt (an
// empty one) — has the refusal as its Result's error.
//
// With an empty prompt Run takes up the turn the session's last run left
// unfinished (Continue), as `escapement run --resume` does; with none, an
// empty prompt is refused. A prompt while that turn has not been taken up
// is refused (ErrBusy).
func (a *Agent) Run(ctx context.Context, prompt string) *Turn {
	if prompt == "" {
		if t := a.Continue(ctx); t != nil {
			return t
		}
	}
	t := &Turn{a: a, changed: make(chan struct{}), ended: make(chan struct{})}
	if err := a.begin(t); err != nil {
		t.fail(err)
		return t
	}
	if err := a.driver.Submit(ctx, prompt); err != nil {
		t.fail(err)
		return t
	}
	t.watch(ctx)
	return t
}

// begin makes t the running turn, unless one runs or the agent is closed.
func (a *Agent) begin(t *Turn) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.closed || isDone(a.done):
		return ErrClosed
	case a.recovered != nil:
		return fmt.Errorf("%w: the session's last run left turn %d unfinished; Run with no prompt (or Continue) takes it up", ErrBusy, a.recovered.number)
	case a.current != nil && !isDone(a.current.ended):
		return ErrBusy
	}
	a.current = t
	return nil
}

// Continue returns the turn the session's last run left unfinished — a
// killed process, a power cut — which the agent took up when it was
// built (from its write-ahead log, or from its prompt when the log lost
// the turn's start); nil when there is none, and after the first call.
// ctx is that turn's, as for Run.
func (a *Agent) Continue(ctx context.Context) *Turn {
	a.mu.Lock()
	t := a.recovered
	a.recovered = nil
	a.mu.Unlock()
	if t == nil {
		return nil
	}
	if err := a.sess.Resubmit(ctx); err != nil {
		t.fail(err)
		return t
	}
	t.watch(ctx)
	return t
}

// Close shuts the tree down — a running turn ends interrupted with reason
// shutdown — and waits for it to stop, at most the grace period and a
// second; then it closes the session: the session file synced and closed,
// its write-ahead log removed when the run ended cleanly. A tree that did
// not stop in time is ErrStuck (the log is kept for a resume). Close is
// safe to call more than once.
func (a *Agent) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	a.mu.Unlock()
	a.stop()
	timer := time.NewTimer(a.grace + stopSlack)
	defer timer.Stop()
	select {
	case <-a.done:
	case <-timer.C:
		if a.sess != nil {
			a.sess.Abandon()
		}
		return fmt.Errorf("%w within %v of the end (grace %v + %v)", ErrStuck, a.grace+stopSlack, a.grace, stopSlack)
	}
	if a.sess == nil {
		// As a session does: the spans' failure is told, not the run's.
		if err := stopSpans(a.spans); err != nil && a.notice != nil {
			a.notice(err.Error())
		}
		return a.runErr
	}
	return errors.Join(a.runErr, a.sess.Close(a.runErr))
}

// observe runs on the kernel's goroutine after every Step: it hands the
// step's lifecycle records to the running turn.
func (a *Agent) observe(st ports.Step) {
	a.mu.Lock()
	t := a.current
	a.mu.Unlock()
	if t != nil {
		t.observe(st)
	}
}

// isDone reports whether ch is closed.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// toolbox is the agent's tools and the specs its model is offered.
type toolbox struct {
	ports.Tools
	specs []ports.ToolSpec
}

// noTools answers a call of an agent without tools.
type noTools struct{}

func (noTools) Run(_ context.Context, c ports.Call) ports.ToolResult {
	return ports.ToolResult{Status: kernel.ToolError, Content: fmt.Sprintf("error: unknown tool %q: this agent has no tools", c.Name)}
}

// offered is what the agent's model is offered: the tools' specs, and the
// delegate tool when the limits let the agent delegate (with profiles the
// router offers each profile its own). A tool of the delegate tool's name
// is refused: the kernel runs that tool itself.
func offered(t ports.Tools, limits kernel.Limits, withProfiles bool) (toolbox, error) {
	tb := toolbox{Tools: t}
	if t == nil {
		tb.Tools = noTools{}
	}
	if box, ok := t.(ports.Toolbox); ok {
		tb.specs = slices.Clone(box.Specs())
	}
	if limits.MaxDepth <= 0 && !withProfiles {
		return tb, nil
	}
	for _, s := range tb.specs {
		if s.Name == kernel.DefaultDelegateTool {
			return tb, fmt.Errorf("agent: a tool is named %q, the kernel's delegation tool; rename it (or set Limits.MaxDepth to 0)", s.Name)
		}
	}
	if !withProfiles {
		tb.specs = append(tb.specs, ports.DelegateSpec(kernel.DefaultDelegateTool))
	}
	return tb, nil
}

// Profile is a kind of agent: the kernel's profile (docs/semantics.md,
// "Profiles") and the model its agents' requests go to.
type Profile struct {
	kernel.Profile
	// Model runs its agents' requests; Config.Model when nil.
	Model ports.Model
}

// profiled is the model the driver streams from: cfg.Model offering
// specs, or, with profiles, a router sending each request to its
// profile's model with its profile's tools (adapters/profiles); kcfg
// gains the profiles.
func profiled(cfg Config, kcfg *kernel.Config, specs []ports.ToolSpec) (ports.Model, error) {
	if len(cfg.Profiles) == 0 {
		return withTools(cfg.Model, specs), nil
	}
	models := make(map[string]ports.Model, len(cfg.Profiles))
	for _, p := range cfg.Profiles {
		kcfg.Profiles = append(kcfg.Profiles, p.Profile)
		if !isNil(p.Model) {
			models[p.Name] = p.Model
		}
	}
	r, err := profiles.New(*kcfg, cfg.Model, models, specs)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return r, nil
}

// withTools is model offering specs with every request.
func withTools(model ports.Model, specs []ports.ToolSpec) ports.Model {
	return ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
		if req.Tools == nil {
			req.Tools = specs
		}
		return model.Stream(ctx, req, sink)
	})
}

// isNil reports whether m is nil, or an interface holding a nil pointer (a
// constructor's result on its error: openai.New's).
func isNil(m ports.Model) bool {
	if m == nil {
		return true
	}
	v := reflect.ValueOf(m)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
