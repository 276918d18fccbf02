package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
)

// opLog wraps the session file and records what reaches it: "write:TYPE"
// per record, "sync" per fsync.
type opLog struct {
	w   io.Writer
	f   interface{ Sync() error }
	mu  sync.Mutex
	ops []string
}

func (o *opLog) Write(p []byte) (int, error) {
	var r sessionRecord
	typ := "?"
	if json.Unmarshal(p, &r) == nil {
		typ = r.Type
	}
	o.mu.Lock()
	o.ops = append(o.ops, "write:"+typ)
	o.mu.Unlock()
	return o.w.Write(p)
}

func (o *opLog) Sync() error {
	o.mu.Lock()
	o.ops = append(o.ops, "sync")
	o.mu.Unlock()
	return o.f.Sync()
}

// TestSessionWriteThroughAndSynced: every record reaches the file in a
// write of its own as it happens (the header before the first turn), each
// turn_end is followed at once by an fsync, and the file is synced on exit.
func TestSessionWriteThroughAndSynced(t *testing.T) {
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Answer("ok", 1)
	})
	dir := t.TempDir()
	var log *opLog
	wrap := func(a *app) {
		a.wrapSession = func(w io.Writer) io.Writer {
			log = &opLog{w: w, f: w.(*os.File)}
			return log
		}
	}
	var out, errb bytes.Buffer
	code := runWith(context.Background(), []string{"chat", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir},
		streams{in: strings.NewReader("one\ntwo\n"), out: &out, err: &errb}, func(c int) { t.Errorf("hard exit %d", c) }, noSignals, wrap)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	got := strings.Join(log.ops, " ")
	want := "write:session sync write:message write:message write:turn_end sync write:message write:message write:turn_end sync sync"
	if got != want {
		t.Errorf("session file operations:\n got %s\nwant %s", got, want)
	}
}

// TestResumeUnansweredCallNamesLine: a session whose history ends in a
// tool call without a result is refused at the line of the assistant
// message that made the call (it used to be refused without file:line).
func TestResumeUnansweredCallNamesLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	writeLines(t, path,
		`{"type":"session","format":1}`,
		`{"type":"message","message":{"role":"user","content":"hi"}}`,
		`{"type":"message","message":{"role":"assistant","tool_calls":[{"id":"c1","name":"grep","arguments":"{}"}]}}`,
		`{"type":"turn_end","turn":1,"outcome":"completed"}`)
	code, _, errb := runCLI(t, "chat", "--resume", path)
	if code != exitUsage || !strings.Contains(errb, path+":3: 1 tool call(s) of message 1 have no result") {
		t.Fatalf("exit %d, stderr %q", code, errb)
	}
}

// TestResumeCompleteLastLineWithoutNewline: a last line that parses is a
// complete record, not a torn one: the turn it ends is resumed, nothing is
// cut or set aside, and the next record starts a line of its own.
func TestResumeCompleteLastLineWithoutNewline(t *testing.T) {
	srv := endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Answer("fine", 2)
	})
	dir := t.TempDir()
	path := filepath.Join(dir, "s.jsonl")
	orig := `{"type":"session","format":1}` + "\n" +
		`{"type":"message","message":{"role":"user","content":"first"}}` + "\n" +
		`{"type":"message","message":{"role":"assistant","content":"answer"}}` + "\n" +
		`{"type":"turn_end","turn":1,"outcome":"completed"}`
	if err := os.WriteFile(path, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errb := runCLIWithInput(t, "second\n", "chat", "--resume", path, "--workspace", dir)
	if code != exitOK || strings.Contains(errb, "dropped") {
		t.Fatalf("exit %d, stderr %q", code, errb)
	}
	if m := srv.Requests()[0].Body.Messages; len(m) != 3 || m[0].Content != "first" || m[1].Content != "answer" {
		t.Errorf("the resumed request lost the completed turn: %+v", m)
	}
	data, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(data), orig+"\n") {
		t.Errorf("the original bytes changed:\n%s", data)
	}
	if backups, _ := filepath.Glob(path + ".torn-*"); len(backups) != 0 {
		t.Errorf("a backup was made of a file that was not cut: %v", backups)
	}
	ls, err := loadSession(path)
	if err != nil || ls.turns != 2 || ls.unfinished() {
		t.Fatalf("after the resumed turn: %+v, %v", ls, err)
	}
}

// TestResumeContinuesTurnNumbers: a resumed session numbers its turns after
// the ones in the file (they restarted at 1): in the session file, in
// --json, and in the trace header (so a replay numbers them the same way).
func TestResumeContinuesTurnNumbers(t *testing.T) {
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Answer("ok", 2)
	})
	dir := t.TempDir()
	sess := filepath.Join(dir, "s.jsonl")
	if code, _, errb := runCLIWithInput(t, "a\nb\n", "chat", "--session", sess, "--workspace", dir); code != exitOK {
		t.Fatalf("exit %d %s", code, errb)
	}
	tr := filepath.Join(dir, "t.jsonl")
	code, out, errb := runCLIWithInput(t, "c\n", "chat", "--resume", sess, "--json", "--trace", tr, "--workspace", dir)
	if code != exitOK {
		t.Fatalf("resume: exit %d %s", code, errb)
	}
	var turns []uint64
	for _, r := range readSession(t, sess) {
		if r.Type == "turn_end" {
			turns = append(turns, r.Turn)
		}
	}
	if fmt.Sprint(turns) != "[1 2 3]" {
		t.Errorf("session turn_end turns %v, want [1 2 3]", turns)
	}
	for _, l := range jsonEvents(t, out) {
		if l.Agent == kernel.Root && (l.Kind == kernel.LifeTurnStarted || l.Kind == kernel.LifeTurnEnded) && l.Turn != 3 {
			t.Errorf("--json %s of turn %d, want 3", l.Kind, l.Turn)
		}
	}
	if code, out, errb := runCLI(t, "sim", "replay", tr); code != exitOK || !strings.Contains(out, "reproduced") {
		t.Errorf("replay: exit %d %s %s", code, out, errb)
	}
}

func writeLines(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

var fileLine = regexp.MustCompile(`^(.+):(\d+): `)

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
	// The records of the full file, with the offset each one's last byte
	// ends at (before its newline).
	var recs []sessionRecordAt
	off := 0
	for _, line := range strings.SplitAfter(string(full), "\n") {
		if strings.TrimSpace(line) != "" {
			var r sessionRecord
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
	r   sessionRecord
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
	var want, pending []kernel.Message
	complete, header := 0, false
	for _, r := range recs {
		if r.end > k {
			break
		}
		complete++
		switch r.r.Type {
		case "session":
			header = true
		case "message":
			pending = append(pending, *r.r.Message)
		case "turn_end":
			want, pending = append(want, pending...), nil
		}
	}
	ls, err := prepareResumeForTest(path, time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	after, _ := os.ReadFile(path)
	backups, _ := filepath.Glob(path + ".torn-*")
	for _, f := range append(backups, path) {
		defer os.Remove(f)
	}
	if err != nil {
		if !fileLine.MatchString(err.Error()) || !strings.HasPrefix(err.Error(), path+":") {
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
	if !equalHistories(ls.history, want) {
		t.Fatalf("offset %d: resumed %d message(s), want the %d of the complete turns", k, len(ls.history), len(want))
	}
	switch {
	case bytes.Equal(after, cut):
		if len(backups) != 0 {
			t.Fatalf("offset %d: a backup of an unchanged file", k)
		}
		if len(pending) != 0 {
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

// prepareResumeForTest is what --resume does to a file before the session
// starts: load it and, when it ends in an unfinished turn, set that aside.
func prepareResumeForTest(path string, now time.Time) (ls *loadedSession, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
			panic(err)
		}
	}()
	if ls, err = loadSession(path); err != nil {
		return nil, err
	}
	if ls.unfinished() {
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

// recordRealSession runs a chat through the CLI — a tool call, a turn
// cancelled mid-stream, an interjection — and returns its session file.
func recordRealSession(t *testing.T) []byte {
	t.Helper()
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		last := r.Body.Last()
		switch {
		case last.Role == "tool":
			_ = w.Answer("the directory holds "+last.Content, 8)
		case strings.HasPrefix(last.Content, "look"):
			_ = w.Call(0, "c1", "list_dir", `{"path":"."}`, 4)
			_ = w.End("tool_calls")
		case strings.HasPrefix(last.Content, "slow"):
			w.Forever(ctx, "tok ", 10*time.Millisecond)
		case strings.HasPrefix(last.Content, "interjected"):
			_ = w.Answer("noted", 5)
		default:
			_ = w.Answer("plain answer", 5)
		}
	})
	dir := t.TempDir()
	sess := filepath.Join(dir, "s.jsonl")
	c := startCLI(t, []string{"chat", "--session", sess, "--system", "be brief", "--workspace", dir, "--while-busy", "interject"})
	prompts := func(n int) func() bool { return func() bool { return strings.Count(c.errb.String(), "> ") >= n } }
	c.say("look around")
	eventually(t, "the first turn", prompts(2))
	c.say("slow one")
	eventually(t, "the stream", func() bool { return strings.Contains(c.out.String(), "tok tok ") })
	c.say("/cancel")
	eventually(t, "the cancelled turn", prompts(3))
	c.say("slow two")
	eventually(t, "the second stream", func() bool { return strings.Count(c.out.String(), "tok") > 4 })
	c.say("interjected ✓")
	eventually(t, "the answer to the interjection", func() bool { return strings.Contains(c.out.String(), "noted") })
	eventually(t, "the prompt", prompts(4))
	c.endInput()
	if code := c.wait(20 * time.Second); code != exitOK {
		t.Fatalf("chat: exit %d\n%s", code, c.errb)
	}
	data, err := os.ReadFile(sess)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestResumeRefusesDamageInTheMiddle: only the last line can be torn; a
// line that does not parse anywhere else is damage, refused at its line
// (treating it as a torn tail would cut every turn after it), and the file
// is left as it is.
func TestResumeRefusesDamageInTheMiddle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	writeLines(t, path,
		`{"type":"session","format":1}`,
		`{"type":"message","message":{"role":"user","content":"hi"}}`,
		`{"type":"message","message":{"role":"assistant","content":"hel`,
		`{"type":"turn_end","turn":1,"outcome":"completed"}`,
		`{"type":"message","message":{"role":"user","content":"again"}}`,
		`{"type":"message","message":{"role":"assistant","content":"hello"}}`,
		`{"type":"turn_end","turn":2,"outcome":"completed"}`)
	before, _ := os.ReadFile(path)
	code, _, errb := runCLI(t, "chat", "--resume", path)
	if code != exitUsage || !strings.Contains(errb, path+":3: not a session record") {
		t.Fatalf("exit %d, stderr %q", code, errb)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Error("the refused file was changed")
	}
}
