package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/term"

	"github.com/escapement/escapement/adapters/approval"
	"github.com/escapement/escapement/adapters/console"
	"github.com/escapement/escapement/adapters/openai"
	"github.com/escapement/escapement/adapters/otel"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/profiles"
	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/adapters/session"
	"github.com/escapement/escapement/adapters/tools"
	"github.com/escapement/escapement/internal/buildinfo"
	"github.com/escapement/escapement/internal/edge"
	"github.com/escapement/escapement/internal/headless"
	"github.com/escapement/escapement/internal/redact"
	"github.com/escapement/escapement/internal/userfile"
	"github.com/escapement/escapement/kernel"
)

// toolBox is what a live run needs of its tools: a *tools.Box, or a test's
// fake (app.newTools).
type toolBox interface {
	ports.Toolbox
	// KillAll kills every process a tool still runs (a hard exit).
	KillAll()
	Close() error
}

func newToolBox(cfg tools.Config) (toolBox, error) { return tools.New(cfg) }

// setupLive builds a live run from the flags. Nothing is written anywhere
// until every input has been read and every output path checked and opened
// (a bad --trace must not leave a session file behind that blocks the
// corrected re-run); then the session (adapters/session) writes its header
// at once.
func (a *app) setupLive(f *liveFlags) (_ *liveRun, err error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	key := a.apiKey(f.cfg.APIKeyEnv)
	a.secrets = a.secrets.With(append(a.cfg.Secrets(), a.cfg.Keys()...)...)
	kcfg := kernel.Config{Limits: f.limits, System: f.system, Profiles: a.cfg.KernelProfiles(), RootProfile: f.cfg.Profile}
	sess, err := a.openSession(f, &kcfg)
	if err != nil {
		return nil, err
	}
	a.session = sess // released when the command has returned (runWith)
	lr := a.newLiveRun(f, key, sess)
	view, err := a.startTools(f, lr)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			lr.box.Close()
		}
	}()
	scfg, err := lr.sessionConfig(f, kcfg)
	if err != nil {
		return nil, err
	}
	if err := lr.start(f, scfg); err != nil {
		return nil, err
	}
	view.lr.Store(lr)
	fmt.Fprintf(lr.errw, "escapement: session %s\n", sess.Path())
	return lr, nil
}

// newLiveRun is the run's state before anything starts: its outputs —
// the protocol's encoder (--json) or the console, stderr's notices in
// both, -o's file — and the view that turns its steps into events.
func (a *app) newLiveRun(f *liveFlags, key string, sess *session.Session) *liveRun {
	out := headless.NewWriter(a.out)
	lr := &liveRun{a: a, out: out, errw: headless.NewWriter(a.err), secret: key, sess: sess, red: a.secrets, redact: a.secrets.Redact,
		grace: f.limits.Grace, whileBusy: a.whileBusy(f.whileBusy), notify: make(chan struct{}, 1), flags: f, view: protocol.NewView()}
	lr.con = &console.Console{Out: out, Err: lr.errw, Secret: key, Terminal: isTerminal(a.out), FinalOnly: f.finalOnly, Quiet: f.json,
		Redact: func(s string) string { return lr.redact(s) }}
	lr.prompt = approval.NewPrompt(f.chat && f.inputFormat == "text" && isTerminal(a.in), lr.errw, func(s string) string { return lr.redact(s) })
	if f.json {
		lr.enc = protocol.NewEncoder(out, func(s string) string { return lr.redact(s) })
	}
	return lr
}

// apiKey is the variable name names (--api-key-env, $OPENAI_API_KEY by
// default), with a warning when it is too weak to be redacted.
func (a *app) apiKey(name string) string {
	key := os.Getenv(name)
	if why := redact.Weak(key); why != "" {
		fmt.Fprintf(a.err, "escapement: %s is not treated as a secret: %s; it is not redacted from output and files\n", name, why)
	}
	return key
}

// openSession resumes the session --resume names (locked, then read: its
// complete turns seed kcfg) or prepares the new one --session names (a
// file under $XDG_STATE_HOME by default).
func (a *app) openSession(f *liveFlags, kcfg *kernel.Config) (*session.Session, error) {
	if f.resume != "" {
		sess, err := session.Resume(f.resume)
		if err != nil {
			return nil, usageErr("--resume: %v", err)
		}
		sess.Seed(kcfg)
		if err := kcfg.Validate(); err != nil {
			sess.Release()
			return nil, usageErr("--resume %s: %v", f.resume, err)
		}
		return sess, nil
	}
	if err := kcfg.Validate(); err != nil {
		return nil, usageErr("%v", err)
	}
	path := f.session
	if path == "" {
		var err error
		if path, err = session.DefaultPath(); err != nil {
			return nil, usageErr("%v", err)
		}
	}
	sess, err := session.Create(path)
	if errors.Is(err, session.ErrExists) {
		return nil, usageErr("--session %s already holds a session; continue it with `escapement chat --resume %s` or name a new file", path, path)
	}
	if err != nil {
		return nil, usageErr("--session %v", err)
	}
	return sess, nil
}

// startTools builds the run's tools — the workspace's, and the MCP
// servers' of --mcp-config — and its redactor: the API key and every
// secret the MCP configurations hold.
func (a *app) startTools(f *liveFlags, lr *liveRun) (*mcpView, error) {
	newTools := a.newTools
	if newTools == nil {
		newTools = newToolBox
	}
	mcpServers, err := loadMCP(f)
	if err != nil {
		return nil, err
	}
	box, err := newTools(tools.Config{Workspace: f.workspace, AllowShell: f.allowShell, PassEnv: f.toolEnv, WithholdEnv: append(mcpServers.secretVars(), a.cfg.SecretVars()...), KillGrace: f.limits.Grace / 2})
	if err != nil {
		return nil, usageErr("--workspace: %v", err)
	}
	view := newMCPView(a, a.secrets)
	if lr.box, err = a.withMCP(f, mcpServers, box, view); err != nil {
		box.Close()
		return nil, err
	}
	a.secrets = view.red // every error the command returns is redacted with it
	lr.red, lr.redact = view.red, view.red.Redact
	return view, nil
}

// sessionConfig is the session's configuration: the model the flags name,
// the tools, both redacted at the kernel's edge, the CLI's observer, and
// the span export the OTEL_* variables ask for (docs/otel.md), built last.
func (lr *liveRun) sessionConfig(f *liveFlags, kcfg kernel.Config) (_ session.Config, err error) {
	model, baseURL := f.model, f.baseURL
	ocfg := openai.Config{APIKey: lr.secret, BaseURL: baseURL, Model: model, Tools: lr.box.Specs(),
		MaxRetryWait: f.limits.FirstTokenTimeout, MaxLineBytes: openai.MaxLineFor(f.limits.MaxMessageBytes)}
	lr.answers.View, lr.answers.Emit = lr.view, lr.emit
	if lr.answers.Schema, err = f.settings.Apply(&ocfg); err != nil {
		return session.Config{}, usageErr("%v", err)
	}
	m, err := profiles.Build(kcfg, ocfg, f.cfg.APIKeyEnv, lr.a.cfg.Endpoints(), os.Getenv)
	if err != nil {
		return session.Config{}, usageErr("%v", lr.a.cfg.Where(err))
	}
	if kcfg.Ask, err = approval.Resolve(f.ask, lr.box.Specs(), approval.ReadOnly(lr.box), kcfg.DelegateTool); err != nil {
		return session.Config{}, usageErr("--ask: %v", err)
	}
	lr.attend = approval.NewAttendance(f.inputFormat == "json" || lr.prompt != nil || f.chat && f.json || f.decide, func(s string) { lr.say("%s", s) })
	if idem, ok := lr.box.(interface{ Idempotent() []string }); ok {
		kcfg.Idempotent = idem.Idempotent()
	}
	lr.run = protocol.Run{Version: buildinfo.Version(), Model: model, Endpoint: baseURL, Profile: kcfg.RootProfile, Workspace: userfile.Abs(f.workspace), Limits: f.limits}
	for _, e := range lr.a.cfg.Endpoints() { // a root profile may name its own model
		lr.run.Profiles = append(lr.run.Profiles, e.Profile)
		if e.Profile == kcfg.RootProfile {
			lr.run.Model, lr.run.Endpoint = cmp.Or(e.Model, model), cmp.Or(e.BaseURL, baseURL)
		}
	}
	for _, spec := range lr.box.Specs() {
		lr.run.Tools = append(lr.run.Tools, spec.Name)
	}
	fedModel, fedTools := edge.Redact(m, lr.box, lr.red)
	exp, err := otel.NewFromEnv(context.Background(), os.Getenv, otel.Config{Model: model, BaseURL: baseURL, Redact: lr.redact, OnError: func(err error) { lr.say("%v", err) }})
	if err != nil {
		return session.Config{}, usageErr("%v", err)
	}
	return session.Config{Kernel: kcfg, Model: fedModel, Tools: fedTools, ModelName: model, Observer: lr.observe, Spans: exp,
		Redact: lr.redact, Notice: func(s string) { lr.say("%s", s) }, Policy: lr.attend.Policy(),
		WrapFile: lr.a.wrapSession, WrapLog: lr.a.wrapLog}, nil
}

// start opens the trace (not truncated until the session has started:
// the first write truncates it) and starts the session.
func (lr *liveRun) start(f *liveFlags, scfg session.Config) (err error) {
	flag := "--session"
	if f.resume != "" {
		flag = "--resume"
	}
	if f.lastMessage != "" {
		if lr.final, err = userfile.CreateReplacement(f.lastMessage); err != nil {
			return usageErr("-o: %v", err)
		}
	}
	if f.trace != "" {
		if lr.traceOut, err = userfile.OpenOutput(f.trace, "an escapement trace", traceHeaderPrefix); err != nil {
			lr.discardFinal()
			scfg.Spans.Shutdown(context.Background()) // the session never owned it
			return usageErr("--trace: %v", err)
		}
		scfg.Trace = lr.traceOut
	}
	if err := lr.sess.Start(scfg); err != nil {
		if lr.traceOut != nil {
			lr.traceOut.Discard()
		}
		lr.discardFinal()
		return writeErr(flag+": %v", err)
	}
	lr.driver = lr.sess.Driver()
	lr.run.Session, lr.run.Resumed = lr.sess.Path(), f.resume != ""
	lr.emit(protocol.Started(lr.run))
	if u, ok := lr.sess.Unfinished(); ok {
		lr.state.Running(u.Turn)
	}
	return nil
}

// writeErr is the error for an output that could not be written: exit 1
// when the disk failed (full, over quota, an I/O error: nothing the user
// typed was wrong), else a usage error (exit 2) as for any bad path.
func writeErr(format string, err error) error {
	for _, disk := range []error{syscall.ENOSPC, syscall.EDQUOT, syscall.EIO, syscall.EROFS} {
		if errors.Is(err, disk) {
			return &exitError{Code: exitCheckFailed, Err: fmt.Errorf(format, err)}
		}
	}
	return usageErr(format, err)
}

// whileBusy resolves --while-busy: interject when stdin is a terminal (a
// person typing while an answer streams means to steer it), queue when it
// is not (a script's lines are turns, one after another).
func (a *app) whileBusy(flag string) string {
	switch {
	case flag != "":
		return flag
	case isTerminal(a.in):
		return busyInterject
	}
	return busyQueue
}

// isTerminal says s is a terminal.
func isTerminal(s any) bool {
	f, ok := s.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// discardFinal drops -o's file before anything was written to it.
func (lr *liveRun) discardFinal() {
	if lr.final != nil {
		lr.final.Discard()
	}
}

// traceHeaderPrefix starts every trace (kernel/trace writes the header's
// fields in a fixed order).
const traceHeaderPrefix = `{"type":"header",`
