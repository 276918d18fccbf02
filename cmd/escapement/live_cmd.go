package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/openai"
	"github.com/escapement/escapement/adapters/tools"
	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
	"github.com/spf13/cobra"
)

// defaultModel is used when neither --model nor $OPENAI_MODEL names one.
const defaultModel = "gpt-4o-mini"

// liveFlags are the flags shared by run and chat.
type liveFlags struct {
	json       bool
	trace      string
	system     string
	session    string
	resume     string
	workspace  string
	allowShell bool
	model      string
	baseURL    string
	limits     kernel.Limits
}

func (f *liveFlags) register(cmd *cobra.Command, chat bool) {
	fl := cmd.Flags()
	fl.BoolVar(&f.json, "json", false, "print lifecycle events as JSON Lines on stdout (for scripts) instead of the answer text")
	fl.StringVar(&f.trace, "trace", "", "write the kernel trace (JSON Lines, the kernel/trace format) to `FILE`")
	fl.StringVar(&f.system, "system", "", "system prompt of the root agent")
	fl.StringVar(&f.session, "session", "", "append the transcript to `FILE` (default: a new file under $XDG_STATE_HOME/escapement/sessions)")
	if chat {
		fl.StringVar(&f.resume, "resume", "", "continue the session in `FILE`, appending to it")
	}
	fl.StringVar(&f.workspace, "workspace", ".", "directory the tools work in; paths that leave it are refused")
	fl.BoolVar(&f.allowShell, "allow-shell", false, "enable the shell tool (bash -c in the workspace, killed with its process group on cancel)")
	fl.StringVar(&f.model, "model", "", "model name (default $OPENAI_MODEL, else "+defaultModel+")")
	fl.StringVar(&f.baseURL, "base-url", "", "OpenAI-compatible API root (default $OPENAI_BASE_URL, else "+openai.DefaultBaseURL+")")
	f.limits = kernel.DefaultLimits()
	for _, spec := range kernel.LimitTable() {
		if p := spec.DurationPtr(&f.limits); p != nil {
			fl.DurationVar(p, spec.Flag, *p, spec.Usage)
		} else {
			p := spec.IntPtr(&f.limits)
			fl.IntVar(p, spec.Flag, *p, spec.Usage)
		}
	}
}

// validate names the flag of the first bad value.
func (f *liveFlags) validate() error {
	for _, spec := range kernel.LimitTable() {
		if err := spec.Check(spec.Get(f.limits)); err != nil {
			return usageErr("--%s %v", spec.Flag, err)
		}
	}
	if f.resume != "" && f.session != "" && f.session != f.resume {
		return usageErr("--session and --resume name different files; --resume appends to the file it resumes")
	}
	return nil
}

func newRunCmd(a *app) *cobra.Command {
	f := &liveFlags{}
	cmd := &cobra.Command{
		Use:   "run PROMPT",
		Short: "Run one turn against an OpenAI-compatible endpoint",
		Long: `Run one turn of the root agent against an OpenAI-compatible endpoint:
the answer streams to stdout, tool and delegation activity to stderr.

Ctrl-C cancels the turn (streams and tools are cancelled, shells get SIGINT
then SIGKILL) and exits 130 once the whole tree has stopped; a second Ctrl-C
exits at once. The endpoint comes from --base-url or $OPENAI_BASE_URL, the key
from $OPENAI_API_KEY (never a flag, never logged).

Exit codes: 0 completed, 1 the turn failed or timed out, 2 usage or input
error, 130 interrupted.`,
		Example: `  OPENAI_BASE_URL=http://localhost:11434/v1 escapement run --model llama3.1 "list the Go files here"
  escapement run --allow-shell --workspace ./repo "run the tests and summarise failures"
  escapement run --json --trace run.jsonl "hello" | jq -c 'select(.kind=="turn_ended")'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(args[0]) == "" {
				return usageErr("the prompt is empty")
			}
			lr, err := a.setupLive(f)
			if err != nil {
				return err
			}
			return lr.runOnce(cmd.Context(), args[0])
		},
	}
	f.register(cmd, false)
	return cmd
}

func newChatCmd(a *app) *cobra.Command {
	f := &liveFlags{}
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "A headless REPL on stdin/stdout against an OpenAI-compatible endpoint",
		Long: `Chat with the root agent: each line on stdin is a message. A line typed
while a turn runs is an interjection (it joins the running turn); "/cancel"
or Ctrl-C cancels the turn and returns to the prompt; a second Ctrl-C before
the tree has stopped exits at once; Ctrl-D (end of input) exits after the
running turn; SIGTERM cancels the running turn and exits 130 once it ended.

The transcript is appended to the session file as it happens and synced at
the end of every turn; --resume FILE continues a session (a crash loses at
most the turn in flight).`,
		Example: `  OPENAI_BASE_URL=http://localhost:8080/v1 escapement chat --session work.jsonl
  escapement chat --resume work.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lr, err := a.setupLive(f)
			if err != nil {
				return err
			}
			return lr.chat(cmd.Context())
		},
	}
	f.register(cmd, true)
	return cmd
}

// lockedWriter serialises writes from the kernel's goroutine (answers,
// activity) and the command's (prompts).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// turnState is the root's turn as the observer last saw it; the command's
// goroutine reads it when notified (coalesced, so the kernel's goroutine
// never blocks on the command's).
type turnState struct {
	mu    sync.Mutex
	busy  bool
	turn  uint64
	ended uint64 // turns ended so far
	last  kernel.Lifecycle
}

func (s *turnState) get() (busy bool, turn, ended uint64, last kernel.Lifecycle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy, s.turn, s.ended, s.last
}

// liveRun is one live session: the driver and everything it writes.
type liveRun struct {
	a       *app
	out     io.Writer
	errw    io.Writer
	driver  *live.Driver
	box     *tools.Box
	session *sessionWriter
	trace   *trace.Writer
	traceF  *os.File
	state   turnState
	notify  chan struct{}

	// Kernel goroutine only.
	written     int  // root messages already in the session file
	midLine     bool // the root's answer text printed so far did not end with a newline
	sessionLost bool // the session file failed and the user was told
	jsonLines   *json.Encoder
}

func (a *app) setupLive(f *liveFlags) (lr *liveRun, err error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	kcfg := kernel.Config{Limits: f.limits, System: f.system}
	var loaded *loadedSession
	sessionPath := f.session
	if f.resume != "" {
		if loaded, err = loadSession(f.resume); err != nil {
			return nil, usageErr("%v", err)
		}
		kcfg.History = loaded.history
		sessionPath = f.resume
	}
	if err := kcfg.Validate(); err != nil {
		if loaded != nil {
			return nil, usageErr("--resume %s: %v", f.resume, err)
		}
		return nil, usageErr("%v", err)
	}
	if sessionPath == "" {
		if sessionPath, err = defaultSessionPath(); err != nil {
			return nil, usageErr("%v", err)
		}
	} else if loaded == nil {
		// A new session must not append to another session's transcript:
		// resuming would splice two unrelated histories together.
		if st, err := os.Stat(sessionPath); err == nil && st.Size() > 0 {
			return nil, usageErr("--session %s already holds a session; continue it with `escapement chat --resume %s` or name a new file", sessionPath, sessionPath)
		}
	}
	box, err := tools.New(tools.Config{Workspace: f.workspace, AllowShell: f.allowShell, KillGrace: f.limits.Grace / 2})
	if err != nil {
		return nil, usageErr("--workspace: %v", err)
	}
	defer func() {
		if err != nil {
			box.Close()
		}
	}()
	model := firstNonEmpty(f.model, os.Getenv("OPENAI_MODEL"), defaultModel)
	m, err := openai.New(openai.Config{
		APIKey:  os.Getenv("OPENAI_API_KEY"),
		BaseURL: firstNonEmpty(f.baseURL, os.Getenv("OPENAI_BASE_URL"), openai.DefaultBaseURL),
		Model:   model,
		Tools:   box.Specs(),
	})
	if err != nil {
		return nil, usageErr("--base-url/--model: %v", err)
	}
	errw := &lockedWriter{w: a.err}
	lr = &liveRun{a: a, out: &lockedWriter{w: a.out}, errw: errw, box: box, notify: make(chan struct{}, 1)}
	if loaded != nil {
		if loaded.discarded > 0 || loaded.torn {
			if err := truncateSession(f.resume, loaded.keep); err != nil {
				return nil, usageErr("--resume: %v", err)
			}
			fmt.Fprintf(errw, "escapement: %s: dropped %d message(s) of a turn that never finished\n", f.resume, loaded.discarded)
		}
	}
	session, err := openSession(sessionPath, model)
	if err != nil {
		return nil, usageErr("--session: %v", err)
	}
	lr.session = session
	defer func() {
		if err != nil {
			session.close()
		}
	}()
	if f.trace != "" {
		traceF, err := os.Create(f.trace)
		if err != nil {
			return nil, usageErr("--trace: %v", err)
		}
		defer func() {
			if lr == nil {
				traceF.Close()
			}
		}()
		lr.traceF = traceF
		lr.trace = trace.NewWriter(lr.traceF, trace.Header{
			Source: "live", Name: sessionPath, Limits: f.limits, RootName: "main", System: f.system, History: kcfg.History,
			Build: "escapement " + runtime.Version(),
		})
	}
	if f.json {
		lr.jsonLines = json.NewEncoder(lr.out)
		lr.jsonLines.SetEscapeHTML(false)
	}
	if lr.driver, err = live.New(live.Config{Kernel: kcfg, Model: m, Tools: box, Observer: lr.observe}); err != nil {
		return nil, usageErr("%v", err)
	}
	if loaded != nil && len(loaded.history) > 0 {
		// The file holds the resumed messages, the end of the root's starting
		// history; what the kernel put before them (a system prompt) cannot
		// follow them in the file, so it counts as written. A resumed file
		// without messages gets the starting history like a new session.
		lr.written = len(lr.driver.Kernel().Agent(kernel.Root).History())
	}
	fmt.Fprintf(errw, "escapement: session %s\n", sessionPath)
	return lr, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}

// serve runs body with the driver running and interrupts subscribed; then
// it stops the driver, waits for Run (and so for every goroutine of the
// tree), and closes the trace, the session and the workspace. body's error
// wins over the shutdown's.
func (lr *liveRun) serve(ctx context.Context, body func(ctx context.Context, sigs <-chan os.Signal) error) (err error) {
	sigs, stopSignals := lr.a.signals()
	defer stopSignals()
	runCtx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- lr.driver.Run(runCtx) }() // owned: received below
	defer func() {
		cancel()
		if serr := lr.finish(<-errc); serr != nil && err == nil {
			err = serr
		}
	}()
	return body(ctx, sigs)
}

// finish closes what the run wrote once the driver has stopped (with runErr)
// and reports the first error as a failed check.
func (lr *liveRun) finish(runErr error) error {
	err := runErr
	if lr.trace != nil {
		if _, terr := lr.trace.Close(lr.driver.Kernel().Now()); terr != nil && err == nil {
			err = terr
		}
		if cerr := lr.traceF.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("--trace: %w", cerr)
		}
	}
	if serr := lr.session.close(); serr != nil && err == nil {
		err = serr
	}
	lr.box.Close()
	if err != nil {
		return &exitError{code: exitCheckFailed, err: err}
	}
	return nil
}

// hardExit is the second Ctrl-C: kill every running shell group at once
// (they would otherwise outlive us in their own process groups) and exit.
func (lr *liveRun) hardExit() {
	lr.box.KillAll()
	lr.a.exit(exitInterrupted)
}

// runOnce is `escapement run`: one turn, then exit with its outcome.
func (lr *liveRun) runOnce(ctx context.Context, prompt string) error {
	return lr.serve(ctx, func(ctx context.Context, sigs <-chan os.Signal) error {
		return lr.turn(ctx, prompt, sigs)
	})
}

// turn submits prompt and waits for its end; Ctrl-C cancels it, a second
// one exits at once.
func (lr *liveRun) turn(ctx context.Context, prompt string, sigs <-chan os.Signal) error {
	if err := lr.driver.Submit(ctx, prompt); err != nil {
		return &exitError{code: exitCheckFailed, err: err}
	}
	cancelled := false
	for {
		select {
		case <-lr.notify:
			if _, _, ended, last := lr.state.get(); ended > 0 {
				return outcomeErr(last)
			}
		case <-sigs:
			if cancelled {
				lr.hardExit()
				return &exitError{code: exitInterrupted}
			}
			cancelled = true
			if err := lr.driver.Cancel(ctx, kernel.Root, 1); err != nil {
				return &exitError{code: exitCheckFailed, err: err}
			}
		case <-ctx.Done():
			return &exitError{code: exitInterrupted, err: ctx.Err()}
		}
	}
}

// outcomeErr maps a root turn's end to the exit code.
func outcomeErr(l kernel.Lifecycle) error {
	switch l.Outcome {
	case kernel.OutcomeCompleted:
		return nil
	case kernel.OutcomeInterrupted:
		return &exitError{code: exitInterrupted}
	default:
		return &exitError{code: exitCheckFailed}
	}
}

// chat is `escapement chat`.
func (lr *liveRun) chat(ctx context.Context) error {
	return lr.serve(ctx, lr.repl)
}

// repl reads lines until end of input or /quit and hands them to the root.
func (lr *liveRun) repl(ctx context.Context, sigs <-chan os.Signal) error {
	input, err := startInput(lr.a.in)
	if err != nil {
		return &exitError{code: exitCheckFailed, err: err}
	}
	defer input.close()
	lines := input.lines
	prompt := func() { fmt.Fprint(lr.errw, "> ") }
	prompt()
	var (
		eof           bool
		cancelledTurn uint64
		seenEnded     uint64
		// terminating: a SIGTERM (a service manager, `kill`) asks the
		// process to end, not the turn: the running turn is cancelled and
		// chat exits 130 once it has ended.
		terminating bool
	)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				eof, lines = true, nil
				if input.err != nil {
					fmt.Fprintf(lr.errw, "escapement: %v; no more input is read\n", input.err)
				}
				if busy, _, _, _ := lr.state.get(); !busy {
					return nil
				}
				continue // Ctrl-D exits once the running turn is over
			}
			text := strings.TrimSpace(line)
			switch {
			case text == "":
				continue
			case text == "/cancel":
				busy, turn, _, _ := lr.state.get()
				if !busy {
					fmt.Fprintln(lr.errw, "escapement: no turn is running")
					prompt()
					continue
				}
				cancelledTurn = turn
				if err := lr.driver.Cancel(ctx, kernel.Root, turn); err != nil {
					fmt.Fprintf(lr.errw, "escapement: %v\n", err)
				}
			case text == "/quit" || text == "/exit":
				return nil
			default:
				if err := lr.driver.Say(ctx, line); err != nil {
					fmt.Fprintf(lr.errw, "escapement: %v\n", err)
				}
			}
		case <-lr.notify:
			busy, _, ended, _ := lr.state.get()
			if busy || ended == seenEnded {
				continue
			}
			seenEnded = ended
			if terminating {
				return &exitError{code: exitInterrupted}
			}
			if eof {
				return nil
			}
			prompt()
		case sig := <-sigs:
			busy, turn, _, _ := lr.state.get()
			terminating = terminating || sig == syscall.SIGTERM
			switch {
			case !busy && terminating:
				return &exitError{code: exitInterrupted}
			case !busy:
				fmt.Fprintln(lr.errw, "\n(no turn is running; Ctrl-D or /quit exits)")
				prompt()
			case cancelledTurn == turn:
				lr.hardExit()
				return &exitError{code: exitInterrupted}
			default:
				cancelledTurn = turn
				if err := lr.driver.Cancel(ctx, kernel.Root, turn); err != nil {
					fmt.Fprintf(lr.errw, "escapement: %v\n", err)
				}
			}
		case <-ctx.Done():
			return &exitError{code: exitInterrupted, err: ctx.Err()}
		}
	}
}

// observe runs on the kernel's goroutine after every Step: it writes the
// trace, appends the root's new messages to the session, shows the step,
// and updates the turn state.
func (lr *liveRun) observe(s live.Step) {
	if lr.trace != nil {
		lr.trace.Step(s.Kernel, s.Event, s.Target, s.Before, s.Effects)
	}
	if lr.a.logger != nil {
		lr.a.logger.Debug("step", "event", s.Event.Describe(), "effects", len(s.Effects))
	}
	lr.persist(s)
	for i := range s.Effects {
		lr.show(s.Kernel, &s.Effects[i])
	}
	changed := false
	for i := range s.Effects {
		e := &s.Effects[i]
		if e.Kind != kernel.EffEmit || e.Life.Agent != kernel.Root {
			continue
		}
		switch e.Life.Kind {
		case kernel.LifeTurnStarted:
			lr.state.mu.Lock()
			lr.state.busy, lr.state.turn = true, e.Life.Turn
			lr.state.mu.Unlock()
			changed = true
		case kernel.LifeTurnEnded:
			lr.state.mu.Lock()
			lr.state.busy = false
			lr.state.ended++
			lr.state.last = e.Life
			lr.state.mu.Unlock()
			changed = true
		}
	}
	if changed {
		select {
		case lr.notify <- struct{}{}:
		default: // a notification is already pending
		}
	}
}

// persist appends the root's new messages and, at the end of a root turn,
// the turn_end record (then syncs). When a turn ends and the next starts in
// the same Step (inputs queued while an interrupted tree settled), the
// previous turn's messages end at its marker: the new turn's user messages
// follow it (TestPersistQueuedTurn).
func (lr *liveRun) persist(s live.Step) {
	hist := s.Kernel.Agent(kernel.Root).History()
	var ended *kernel.Lifecycle
	restarted := false
	for i := range s.Effects {
		e := &s.Effects[i]
		if e.Kind != kernel.EffEmit || e.Life.Agent != kernel.Root {
			continue
		}
		switch {
		case e.Life.Kind == kernel.LifeTurnEnded:
			ended = &e.Life
		case e.Life.Kind == kernel.LifeTurnStarted && ended != nil:
			restarted = true
		}
	}
	if ended != nil {
		cut := len(hist)
		if restarted {
			// The marker was appended when the abort began (often Steps
			// earlier, and already written); everything after it belongs to
			// the new turn.
			for j := len(hist) - 1; j >= 0; j-- {
				if hist[j].Marker {
					cut = max(j+1, lr.written)
					break
				}
			}
		}
		for ; lr.written < cut; lr.written++ {
			lr.session.message(hist[lr.written])
		}
		lr.session.turnEnd(*ended)
	}
	for ; lr.written < len(hist); lr.written++ {
		lr.session.message(hist[lr.written])
	}
	if lr.session.err != nil && !lr.sessionLost {
		// Said once: the writer keeps its first error and writes nothing
		// more; the run ends with it (exit 1).
		lr.sessionLost = true
		fmt.Fprintf(lr.errw, "escapement: %v\nescapement: nothing more is written to the session file; this session goes on without a transcript (resuming the file continues from its last complete turn)\n", lr.session.err)
	}
}

// show prints one effect for the human (or, with --json, each lifecycle
// event for scripts). UI text goes to stderr only, never to a transcript.
func (lr *liveRun) show(k *kernel.Kernel, e *kernel.Effect) {
	if e.Kind == kernel.EffError {
		if lr.a.logger != nil {
			lr.a.logger.Warn("kernel refused an input", "detail", e.Detail)
		}
		return
	}
	if lr.jsonLines != nil {
		if e.Kind == kernel.EffEmit {
			_ = lr.jsonLines.Encode(e.Life)
			lr.showTurnEnd(e)
		}
		return
	}
	path := func(id kernel.AgentID) string {
		if id < 0 || int(id) >= k.NumAgents() {
			return "?"
		}
		return k.Agent(id).Path()
	}
	switch e.Kind {
	case kernel.EffStartTool:
		fmt.Fprintf(lr.errw, "[%s] %s %s\n", path(e.Agent), e.Call.Name, clip(e.Call.Arguments, 160))
		return
	case kernel.EffEmit:
	default:
		return
	}
	l := &e.Life
	switch l.Kind {
	case kernel.LifeDelta:
		if l.Agent == kernel.Root {
			fmt.Fprint(lr.out, l.Text)
			lr.midLine = !strings.HasSuffix(l.Text, "\n")
		}
	case kernel.LifeRetry:
		fmt.Fprintf(lr.errw, "[%s] retry %d in %v: %s\n", path(l.Agent), l.N, l.Delay.Round(time.Millisecond), clip(l.Text, 160))
	case kernel.LifeDelegated:
		fmt.Fprintf(lr.errw, "[%s] delegate → %s: %s\n", path(l.Agent), path(l.Child), clip(l.Text, 160))
	case kernel.LifeCallFinished:
		switch l.Status {
		case kernel.CallChild:
			fmt.Fprintf(lr.errw, "[%s] ← %s: %s\n", path(l.Agent), path(l.Child), l.Outcome)
		case kernel.CallOK:
			fmt.Fprintf(lr.errw, "[%s] ← %s ok\n", path(l.Agent), l.Name)
		default:
			fmt.Fprintf(lr.errw, "[%s] ← %s %s (%s)\n", path(l.Agent), l.Name, l.Status, l.Reason)
		}
	case kernel.LifeCallDropped:
		fmt.Fprintf(lr.errw, "[%s] dropped half-streamed call %s\n", path(l.Agent), l.Name)
	case kernel.LifeTimedOut:
		fmt.Fprintf(lr.errw, "[%s] %s\n", path(l.Agent), l.Reason)
	case kernel.LifeTurnEnded:
		if l.Agent == kernel.Root && lr.midLine {
			fmt.Fprintln(lr.out)
		}
		lr.showTurnEnd(e)
	}
}

// showTurnEnd prints the UI line for a root turn that did not complete.
func (lr *liveRun) showTurnEnd(e *kernel.Effect) {
	l := &e.Life
	if l.Kind != kernel.LifeTurnEnded || l.Agent != kernel.Root {
		return
	}
	lr.midLine = false
	if ui := kernel.UIText(l.Outcome, l.Reason); ui != "" {
		fmt.Fprintln(lr.errw, ui)
	}
}

// clip puts s on one line and cuts it to at most n bytes, at a rune
// boundary, marking the cut.
func clip(s string, n int) string {
	return textcut.Clip(strings.ReplaceAll(s, "\n", " "), n)
}
