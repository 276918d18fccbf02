package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/escapement/escapement/adapters/session"
	"github.com/escapement/escapement/adapters/wal"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
)

// toolThenStall: the first request lists the directory (an idempotent
// tool); once the result is in, the answer streams a few words and stalls
// the first time, and comes in full after.
type toolThenStall struct {
	streaming chan struct{}
	stalled   atomic.Bool
}

func (s *toolThenStall) handle(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
	answered := false
	for _, m := range r.Body.Messages {
		answered = answered || m.Role == "tool"
	}
	if !answered {
		_ = w.Call(0, "call_ls", "list_dir", `{"path":"."}`, 5)
		_ = w.End("tool_calls")
		return
	}
	if s.stalled.CompareAndSwap(false, true) {
		_ = w.Text("I see ")
		close(s.streaming)
		w.Stall(ctx)
		return
	}
	_ = w.Answer("I see a file.", 3)
}

// crashAfterTool kills chat while its second request streams: the session
// file holds the prompt, the call and its result after the log's offset.
func crashAfterTool(t *testing.T) (srv *fakeopenai.Server, dir, sess string) {
	t.Helper()
	bin := buildBinary(t)
	s := &toolThenStall{streaming: make(chan struct{})}
	srv = fakeopenai.New(s.handle)
	t.Cleanup(srv.Close)
	dir = t.TempDir()
	sess = filepath.Join(dir, "s.jsonl")
	p := startBinary(t, bin, srv, dir, "chat", "--session", sess, "--workspace", dir)
	if _, err := p.stdin.Write([]byte("what is here?\n")); err != nil {
		t.Fatal(err)
	}
	waitChan(t, s.streaming, "the second request", p)
	eventually(t, "the words on stdout", func() bool { return strings.Contains(p.stdout.String(), "I see") })
	p.kill9(t)
	return srv, dir, sess
}

// sessionOffset reads where the log says the session file stood.
func sessionOffset(t *testing.T, walPath string) int {
	t.Helper()
	l, err := wal.Read(walPath)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(l.Header.Options[session.OffsetOption])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestResumeCatchesUpTheSession: the session file is written after the log
// (by the observer), so a crash can leave it behind the log by a step. At
// every record boundary between where the log began and the file's end, a
// resume brings the file up to the log's end and continues the turn: the
// final file is the same, byte for byte, wherever the crash left it.
func TestResumeCatchesUpTheSession(t *testing.T) {
	srv, dir, sess := crashAfterTool(t)
	t.Setenv("OPENAI_BASE_URL", srv.BaseURL())
	t.Setenv("OPENAI_API_KEY", "")
	data, _ := os.ReadFile(sess)
	log, _ := os.ReadFile(sess + session.LogSuffix)
	offset := sessionOffset(t, sess+session.LogSuffix)
	var cuts []int
	for i := offset; i <= len(data); i++ {
		if i == offset || data[i-1] == '\n' {
			cuts = append(cuts, i)
		}
	}
	if len(cuts) != 4 { // before the prompt, the call, the result; the whole file
		t.Fatalf("cuts %v in\n%s", cuts, data[offset:])
	}
	var want []byte
	for i := len(cuts) - 1; i >= 0; i-- {
		d := filepath.Join(dir, "cut"+strconv.Itoa(i))
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		s := filepath.Join(d, "s.jsonl")
		if err := os.WriteFile(s, data[:cuts[i]], 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(s+session.LogSuffix, log, 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, errb := runCLIWithInput(t, "", "chat", "--resume", s, "--workspace", dir)
		if code != exitOK {
			t.Fatalf("cut %d: exit %d\n%s", i, code, errb)
		}
		got, _ := os.ReadFile(s)
		if want == nil {
			want = got
			msgs := messages(readSession(t, s))
			if n := countMessages(msgs, func(m kernel.Message) bool { return m.Role == kernel.RoleTool }); n != 1 || msgs[len(msgs)-1].Content != "I see a file." {
				t.Fatalf("the resumed session: %+v", msgs)
			}
			continue
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("cut %d (the file ended after %d bytes): the resumed session differs\n got %s\nwant %s", i, cuts[i], got, want)
		}
	}
}

// TestResumeRefusesADisagreeingSession: a session file changed after the
// log began (here the prompt) is refused, naming both files and how to go
// on, and neither file is touched.
func TestResumeRefusesADisagreeingSession(t *testing.T) {
	srv, dir, sess := crashAfterTool(t)
	t.Setenv("OPENAI_BASE_URL", srv.BaseURL())
	data, _ := os.ReadFile(sess)
	changed := bytes.Replace(data, []byte("what is here?"), []byte("what is there"), 1)
	if err := os.WriteFile(sess, changed, 0o600); err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(sess + session.LogSuffix)
	code, _, errb := runCLIWithInput(t, "", "chat", "--resume", sess, "--workspace", dir)
	if code != exitUsage || !strings.Contains(errb, "disagree") || !strings.Contains(errb, "move "+sess+session.LogSuffix+" away") {
		t.Fatalf("exit %d, stderr %q", code, errb)
	}
	after, _ := os.ReadFile(sess)
	afterLog, _ := os.ReadFile(sess + session.LogSuffix)
	if !bytes.Equal(after, changed) || !bytes.Equal(afterLog, log) {
		t.Fatal("a refused resume changed the files")
	}
}

// TestResumeRefusesAnOlderLog: a log of another trace format (left by an
// older build) is not rebuilt under this build's rules: the resume is
// refused naming both versions, the log and how to go on, and neither file
// is touched (docs/durable.md, "Recovery").
func TestResumeRefusesAnOlderLog(t *testing.T) {
	srv, dir, sess := crashAfterTool(t)
	t.Setenv("OPENAI_BASE_URL", srv.BaseURL())
	data, _ := os.ReadFile(sess)
	log, _ := os.ReadFile(sess + session.LogSuffix)
	current := `"format":` + strconv.Itoa(trace.FormatVersion) + `,`
	older := bytes.Replace(log, []byte(current), []byte(`"format":`+strconv.Itoa(trace.FormatVersion-1)+`,`), 1)
	if bytes.Equal(older, log) {
		t.Fatalf("the log's header does not hold %s", current)
	}
	if err := os.WriteFile(sess+session.LogSuffix, older, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errb := runCLIWithInput(t, "", "chat", "--resume", sess, "--workspace", dir)
	want := fmt.Sprintf("format %d, this build reads %d", trace.FormatVersion-1, trace.FormatVersion)
	if code != exitUsage || !strings.Contains(errb, want) || !strings.Contains(errb, sess+session.LogSuffix+" is the write-ahead log of "+sess+"; move it away") {
		t.Fatalf("exit %d, stderr %q", code, errb)
	}
	after, _ := os.ReadFile(sess)
	afterLog, _ := os.ReadFile(sess + session.LogSuffix)
	if !bytes.Equal(after, data) || !bytes.Equal(afterLog, older) {
		t.Fatal("a refused resume changed the files")
	}
}

// TestRunResumeContinuesThenPrompts: `run --resume FILE PROMPT` after a
// crash continues the unfinished turn first, then runs PROMPT as the next
// turn; `run --resume FILE` alone only continues it. A clean run leaves no
// log behind.
func TestRunResumeContinuesThenPrompts(t *testing.T) {
	srv, dir, sess := crashAfterTool(t)
	t.Setenv("OPENAI_BASE_URL", srv.BaseURL())
	t.Setenv("OPENAI_API_KEY", "")
	code, out, errb := runCLI(t, "run", "--resume", sess, "--workspace", dir, "and now?")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errb)
	}
	recs := readSession(t, sess)
	var ends []uint64
	for _, r := range recs {
		if r.Type == "turn_end" && r.Outcome == kernel.OutcomeCompleted {
			ends = append(ends, r.Turn)
		}
	}
	if len(ends) != 2 || ends[0] != 1 || ends[1] != 2 || !strings.Contains(out, "I see a file.") {
		t.Fatalf("turns ended %v; stdout %q\n%+v", ends, out, recs)
	}
	if _, err := os.Stat(sess + session.LogSuffix); !os.IsNotExist(err) {
		t.Fatalf("the log outlived a clean run: %v", err)
	}
	// Nothing left to continue, no prompt: nothing to do.
	if code, _, errb := runCLI(t, "run", "--resume", sess, "--workspace", dir); code != exitOK || !strings.Contains(errb, "nothing to do") {
		t.Fatalf("exit %d, stderr %q", code, errb)
	}
}

// TestResumedTraceReplays: the --trace of a resumed run starts with the
// log's header and every replayed step, so `sim replay` reproduces it from
// its own header, the recovery included.
func TestResumedTraceReplays(t *testing.T) {
	srv, dir, sess := crashAfterTool(t)
	t.Setenv("OPENAI_BASE_URL", srv.BaseURL())
	t.Setenv("OPENAI_API_KEY", "")
	tr := filepath.Join(dir, "t.jsonl")
	if code, _, errb := runCLI(t, "chat", "--resume", sess, "--workspace", dir, "--trace", tr); code != exitOK {
		t.Fatalf("exit %d\n%s", code, errb)
	}
	data, _ := os.ReadFile(tr)
	if !bytes.Contains(data, []byte(`"event":{"kind":"recover"`)) || !bytes.Contains(data, []byte(`"event":{"kind":"submit"`)) {
		t.Fatalf("the trace lacks the replayed steps or the recovery:\n%s", data)
	}
	if code, out, errb := runCLI(t, "sim", "replay", tr); code != exitOK {
		t.Fatalf("sim replay: exit %d\n%s%s", code, out, errb)
	}
}
