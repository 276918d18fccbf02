package session

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/escapement/escapement/adapters/ports"
)

// Spans is a span export that follows a session's run: adapters/otel's
// Exporter (docs/otel.md), or anything that derives spans from the steps.
// It sees every step as Config.Observer does and — when the session
// recovers a crashed run — first every step the run's write-ahead log
// replays, so the spans the crashed process left open are ended by this
// one, under their own ids. The session owns it from Start on: a failed
// Start and Close shut it down, Sync and Abandon (a host about to exit
// without waiting for the driver) send what has ended.
type Spans interface {
	// SetConversation names the conversation the spans belong to
	// (gen_ai.conversation.id): the session's (Conversation), the same
	// for every run of it. Called once, before the first Observe.
	SetConversation(id string)
	// SetCrashTime says when the crashed process stopped (its log's last
	// write): called before Replay, in a recovered run only.
	SetCrashTime(t time.Time)
	// Replay derives a step the crashed run's log replays; what that run
	// ended it sent itself, so nothing is sent.
	Replay(st ports.Step)
	// Observe derives and sends the spans of one step, on the kernel's
	// goroutine: it must not block.
	Observe(st ports.Step)
	// Flush sends what has ended so far, waiting at most until ctx ends.
	Flush(ctx context.Context) error
	// Shutdown sends what has ended and stops the export.
	Shutdown(ctx context.Context) error
}

// How long the session waits for its spans to be sent: when the run ends
// (every span has ended: the tree is quiescent), and when the host is
// about to exit at once — the spans still open are then left to the run
// that recovers this one from its log.
const (
	spansStopBound  = 5 * time.Second
	spansFlushBound = 250 * time.Millisecond
)

// spansReplay hands a step the recovery replays to the span export.
func (s *Session) spansReplay(st ports.Step) {
	if s.opts.Spans != nil {
		s.opts.Spans.Replay(st)
	}
}

// spansCrashedAt tells the span export when the process whose log is at
// path stopped: the log's last write.
func (s *Session) spansCrashedAt(path string) {
	if s.opts.Spans == nil {
		return
	}
	if st, err := os.Stat(path); err == nil {
		s.opts.Spans.SetCrashTime(st.ModTime())
	}
}

// spansStarted names the conversation once the session file has its
// header.
func (s *Session) spansStarted() {
	if s.opts.Spans != nil {
		s.opts.Spans.SetConversation(Conversation(s.path))
	}
}

// stopSpans sends the spans ended so far and stops the export, waiting at
// most spansStopBound; a failure is told (Config.Notice), never the run's:
// the run did what it did whether or not its spans got out.
func (s *Session) stopSpans() {
	if s.opts.Spans == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), spansStopBound)
	defer cancel()
	if err := s.opts.Spans.Shutdown(ctx); err != nil {
		s.notice("%v", err)
	}
}

// flushSpans is a host's that exits at once: the spans ended so far go out
// if they can within spansFlushBound.
func (s *Session) flushSpans() {
	if s.opts.Spans == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), spansFlushBound)
	defer cancel()
	if err := s.opts.Spans.Flush(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		s.notice("%v", err)
	}
}

// Conversation is the gen_ai.conversation.id of the session kept at path:
// 32 hex digits of a hash of its absolute path and its header line, so a
// resumed or recovered run goes on in the same conversation; random for a
// session kept nowhere (/dev/null, "").
func Conversation(path string) string {
	if id, ok := fileConversation(path); ok {
		return id
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// fileConversation is the conversation of the regular file at path.
func fileConversation(path string) (string, bool) {
	abs, err := filepath.Abs(path)
	if path == "" || err != nil {
		return "", false
	}
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return "", false
	}
	header, _, _ := bufio.NewReaderSize(f, 4096).ReadLine()
	sum := sha256.Sum256([]byte(abs + "\n" + string(header)))
	return hex.EncodeToString(sum[:16]), true
}
