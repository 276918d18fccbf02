package session

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

var fileLineRE = regexp.MustCompile(`^(.+):(\d+): `)

// TestResumeTruncatedAtEveryOffset is the property of resuming a damaged
// session: a real multi-turn session (tool calls, an interrupted turn, an
// interjection) is cut at every byte offset, and resuming each cut either
// loads exactly the complete turns in it or refuses with file:line; it
// never panics, never loses a complete record (what it cuts off is kept,
// byte for byte, in the FILE.torn-* it names), and never changes the
// file without that backup.
func TestResumeTruncatedAtEveryOffset(t *testing.T) {
	full := recordRealSession(t)
	if turns := strings.Count(string(full), `"type":"turn_end"`); turns < 3 {
		t.Fatalf("the recorded session has %d turns, want several:\n%s", turns, full)
	}
	if n := strings.Count(string(full), `"type":"compaction"`); n != 1 {
		t.Fatalf("the recorded session has %d compaction records, want 1:\n%s", n, full)
	}
	// The records of the full file, with the offset each one's last byte
	// ends at (before its newline).
	var recs []sessionRecordAt
	off := 0
	for _, line := range strings.SplitAfter(string(full), "\n") {
		if strings.TrimSpace(line) != "" {
			var r Record
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("the recorded session has a bad line %q", line)
			}
			recs = append(recs, sessionRecordAt{end: off + len(strings.TrimRight(line, "\n")), r: r})
		}
		off += len(line)
	}
	dir := scratchDir(t)
	for k := 0; k <= len(full); k++ {
		checkResumeCut(t, filepath.Join(dir, "s.jsonl"), full[:k], recs)
	}
}

type sessionRecordAt struct {
	end int
	r   Record
}

// checkResumeCut resumes cut (a prefix of the session whose records are
// recs) at path and checks the property; it leaves no file behind.
func checkResumeCut(t *testing.T, path string, cut []byte, recs []sessionRecordAt) {
	t.Helper()
	k := len(cut)
	if err := os.WriteFile(path, cut, 0o600); err != nil {
		t.Fatal(err)
	}
	// What the cut holds: its complete records, and the committed history.
	// A compaction record replaces the history from there on, once its
	// turn has ended.
	var want, pending []kernel.Message
	complete, header, compacted, unfinished := 0, false, false, false
	for _, r := range recs {
		if r.end > k {
			break
		}
		complete++
		switch r.r.Type {
		case "session":
			header = true
		case "message":
			pending, unfinished = append(pending, *r.r.Message), true
		case "compaction":
			pending, compacted, unfinished = append([]kernel.Message(nil), r.r.History...), true, true
		case "turn_end":
			if compacted {
				want = nil
			}
			want, pending, compacted, unfinished = append(want, pending...), nil, false, false
		}
	}
	ls, err := prepareResumeForTest(path, time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	after, _ := os.ReadFile(path)
	backups, _ := filepath.Glob(path + ".torn-*")
	for _, f := range append(backups, path) {
		defer os.Remove(f)
	}
	if err != nil {
		if !fileLineRE.MatchString(err.Error()) || !strings.HasPrefix(err.Error(), path+":") {
			t.Fatalf("offset %d: refused without file:line: %v", k, err)
		}
		if header {
			t.Fatalf("offset %d: a cut with its header and %d complete record(s) refused: %v", k, complete, err)
		}
		if !bytes.Equal(after, cut) || len(backups) != 0 {
			t.Fatalf("offset %d: a refused file was changed", k)
		}
		return
	}
	if !header {
		t.Fatalf("offset %d: accepted a file without its header", k)
	}
	if !equalHistories(ls.History, want) {
		t.Fatalf("offset %d: resumed %d message(s), want the %d of the complete turns", k, len(ls.History), len(want))
	}
	switch {
	case bytes.Equal(after, cut):
		if len(backups) != 0 {
			t.Fatalf("offset %d: a backup of an unchanged file", k)
		}
		if unfinished {
			t.Fatalf("offset %d: %d message(s) of the unfinished turn left in the file", k, len(pending))
		}
	case len(backups) != 1:
		t.Fatalf("offset %d: the file changed with %d backup(s)", k, len(backups))
	default:
		orig, _ := os.ReadFile(backups[0])
		if !bytes.Equal(orig, cut) {
			t.Fatalf("offset %d: the backup does not hold the original bytes", k)
		}
		if !bytes.HasPrefix(cut, after) || int64(len(after)) != ls.keep {
			t.Fatalf("offset %d: the file is not the original up to its last complete turn", k)
		}
	}
}

// prepareResumeForTest is what Resume and Start do to a file before the
// session runs: load it and, when it ends in an unfinished turn, set that aside.
func prepareResumeForTest(path string, now time.Time) (ls *Loaded, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
			panic(err)
		}
	}()
	if ls, err = Load(path); err != nil {
		return nil, err
	}
	if ls.Unfinished() {
		if _, err := setAsideUnfinished(path, ls, now); err != nil {
			return nil, err
		}
	}
	return ls, nil
}

// scratchDir is a directory for many small files that are synced: on
// tmpfs when there is one (fsync is free there; the property is about which
// bytes end up where, not about the disk), else the test's temp dir.
func scratchDir(t *testing.T) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "escapement-resume-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

func equalHistories(a, b []kernel.Message) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return len(a) == len(b) && bytes.Equal(ja, jb)
}

// recordRealSession runs a session through its driver — a tool call, a
// turn cancelled mid-stream, an interjection into a streaming answer, a
// compaction on demand and a turn after it — in virtual time, and returns
// its session file.
func recordRealSession(t *testing.T) []byte {
	t.Helper()
	var data []byte
	synctest.Test(t, func(t *testing.T) {
		model := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			last := req.Messages[len(req.Messages)-1]
			switch {
			case last.Role == kernel.RoleTool:
				sink.Text("the directory holds " + last.Content)
			case strings.HasPrefix(last.Content, "look"):
				sink.Call(kernel.CallDelta{Index: 0, ID: "c1", Name: "list_dir", Args: `{"path":"."}`})
			case strings.HasPrefix(last.Content, "slow"):
				for ctx.Err() == nil {
					sink.Text("tok ")
					time.Sleep(10 * time.Millisecond)
				}
				return ctx.Err()
			case strings.HasPrefix(last.Content, "interjected"):
				sink.Text("noted")
			default:
				sink.Text("plain answer")
			}
			return nil
		})
		tools := ports.ToolsFunc(func(ctx context.Context, c ports.Call) ports.ToolResult {
			return ports.ToolResult{Status: kernel.ToolOK, Content: "a.txt\n"}
		})
		path := filepath.Join(t.TempDir(), "s.jsonl")
		sess, err := Create(path)
		if err != nil {
			t.Fatal(err)
		}
		ended := make(chan kernel.Lifecycle, 8)
		cfg := Config{Kernel: kernel.Config{Limits: kernel.DefaultLimits(), System: "be brief"}, Model: model, Tools: tools, Observer: rootTurnEnds(ended)}
		if err := sess.Start(cfg); err != nil {
			t.Fatal(err)
		}
		d := sess.Driver()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		input := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		input(d.Submit(ctx, "look around"))
		<-ended
		input(d.Submit(ctx, "slow one"))
		time.Sleep(50 * time.Millisecond)
		input(d.Cancel(ctx, kernel.Root, 2))
		<-ended
		input(d.Submit(ctx, "slow two"))
		time.Sleep(50 * time.Millisecond)
		input(d.Interject(ctx, "interjected ✓"))
		<-ended
		input(d.Compact(ctx, "the files"))
		<-ended
		input(d.Submit(ctx, "after the summary"))
		<-ended
		cancel()
		runErr := <-done
		if err := sess.Close(runErr); err != nil || runErr != nil {
			t.Fatal(runErr, err)
		}
		if data, err = os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
	})
	return data
}
