package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/escapement/escapement/adapters/wal"
	"github.com/escapement/escapement/kernel"
)

// After a crash the session file and its write-ahead log can disagree on
// how far the run got, and every way a power cut can leave them is
// recovered here (docs/durable.md). The writes are ordered so that the
// session can only lag the log: the log's header is fsynced before the
// session file gets a record the log covers, and the log is fsynced before
// every session record (sessionWriter.logSync). So after a power cut:
//
//   - the session lags the log (its unsynced tail lost, maybe torn): the
//     records it lacks are derived from the log and appended (recoverRun);
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
func (lr *liveRun) reconcile(path string, l *wal.Log, data []byte, offset int64, want []byte, idle bool) (missing []byte, resubmit string, err error) {
	tail := data[offset:]
	whole := tail[:bytes.LastIndexByte(tail, '\n')+1]
	switch {
	case bytes.HasPrefix(want, tail):
		return want[len(tail):], "", nil
	case bytes.HasPrefix(want, whole):
		// A torn last record (only a power cut tears one): cut it off,
		// keeping the original bytes aside as a plain resume does.
		backup, err := setAsideUnfinished(path, &loadedSession{data: data, keep: offset + int64(len(whole))}, time.Now())
		if err != nil {
			return nil, "", err
		}
		lr.say("%s: dropped a torn last line; the original file is kept as %s", path, backup)
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
	backup, err := setAsideUnfinished(path, &loadedSession{data: data, keep: offset + int64(len(want))}, time.Now())
	if err != nil {
		return nil, "", err
	}
	what := "the turn goes on from the log"
	if idle && prompt != "" {
		resubmit, what = prompt, "the log lost the turn's start: its prompt is submitted again"
	}
	lr.say("%s held records its log %s lost (a power cut); they are cut off, the original file is kept as %s; %s", path, l.Name, backup, what)
	return nil, resubmit, nil
}

// lostTurn reads session records the log does not explain: the first user
// message among them (the prompt of a turn the log lost) and how many
// turns they end.
func lostTurn(records []byte) (prompt string, ends int, err error) {
	for ln := range bytes.Lines(records) {
		var r sessionRecord
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

// scheduleResubmit makes text the prompt of the next turn, submitted as
// soon as the driver runs (submitLost); the run's command sees that turn
// as running from the start, as a recovered one.
func (lr *liveRun) scheduleResubmit(text string, turn uint64) {
	if text == "" {
		return
	}
	lr.resubmit = text
	lr.state.mu.Lock()
	lr.state.busy, lr.state.turn = true, turn
	lr.state.mu.Unlock()
}

// submitLost submits the prompt a recovery scheduled (scheduleResubmit),
// once the driver runs.
func (lr *liveRun) submitLost(ctx context.Context) {
	text := lr.resubmit
	if text == "" {
		return
	}
	lr.resubmit = ""
	if err := lr.driver.Submit(ctx, text); err != nil {
		lr.say("the lost turn's prompt could not be submitted again: %v", err)
		lr.state.mu.Lock()
		lr.state.busy = false
		lr.state.ended++ // the command stops waiting for it
		lr.state.mu.Unlock()
		select {
		case lr.notify <- struct{}{}:
		default:
		}
	}
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
