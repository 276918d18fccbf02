package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/wal"
	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/internal/userfile"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
)

// After a crash the session file and its write-ahead log can disagree on
// how far the run got, and every way a power cut can leave them is
// recovered here (docs/durable.md). The writes are ordered so that the
// session can only lag the log: the log's header is fsynced before the
// session file gets a record the log covers, and the log is fsynced before
// every session record (fileWriter.logSync). So after a power cut:
//
//   - the session lags the log (its unsynced tail lost, maybe torn): the
//     records it lacks are derived from the log and appended (recover);
//   - the log has no header (the cut came while it was being created):
//     nothing was recorded in it; it is set aside and the session resumes
//     alone — and its unfinished turn, if it has one (it cannot, with the
//     order above), is started again from its prompt;
//   - the session is ahead of the log — impossible with the order above,
//     but a file system that wrote the two back differently, or a log cut
//     by hand, must not lose the user's prompt either: the records the log
//     does not explain are cut off the session (the original kept as
//     FILE.torn-<time>), the run goes on from the log, and if the log lost
//     the prompt of the turn the session had begun, that prompt is
//     submitted again. A session ahead by whole turns is refused: the log
//     is then not this session's record.

// setAsideHeadless deals with a log that has no header line: an empty one
// is removed, anything else is kept as FILE.wal.torn-<time>. It returns
// what it did, for the user.
func setAsideHeadless(path string, now time.Time) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.Size() == 0 {
		if err := os.Remove(path); err != nil {
			return "", err
		}
		return "it was empty and is removed", nil
	}
	aside := path + ".torn-" + now.UTC().Format("20060102T150405Z")
	if err := os.Rename(path, aside); err != nil {
		return "", err
	}
	return "it is kept as " + aside, nil
}

// reconcile brings the session file at path in line with its log. data is
// the file, offset where the log began in it, want the records the log
// derives after offset (what the live observer wrote), idle whether the
// rebuilt root is between turns. It returns the records to append (the
// session lagged), or cuts the session back (it was ahead), and names the
// prompt to submit again when the log lost the turn the session began.
func (s *Session) reconcile(l *wal.Log, data []byte, offset int64, want []byte, idle bool) (missing []byte, resubmit string, err error) {
	path := s.path
	tail := data[offset:]
	whole := tail[:bytes.LastIndexByte(tail, '\n')+1]
	switch {
	case bytes.HasPrefix(want, tail):
		return want[len(tail):], "", nil
	case bytes.HasPrefix(want, whole):
		// A torn last record (only a power cut tears one): cut it off,
		// keeping the original bytes aside as a plain resume does.
		backup, err := setAsideUnfinished(path, &Loaded{data: data, keep: offset + int64(len(whole))}, time.Now())
		if err != nil {
			return nil, "", err
		}
		s.notice("%s: dropped a torn last line; the original file is kept as %s", path, backup)
		return want[len(whole):], "", nil
	case !bytes.HasPrefix(whole, want):
		n := 0
		for n < len(want) && n < len(tail) && want[n] == tail[n] {
			n++
		}
		return nil, "", fmt.Errorf("%s and its write-ahead log %s disagree from byte %d of the session file on; move %s away to resume from the session file alone (the unfinished turn is then set aside)", path, l.Name, offset+int64(n), l.Name)
	}
	extra := whole[len(want):]
	prompt, ends, err := lostTurn(extra)
	if err != nil {
		return nil, "", fmt.Errorf("%s: after byte %d: %w", path, offset+int64(len(want)), err)
	}
	if ends > 0 {
		return nil, "", fmt.Errorf("%s holds %d turn(s) its write-ahead log %s does not: the log is not this session's record; move %s away to resume from the session file alone", path, ends, l.Name, l.Name)
	}
	backup, err := setAsideUnfinished(path, &Loaded{data: data, keep: offset + int64(len(want))}, time.Now())
	if err != nil {
		return nil, "", err
	}
	what := "the turn goes on from the log"
	if idle && prompt != "" {
		resubmit, what = prompt, "the log lost the turn's start: its prompt is submitted again"
	}
	s.notice("%s held records its log %s lost (a power cut); they are cut off, the original file is kept as %s; %s", path, l.Name, backup, what)
	return nil, resubmit, nil
}

// lostTurn reads session records the log does not explain: the first user
// message among them (the prompt of a turn the log lost) and how many
// turns they end.
func lostTurn(records []byte) (prompt string, ends int, err error) {
	for ln := range bytes.Lines(records) {
		var r Record
		if err := json.Unmarshal(ln, &r); err != nil {
			return "", 0, fmt.Errorf("not a session record: %v", err)
		}
		switch {
		case r.Type == "turn_end":
			ends++
		case r.Message != nil && r.Message.Role == kernel.RoleUser && prompt == "":
			prompt = r.Message.Content
		}
	}
	return prompt, ends, nil
}

// firstPrompt is the first user message of msgs ("" when none).
func firstPrompt(msgs []kernel.Message) string {
	for _, m := range msgs {
		if m.Role == kernel.RoleUser {
			return m.Content
		}
	}
	return ""
}

// syncLog makes the log at path durable before anything derived from it is
// written (a resume's catch-up of the session file): the crashed process
// may have died before its last records reached the disk.
func syncLog(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	return nil
}

// recover sets s up to continue the run the crashed process logged in
// s.crashed. The log is replayed into a fresh kernel (every step checked
// against its record) while the session records the run would have
// written are derived from the replayed steps, exactly as the live
// observer writes them; the session file must hold a prefix of them after
// the offset the log recorded (it is written after the log, so it can only
// lag), and the rest is appended. A trace, if asked for, gets the log's
// header and every replayed step, so it replays from its own header. Then
// the driver runs on the rebuilt kernel: its first step is kernel.Recover.
func (s *Session) recover(cfg Config) error {
	l := s.crashed
	data, offset, err := s.fileBeside(l)
	if err != nil {
		return err
	}
	want, traced, k, err := s.replay(l, cfg.Trace != nil)
	if err != nil {
		return err
	}
	root := k.Agent(kernel.Root)
	missing, resubmit, err := s.reconcile(l, data, offset, want, root.State() == fsm.Idle)
	if err != nil {
		return err
	}
	if err := s.continueTrace(cfg.Trace, l, traced); err != nil {
		return err
	}
	if err := s.catchUp(l, missing); err != nil {
		return err
	}
	if err := s.resumeDriver(l, k, cfg); err != nil {
		return err
	}
	s.noteRecovery(l, root, resubmit)
	return nil
}

// fileBeside reads the session file the log l was written beside, and where
// it stood when the log began.
func (s *Session) fileBeside(l *wal.Log) (data []byte, offset int64, err error) {
	offset, err = strconv.ParseInt(l.Header.Options[OffsetOption], 10, 64)
	if err != nil || offset < 0 {
		return nil, 0, fmt.Errorf("%s:1: the header does not say where the session file stood when the log began", l.Name)
	}
	data, err = userfile.Read(s.path, MaxBytes)
	if err != nil {
		return nil, 0, err
	}
	if int64(len(data)) < offset || !isSessionData(data) {
		return nil, 0, fmt.Errorf("%s is not the session file its write-ahead log %s was written beside (it is shorter than when the log began, or not a session); move %s away to resume from the session file alone", s.path, l.Name, l.Name)
	}
	return data, offset, nil
}

// nopSyncer is the catch-up's in-memory session: nothing to sync.
type nopSyncer struct{}

func (nopSyncer) Sync() error { return nil }

// replay rebuilds the kernel from l, deriving the session records its run
// wrote (want) and, when traced is asked for, its trace; the span export
// derives every replayed step.
func (s *Session) replay(l *wal.Log, withTrace bool) (want, traced []byte, k *kernel.Kernel, err error) {
	var mem, tbuf bytes.Buffer
	s.file = &fileWriter{path: s.path, w: &mem, syncer: nopSyncer{}, redact: s.opts.Redact}
	if len(l.Header.History) > 0 {
		// As for any resumed session: the seeded history is in the file.
		k0, err := kernel.New(l.Header.Config())
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s:1: %w", l.Name, err)
		}
		s.written = len(k0.Agent(kernel.Root).History())
	}
	var tw *trace.Writer
	if withTrace {
		hdr := l.Header
		hdr.Name, hdr.Build = s.path, buildName()
		tw = trace.NewWriter(redacting(&tbuf, s.opts.Redact), hdr)
	}
	l.Redact = s.opts.Redact // the log's lines were written through it
	s.spansCrashedAt(l.Name)
	k, err = l.Rebuild(func(st ports.Step) {
		s.spansReplay(st)
		s.persist(st)
		if tw != nil {
			tw.Step(st.Kernel, st.Event, st.Target, st.Before, st.Effects)
			tw.Flush()
		}
	})
	if err == nil {
		err = s.file.failed()
	}
	return mem.Bytes(), tbuf.Bytes(), k, err
}

// continueTrace writes the replayed trace to out and goes on writing there.
func (s *Session) continueTrace(out io.Writer, l *wal.Log, traced []byte) error {
	if out == nil {
		return nil
	}
	if _, err := out.Write(traced); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	s.trace = trace.ContinueWriter(redacting(out, s.opts.Redact), l.Steps())
	return nil
}

// catchUp opens the session file for appending and appends the records it
// lacks, the log made durable first: the crashed process may have died
// before its last records reached the disk.
func (s *Session) catchUp(l *wal.Log, missing []byte) error {
	f, err := appendFile(s.path, s.opts.Redact, s.opts.WrapFile)
	if err != nil {
		s.file = nil
		return err
	}
	s.file = f
	if len(missing) == 0 {
		return nil
	}
	f.logSync = func() error { return syncLog(l.Name) }
	f.writeRaw(missing)
	f.sync()
	return f.failed()
}

// resumeDriver reopens the log for appending and starts a driver on k
// that records through it.
func (s *Session) resumeDriver(l *wal.Log, k *kernel.Kernel, cfg Config) error {
	w, f, err := l.Reopen(s.logWrap())
	if err != nil {
		return err
	}
	d, err := live.Resume(live.Config{Model: cfg.Model, Tools: cfg.Tools, Observer: s.observe, Policy: cfg.Policy, WriteAhead: w.Record}, k)
	if err != nil {
		f.Close()
		return err
	}
	s.driver, s.log, s.logF, s.logPath = d, w, f, l.Name
	s.file.logSync = w.Sync
	return nil
}

// noteRecovery records and says what the recovery found: the turn the
// driver continues, the prompt to submit again, or nothing lost.
func (s *Session) noteRecovery(l *wal.Log, root kernel.AgentView, resubmit string) {
	switch {
	case resubmit != "":
		s.unfinished = &Unfinished{Turn: root.Turn() + 1, Prompt: resubmit}
		s.notice("%s: the last run's turn %d is started again from its prompt (%d events replayed)", s.path, root.Turn()+1, l.Steps())
	case root.State() != fsm.Idle:
		s.unfinished = &Unfinished{Turn: root.Turn()}
		s.notice("%s: the last run stopped in the middle of turn %d; continuing it from %s (%d events replayed)", s.path, root.Turn(), l.Name, l.Steps())
	default:
		s.notice("%s: the last run stopped between turns; its log %s is replayed (%d events) and nothing was lost", s.path, l.Name, l.Steps())
	}
}

// isSessionData reports whether data starts with a session header line.
func isSessionData(data []byte) bool {
	line, _, _ := bytes.Cut(data, []byte("\n"))
	return bytes.HasPrefix(line, []byte(`{"type":"session"`))
}
