package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/escapement/escapement/adapters/session"
	"github.com/escapement/escapement/kernel"
)

// recordEnds are the offsets at which a file of JSON Lines can be cut on a
// record boundary, from from on: from itself, and after every newline.
func recordEnds(data []byte, from int) []int {
	cuts := []int{from}
	for i := from; i < len(data); i++ {
		if data[i] == '\n' {
			cuts = append(cuts, i+1)
		}
	}
	return cuts
}

// TestPowerCutEveryState: a power cut keeps of each file a prefix of what
// was written, and the two prefixes need not agree. A run killed in the
// middle of a turn (after a tool call) leaves a session file and its log;
// every pair of cuts — the log at each record boundary (from empty on),
// the session at each boundary after where the log began — resumes: exit
// 0, a transcript that validates, the turn completed, and the user's
// prompt in it exactly once if either file held it (if neither did, it
// was never accepted: the request starts only once it is in the log).
func TestPowerCutEveryState(t *testing.T) {
	srv, dir, sess := crashAfterTool(t)
	t.Setenv("OPENAI_BASE_URL", srv.BaseURL())
	t.Setenv("OPENAI_API_KEY", "")
	data, _ := os.ReadFile(sess)
	log, _ := os.ReadFile(sess + session.LogSuffix)
	offset := sessionOffset(t, sess+session.LogSuffix)
	const prompt = "what is here?"
	inFile := func(b []byte) bool { return bytes.Contains(b, []byte(`"`+prompt+`"`)) }
	sessCuts, logCuts := recordEnds(data, offset), recordEnds(log, 0)
	if len(sessCuts) != 4 || len(logCuts) < 6 {
		t.Fatalf("session cuts %v, log cuts %v", sessCuts, logCuts)
	}
	for _, li := range logCuts {
		for _, si := range sessCuts {
			name := fmt.Sprintf("log %d/%d bytes, session %d/%d", li, len(log), si, len(data))
			d := filepath.Join(dir, fmt.Sprintf("cut-%d-%d", li, si))
			if err := os.Mkdir(d, 0o700); err != nil {
				t.Fatal(err)
			}
			s := filepath.Join(d, "s.jsonl")
			if err := os.WriteFile(s, data[:si], 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(s+session.LogSuffix, log[:li], 0o600); err != nil {
				t.Fatal(err)
			}
			held := inFile(log[:li]) || inFile(data[:si])
			code, _, errb := runCLIWithInput(t, "", "chat", "--resume", s, "--workspace", dir)
			if code != exitOK {
				t.Fatalf("%s: exit %d\n%s", name, code, errb)
			}
			recs := readSession(t, s)
			msgs := messages(recs)
			if err := kernel.ValidateTranscript(msgs, false); err != nil {
				t.Fatalf("%s: the resumed transcript: %v\n%+v", name, err, msgs)
			}
			n := countMessages(msgs, func(m kernel.Message) bool { return m.Role == kernel.RoleUser && m.Content == prompt })
			switch {
			case held && n != 1:
				t.Fatalf("%s: the prompt is in the resumed session %d times, want once\n%s", name, n, errb)
			case !held && n != 0:
				t.Fatalf("%s: a prompt neither file held appeared", name)
			case held:
				last := recs[len(recs)-1]
				if last.Type != "turn_end" || last.Outcome != kernel.OutcomeCompleted || msgs[len(msgs)-1].Content != "I see a file." {
					t.Fatalf("%s: the turn did not complete: last record %+v, last message %+v", name, last, msgs[len(msgs)-1])
				}
			}
		}
	}
}

// syncOrder records the order of writes and fsyncs of the session file and
// its write-ahead log.
type syncOrder struct {
	mu  sync.Mutex
	ops []string
}

func (o *syncOrder) add(op string) {
	o.mu.Lock()
	o.ops = append(o.ops, op)
	o.mu.Unlock()
}

// orderedFile records its writes and fsyncs in a syncOrder as "NAME:write"
// and "NAME:sync".
type orderedFile struct {
	name string
	w    io.Writer
	f    interface{ Sync() error }
	o    *syncOrder
}

func (f *orderedFile) Write(p []byte) (int, error) {
	f.o.add(f.name + ":write")
	return f.w.Write(p)
}

func (f *orderedFile) Sync() error {
	f.o.add(f.name + ":sync")
	return f.f.Sync()
}

// TestSessionNeverAheadOfLog: the log is fsynced before every session
// record written after it began, so a power cut can leave the session
// behind its log but never ahead of it — here over two turns, one with a
// tool call (whose result was written to both unsynced).
func TestSessionNeverAheadOfLog(t *testing.T) {
	endpoint(t, listDirThenAnswer("Seen: "))
	dir := t.TempDir()
	o := &syncOrder{}
	wrap := func(a *app) {
		a.wrapSession = func(w io.Writer) io.Writer { return &orderedFile{name: "session", w: w, f: w.(*os.File), o: o} }
		a.wrapLog = func(w io.Writer) io.Writer { return &orderedFile{name: "log", w: w, f: w.(*os.File), o: o} }
	}
	var out, errb bytes.Buffer
	code := runWith(context.Background(), []string{"chat", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir},
		streams{in: strings.NewReader("look\nagain\n"), out: &out, err: &errb}, func(c int) { t.Errorf("hard exit %d", c) }, noSignals, wrap)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	began, dirty, writes := false, false, 0
	for i, op := range o.ops {
		switch op {
		case "log:write":
			began, dirty = true, true
		case "log:sync":
			dirty = false
		case "session:write":
			if began {
				writes++
			}
			if dirty {
				t.Fatalf("op %d: a session record written while the log had unsynced records:\n%s", i, strings.Join(o.ops[:i+1], " "))
			}
		}
	}
	if writes < 8 {
		t.Fatalf("%d session writes seen after the log began:\n%s", writes, strings.Join(o.ops, " "))
	}
}
