package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/openai"
	"github.com/escapement/escapement/adapters/tools"
	"github.com/escapement/escapement/adapters/wal"
	"github.com/escapement/escapement/internal/redact"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
	"golang.org/x/term"
)

// toolBox is what a live run needs of its tools: a *tools.Box, or a test's
// fake (app.newTools).
type toolBox interface {
	live.Tools
	Specs() []live.ToolSpec
	// KillAll kills every process a tool still runs (a hard exit).
	KillAll()
	Close() error
}

func newToolBox(cfg tools.Config) (toolBox, error) { return tools.New(cfg) }

// setupLive builds a live run from the flags. Nothing is written anywhere
// until every input has been read and every output path checked and opened
// (a bad --trace must not leave a session file behind that blocks the
// corrected re-run); then the session's header is written at once.
func (a *app) setupLive(f *liveFlags) (lr *liveRun, err error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	key := os.Getenv("OPENAI_API_KEY")
	red := redact.New(key)
	kcfg := kernel.Config{Limits: f.limits, System: f.system}
	var loaded *loadedSession
	var crashed *wal.Log // the log of a run that died, beside the resumed file
	sessionPath := f.session
	if f.resume != "" {
		if crashed, err = crashedLog(f.resume); err != nil {
			return nil, usageErr("--resume: %v", err)
		}
		if crashed == nil {
			if loaded, err = loadSession(f.resume); err != nil {
				return nil, usageErr("--resume: %v", err)
			}
			kcfg.History, kcfg.Turns = loaded.history, loaded.last
		}
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
	} else if loaded == nil && crashed == nil {
		if err := checkNewSession(sessionPath); err != nil {
			return nil, err
		}
	}
	newTools := a.newTools
	if newTools == nil {
		newTools = newToolBox
	}
	mcpServers, err := loadMCP(f)
	if err != nil {
		return nil, err
	}
	box, err := newTools(tools.Config{Workspace: f.workspace, AllowShell: f.allowShell, PassEnv: f.toolEnv, WithholdEnv: mcpServers.secretVars(), KillGrace: f.limits.Grace / 2})
	if err != nil {
		return nil, usageErr("--workspace: %v", err)
	}
	defer func() {
		if err != nil {
			box.Close()
		}
	}()
	mcpView := newMCPView(a, red)
	withMCP, err := a.withMCP(f, mcpServers, box, mcpView)
	if err != nil {
		return nil, err
	}
	box, red = withMCP, mcpView.red // the MCP configurations' secrets too
	model := firstNonEmpty(f.model, os.Getenv("OPENAI_MODEL"), defaultModel)
	baseURL := firstNonEmpty(f.baseURL, os.Getenv("OPENAI_BASE_URL"), openai.DefaultBaseURL)
	m, err := openai.New(openai.Config{
		APIKey:       key,
		BaseURL:      baseURL,
		Model:        model,
		Tools:        box.Specs(),
		MaxRetryWait: f.limits.FirstTokenTimeout,
		MaxLineBytes: openai.MaxLineFor(f.limits.MaxMessageBytes),
	})
	if err != nil {
		return nil, usageErr("--base-url/--model: %v", err)
	}
	if idem, ok := box.(interface{ Idempotent() []string }); ok {
		kcfg.Idempotent = idem.Idempotent()
	}
	errw := &lockedWriter{w: a.err}
	lr = &liveRun{a: a, out: &lockedWriter{w: a.out}, errw: errw, redact: red.Redact, secret: key, box: box,
		grace: f.limits.Grace, whileBusy: a.whileBusy(f.whileBusy), notify: make(chan struct{}, 1)}
	if err = lr.startOTel(model, baseURL); err != nil {
		return nil, err
	}
	started := lr // a failed setup returns a nil lr
	defer func() {
		if err != nil {
			started.stopOTel(otelFlushBound)
		}
	}()

	// The outputs, in an order that leaves nothing behind on failure: the
	// trace is opened but not truncated, then the session is set up, and
	// only then is the trace truncated and started.
	var traceOut *outputFile
	if f.trace != "" {
		if traceOut, err = openOutput(f.trace); err != nil {
			return nil, usageErr("--trace: %v", err)
		}
		defer func() {
			if err != nil {
				traceOut.discard()
			}
		}()
	}
	lr.json = f.json
	if crashed != nil {
		lr.otelCrashedAt(crashed.Name)
		if err = lr.recoverRun(crashed, sessionPath, traceOut, m); err != nil {
			if lr.session != nil && lr.session.f != nil {
				lr.session.close()
			}
			return nil, usageErr("--resume: %v", err)
		}
		lr.otelConversation(sessionPath)
		fmt.Fprintf(errw, "escapement: session %s\n", sessionPath)
		return lr, nil
	}
	if loaded != nil && loaded.unfinished() {
		backup, err := setAsideUnfinished(f.resume, loaded, time.Now())
		if err != nil {
			return nil, usageErr("--resume: %v", err)
		}
		what := fmt.Sprintf("%d message(s) of a turn that never finished", loaded.discarded)
		if loaded.torn {
			what += " and a torn last line"
		}
		fmt.Fprintf(errw, "escapement: %s: dropped %s; the original file is kept as %s\n", f.resume, what, backup)
	}
	if loaded != nil {
		lr.session, err = appendSession(sessionPath, lr.redact, a.wrapSession)
	} else {
		lr.session, err = createSession(sessionPath, model, lr.redact, a.wrapSession)
	}
	if err != nil {
		return nil, usageErr("--session: %v", err)
	}
	defer func() {
		if err != nil {
			lr.session.close()
		}
	}()
	if traceOut != nil {
		if err = traceOut.commit(); err != nil {
			return nil, usageErr("--trace: %v", err)
		}
		lr.traceF = traceOut.f
		lr.trace = trace.NewWriter(redactingWriter{w: traceOut.f, redact: lr.redact}, trace.Header{
			Source: "live", Name: sessionPath, Limits: f.limits, RootName: "main", System: f.system,
			History: kcfg.History, Turns: kcfg.Turns, Idempotent: kcfg.Idempotent, Build: buildName(),
		})
		if err = lr.trace.Flush(); err != nil { // the header, at once
			return nil, usageErr("--trace: %v", err)
		}
	}
	lr.json = f.json
	mcpView.lr.Store(lr)
	if err = lr.startLog(sessionPath, kcfg); err != nil {
		return nil, usageErr("--session: write-ahead log: %v", err)
	}
	defer func() {
		if err != nil && lr.walF != nil {
			lr.walF.Close()
		}
	}()
	dcfg := live.Config{Kernel: kcfg, Model: m, Tools: box, Observer: lr.observe}
	if lr.wal != nil {
		dcfg.WriteAhead = lr.wal.Record
	}
	if lr.driver, err = live.New(dcfg); err != nil {
		return nil, usageErr("%v", err)
	}
	if loaded != nil && len(loaded.history) > 0 {
		// The file holds the resumed messages, the end of the root's starting
		// history; what the kernel put before them (a system prompt) cannot
		// follow them in the file, so it counts as written. A resumed file
		// without messages gets the starting history like a new session.
		lr.written = len(lr.driver.Kernel().Agent(kernel.Root).History())
	}
	lr.otelConversation(sessionPath)
	fmt.Fprintf(errw, "escapement: session %s\n", sessionPath)
	return lr, nil
}

// whileBusy resolves --while-busy: interject when stdin is a terminal (a
// person typing while an answer streams means to steer it), queue when it
// is not (a script's lines are turns, one after another).
func (a *app) whileBusy(flag string) string {
	if flag != "" {
		return flag
	}
	if f, ok := a.in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return busyInterject
	}
	return busyQueue
}

// checkNewSession refuses a --session path a new session must not write:
// a directory, or a file that already holds something (appending would
// splice two unrelated histories together).
func checkNewSession(path string) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return usageErr("--session: %v", err)
	case st.IsDir():
		return usageErr("--session %s is a directory; name a file (a new one, or leave --session out for one under $XDG_STATE_HOME/escapement/sessions)", path)
	case st.Mode()&fs.ModeCharDevice != 0:
		return nil // /dev/null: no transcript kept
	case !st.Mode().IsRegular():
		return usageErr("--session %s is not a regular file (or a character device such as /dev/null)", path)
	case st.Size() == 0:
		return nil
	}
	if isSessionFile(path) {
		return usageErr("--session %s already holds a session; continue it with `escapement chat --resume %s` or name a new file", path, path)
	}
	return usageErr("--session %s is not empty and not an escapement session; name a new file", path)
}

// traceHeaderPrefix starts every trace (kernel/trace writes the header's
// fields in a fixed order).
const traceHeaderPrefix = `{"type":"header",`

// startsWith reports whether the file at path starts with prefix.
func startsWith(path, prefix string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, len(prefix))
	_, err = io.ReadFull(f, b)
	return err == nil && string(b) == prefix
}

// isSessionFile reports whether path starts with a session header.
func isSessionFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	line, _ := bufio.NewReader(io.LimitReader(f, 64<<10)).ReadBytes('\n')
	var r sessionRecord
	return json.Unmarshal(line, &r) == nil && r.Type == "session"
}

// outputFile is an output file the user named (--trace), opened before
// anything is written and truncated only once every output has opened.
type outputFile struct {
	path    string
	f       *os.File
	created bool
}

// openOutput opens path for writing without changing it. Non-blocking, so
// a FIFO without a reader is an error rather than a hang. An existing
// regular file is only ever replaced when it is an escapement trace (an
// older run's): anything else (a session file named by mistake, notes) is
// the user's data and refused.
func openOutput(path string) (*outputFile, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return nil, fmt.Errorf("%s is a directory; name a file", path)
	} else if err == nil && st.Mode().IsRegular() && st.Size() > 0 && !startsWith(path, traceHeaderPrefix) {
		return nil, fmt.Errorf("%s exists and is not an escapement trace; name a new file (or remove it)", path)
	}
	o := &outputFile{path: path}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NONBLOCK, 0o644)
	if err == nil {
		o.f, o.created = f, true
		return o, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	if o.f, err = os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err != nil {
		return nil, err
	}
	return o, nil
}

// commit empties an existing regular file (the trace replaces it).
func (o *outputFile) commit() error {
	if st, err := o.f.Stat(); err != nil || !st.Mode().IsRegular() || o.created {
		return err
	}
	return o.f.Truncate(0)
}

// discard closes the file and removes it if this run created it.
func (o *outputFile) discard() {
	o.f.Close()
	if o.created {
		os.Remove(o.path)
	}
}

// redactingWriter passes every write through redact. Its writers write
// whole records (a trace line per step, a JSON line per event), so a
// secret is never split across two writes.
type redactingWriter struct {
	w      io.Writer
	redact func(string) string
}

func (r redactingWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(r.w, r.redact(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}
