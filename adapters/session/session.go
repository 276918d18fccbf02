package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/wal"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
)

// ErrExists is wrapped by Create's refusal of a file that already holds a
// session (appending would splice two histories together): Resume it, or
// name a new file.
var ErrExists = errors.New("the file already holds a session")

// Config is what a session's run is built from (Start).
type Config struct {
	// Kernel configures a new or cleanly resumed tree (Seed puts the
	// resumed history in it); a tree recovered from a crashed run's log
	// has the configuration the log recorded, and Kernel is ignored.
	Kernel kernel.Config
	// Model and Tools are the driver's (required).
	Model ports.Model
	Tools ports.Tools
	// ModelName is recorded in a new file's header.
	ModelName string
	// Observer, when set, sees every Step after the session has recorded
	// it, on the kernel's goroutine (live.Config.Observer).
	Observer func(ports.Step)
	// Policy, when set, decides calls that wait for approval on the
	// host's behalf (live.Config.Policy): the requests of a recovered
	// run's waits included, which the recovery asks again.
	Policy live.Policy
	// Spans, when set, derives the run's spans and exports them
	// (adapters/otel.Exporter; docs/otel.md): it sees every step the
	// Observer sees, and a recovery's replayed steps before them. The
	// session owns it from Start on (Spans says how it ends it).
	Spans Spans
	// Trace, when set, receives the run's kernel trace (kernel/trace
	// format, redacted): a header when the run starts — a recovered run's
	// is the log's, followed by the replayed steps — and every step after.
	Trace io.Writer
	// Redact is applied to every record written — the session file, its
	// write-ahead log, the trace — and to nothing else; nil writes as is.
	// A live run that keeps secrets from the kernel redacts at its edge
	// as well (the CLI does: docs/durable.md, "Secrets").
	Redact func(string) string
	// Notice receives, one sentence at a time, what the session tells its
	// user: what a resume dropped or set aside (and where the original
	// is kept), what a recovery replayed and continues, that the session
	// file failed and is no longer written. nil drops them.
	Notice func(string)
	// WrapFile and WrapLog, when set, wrap the writes of the session file
	// and of its write-ahead log (tests inject a disk that fills up). A
	// wrapper that has a Sync method is synced instead of the file.
	WrapFile, WrapLog func(io.Writer) io.Writer
}

// Unfinished is a turn the session's last run left unfinished, which this
// run takes up.
type Unfinished struct {
	// Turn is the root's turn number.
	Turn uint64
	// Prompt is set when the log lost the turn's start (a power cut):
	// the host submits it again once the driver runs (Resubmit). Empty:
	// the driver continues the turn by itself (kernel.Recover).
	Prompt string
}

// Session is a durable live session: a driver whose root transcript is
// kept in a session file, with a write-ahead log beside it, under a lock.
// Create or Resume one, Start it, run its Driver, and Close it.
type Session struct {
	path     string
	opts     Config
	lock     *Lock
	loaded   *Loaded  // a resumed file (nil for a new session or a crashed run)
	crashed  *wal.Log // the log of a run that died, beside the resumed file
	headless string   // what became of a log without a header beside it

	driver     *live.Driver
	file       *fileWriter
	log        *wal.Writer // nil without a log (/dev/null)
	logF       *os.File
	logPath    string
	trace      *trace.Writer
	unfinished *Unfinished
	closed     bool

	// prior is the usage the file's turns recorded before this run.
	prior kernel.Usage

	// Kernel goroutine only.
	written int // root messages already in the session file
	// usage is what a root request's end reported in the Step being
	// persisted, and usageAt the index of the message it appended (-1).
	usage     *kernel.Usage
	usageAt   int
	fileLost  bool // the session file failed and the user was told
	traceLost bool // the trace failed and the user was told
}

// Create prepares a new session at path (its symlinks resolved, Resolve).
// It refuses a directory and a file that holds anything (ErrExists when
// that is a session); an empty file, a character device (/dev/null: no
// transcript kept) and a path that does not exist yet are fine. Nothing is
// written until Start.
func Create(path string) (*Session, error) {
	real, err := Resolve(path)
	if err != nil {
		return nil, err
	}
	if err := checkNew(real); err != nil {
		return nil, err
	}
	return &Session{path: real}, nil
}

// checkNew refuses a path a new session must not write.
func checkNew(path string) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case st.IsDir():
		return fmt.Errorf("%s is a directory; name a file", path)
	case st.Mode()&fs.ModeCharDevice != 0, st.Mode().IsRegular() && st.Size() == 0:
		return nil
	case !st.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file (or a character device such as /dev/null)", path)
	case isSessionFile(path):
		return fmt.Errorf("%s: %w", path, ErrExists)
	}
	return fmt.Errorf("%s is not empty and not an escapement session; name a new file", path)
}

// Resume locks the session at path (its symlinks resolved) and reads it:
// the write-ahead log a crashed run left beside it, if any (Start then
// recovers that run), else the file (its unfinished turn, if any, is cut
// off at Start, the original kept). Nothing of the file is read before the
// lock is held. Call Release if the session is not started.
func Resume(path string) (*Session, error) {
	real, err := Resolve(path)
	if err != nil {
		return nil, err
	}
	s := &Session{path: real}
	if keepsLog(real) {
		if s.lock, err = TakeLock(real); err != nil {
			return nil, err
		}
	}
	if s.crashed, s.headless, err = crashedLog(real); err != nil {
		s.Release()
		return nil, err
	}
	if s.crashed == nil {
		if s.loaded, err = Load(real); err != nil {
			s.Release()
			return nil, err
		}
	}
	return s, nil
}

// Seed puts what a resumed file holds into cfg: its complete turns'
// history, the number of the last turn, and the session grants those
// turns made. A new session and a crashed run's (whose configuration is
// its log's) leave cfg as it is.
func (s *Session) Seed(cfg *kernel.Config) {
	if s.loaded != nil {
		cfg.History, cfg.Turns, cfg.Grants = s.loaded.History, s.loaded.Last, s.loaded.Grants
		s.prior = s.loaded.Usage
	}
}

// PriorUsage is the usage the session file's turns recorded before this
// run (after Start; the turns a recovery replayed included): with this
// run's, the session's total (chat's /usage).
func (s *Session) PriorUsage() kernel.Usage { return s.prior }

// Path is the session file (symlinks resolved).
func (s *Session) Path() string { return s.path }

// Driver is the session's driver once Start has succeeded: run it (Run),
// send it input, and Close the session once Run has returned.
func (s *Session) Driver() *live.Driver { return s.driver }

// Unfinished reports the turn the last run left unfinished, which this run
// takes up (after Start).
func (s *Session) Unfinished() (Unfinished, bool) {
	if s.unfinished == nil {
		return Unfinished{}, false
	}
	return *s.unfinished, true
}

// Resubmit submits the prompt of an unfinished turn whose start the log
// lost (Unfinished.Prompt), once; call it once the driver runs. Nothing to
// submit is nil.
func (s *Session) Resubmit(ctx context.Context) error {
	u := s.unfinished
	if u == nil || u.Prompt == "" {
		return nil
	}
	text := u.Prompt
	u.Prompt = ""
	if err := s.driver.Submit(ctx, text); err != nil {
		return fmt.Errorf("the lost turn's prompt could not be submitted again: %w", err)
	}
	return nil
}

// notice tells the user something (Config.Notice).
func (s *Session) notice(format string, args ...any) {
	if s.opts.Notice != nil {
		s.opts.Notice(fmt.Sprintf(format, args...))
	}
}

// Start writes what the session starts with and builds its driver: a
// crashed run is recovered from its log (recover.go); a resumed file has
// its unfinished turn cut off (the original kept as FILE.torn-<time>); a
// new file is locked and gets its header; then the trace's header, the
// write-ahead log, and the driver. On failure everything Start opened is
// closed again (the lock is kept: Release).
func (s *Session) Start(cfg Config) (err error) {
	if cfg.Model == nil || cfg.Tools == nil {
		return errors.New("session: Config.Model and Config.Tools are required")
	}
	s.opts = cfg
	defer func() {
		if err != nil {
			s.abort()
		}
	}()
	if s.crashed != nil {
		err = s.recover(cfg)
		if ls, lerr := Load(s.path); err == nil && lerr == nil {
			s.prior = ls.Usage // the replayed turns' included
		}
	} else {
		err = s.startNew(cfg)
	}
	if err == nil {
		s.spansStarted()
	}
	return err
}

// startNew starts a run from the session file: a resumed one or a new one.
func (s *Session) startNew(cfg Config) error {
	if err := s.openFile(cfg.ModelName); err != nil {
		return err
	}
	s.Seed(&cfg.Kernel)
	if err := s.startTrace(cfg); err != nil {
		return err
	}
	if err := s.startLog(cfg.Kernel); err != nil {
		return fmt.Errorf("write-ahead log: %w", err)
	}
	return s.newDriver(cfg)
}

// openFile opens the session file for a run that starts from it: a resumed
// file, its unfinished turn set aside first, or a new one, locked.
func (s *Session) openFile(model string) (err error) {
	if s.loaded == nil {
		if err := s.lockNew(); err != nil {
			return err
		}
		s.file, err = createFile(s.path, model, s.opts.Redact, s.opts.WrapFile)
		return err
	}
	if err := s.setAsideUnfinished(); err != nil {
		return err
	}
	s.file, err = appendFile(s.path, s.opts.Redact, s.opts.WrapFile)
	return err
}

// lockNew locks a new session file at path, making its directory (0700,
// as a state directory should be); a session on a device (/dev/null) needs
// no lock.
func (s *Session) lockNew() (err error) {
	if !keepsLog(s.path) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return fmt.Errorf("session %s: %w", s.path, err)
	}
	s.lock, err = TakeLock(s.path)
	return err
}

// setAsideUnfinished cuts a resumed file's unfinished turn off, says so,
// and, when the log of that turn was lost with its header, makes its prompt
// the next turn's (Unfinished).
func (s *Session) setAsideUnfinished() error {
	ls := s.loaded
	if ls.Unfinished() {
		backup, err := setAsideUnfinished(s.path, ls, time.Now())
		if err != nil {
			return err
		}
		what := fmt.Sprintf("%d message(s) of a turn that never finished", len(ls.Pending))
		if ls.Torn {
			what += " and a torn last line"
		}
		s.notice("%s: dropped %s; the original file is kept as %s", s.path, what, backup)
	}
	if s.headless == "" {
		return nil
	}
	s.notice("%s", s.headless)
	if prompt := firstPrompt(ls.Pending); ls.Unfinished() && prompt != "" {
		// The log of the unfinished turn was lost with its header: the
		// turn starts again from its prompt.
		s.unfinished = &Unfinished{Turn: ls.Last + 1, Prompt: prompt}
	}
	return nil
}

// startTrace writes the trace's header, at once.
func (s *Session) startTrace(cfg Config) error {
	if cfg.Trace == nil {
		return nil
	}
	hdr := trace.HeaderOf(cfg.Kernel)
	if hdr.RootName == "" {
		hdr.RootName = "main"
	}
	hdr.Source, hdr.Name, hdr.Build = "live", s.path, buildName()
	s.trace = trace.NewWriter(redacting(cfg.Trace, s.opts.Redact), hdr)
	if err := s.trace.Flush(); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	return nil
}

// newDriver builds the driver of a run that starts from its file.
func (s *Session) newDriver(cfg Config) (err error) {
	dcfg := live.Config{Kernel: cfg.Kernel, Model: cfg.Model, Tools: cfg.Tools, Observer: s.observe, Policy: cfg.Policy}
	if s.log != nil {
		dcfg.WriteAhead = s.log.Record
	}
	if s.driver, err = live.New(dcfg); err != nil {
		return err
	}
	if s.loaded != nil && len(s.loaded.History) > 0 {
		// The file holds the resumed messages, the end of the root's
		// starting history; what the kernel put before them (a system
		// prompt) cannot follow them in the file, so it counts as
		// written. A resumed file without messages gets the starting
		// history like a new session.
		s.written = len(s.driver.Kernel().Agent(kernel.Root).History())
	}
	return nil
}

// abort closes what a failed Start opened, and stops the span export.
func (s *Session) abort() {
	s.stopSpans()
	if s.file != nil {
		s.file.close()
	}
	if s.logF != nil {
		s.logF.Close()
	}
	s.driver = nil
}

// Sync makes what was written durable — the session file and the log — from
// any goroutine, while the driver runs: what a host does before it exits
// at once (a second Ctrl-C). The log stays for the next Resume. The spans
// ended so far are sent, if they can be within a moment.
func (s *Session) Sync() {
	s.flushSpans()
	if s.file != nil {
		s.file.sync()
	}
	if s.logF != nil {
		_ = s.logF.Sync() // safe beside the kernel goroutine's writes
	}
}

// Abandon closes the session file (synced, nothing written after) while the
// driver may still run — a host that exits without waiting for it — and
// reports the file's first error. The log stays for the next Resume, and
// the lock is kept until Release or the process's exit. The spans ended so
// far are sent, if they can be within a moment; those still open are left
// to the run that recovers this one.
func (s *Session) Abandon() error {
	s.flushSpans()
	if s.file == nil {
		return nil
	}
	return s.file.close()
}

// Failed is the session file's first write error, if any (the run goes on
// without a transcript from there; Close reports it too).
func (s *Session) Failed() error {
	if s.file == nil {
		return nil
	}
	return s.file.failed()
}

// Close ends the session once its driver's Run has returned runErr: it
// writes the trace's end, closes the session file and the log — the log is
// removed when the run ended cleanly (runErr nil and the file whole), else
// kept for the next Resume — sends the spans (Config.Spans) and stops
// their export, and releases the lock. It returns the first error.
func (s *Session) Close(runErr error) error {
	if s.closed {
		return nil
	}
	s.closed = true
	defer s.Release()
	var err error
	if s.trace != nil {
		if _, terr := s.trace.Close(s.driver.Kernel().Now()); terr != nil {
			err = fmt.Errorf("trace: %w", terr)
		}
	}
	ferr := s.file.close()
	if err == nil {
		err = ferr
	}
	// The log goes only when everything it holds is in the session file;
	// otherwise the next Resume recovers from it.
	if lerr := s.closeLog(runErr == nil && ferr == nil); lerr != nil && err == nil {
		err = fmt.Errorf("write-ahead log: %w", lerr)
	}
	s.stopSpans()
	return err
}

// Release lets go of the session's lock (Close does); safe to call more
// than once.
func (s *Session) Release() { s.lock.Release() }
