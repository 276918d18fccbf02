package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/escapement/escapement/adapters/session"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
)

// Tokens and context end to end (docs/semantics.md, "Compaction", "Usage";
// docs/durable.md, "Compactions in the log and the session"): the binary
// against a loopback server that measures every request body as a real
// server would (fakeopenai.Body.Tokens) and reports that as its usage.

// windowed is a server with a context window: a request longer than it is
// refused as OpenAI refuses one (400 context_length_exceeded) and
// recorded; a compaction's summarising request is answered with a
// summary, any other with reply(its last message). stall, when set, makes
// the first compaction request stream a few words of its summary and then
// stall until the client goes away (closing stalled when it arrives).
type windowed struct {
	window  int
	reply   func(last string) string
	stall   bool
	stalled chan struct{}

	mu       sync.Mutex
	over     []int // the tokens of each request over the window
	compacts atomic.Int32
}

func (s *windowed) handle(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
	n := r.Body.Tokens()
	if s.window > 0 && n > s.window {
		s.mu.Lock()
		s.over = append(s.over, n)
		s.mu.Unlock()
		w.ContextLengthExceeded(s.window, n)
		return
	}
	text := ""
	if r.Body.Compaction() {
		if s.compacts.Add(1) == 1 && s.stall {
			_ = w.Text("Summary so far: the user asked") // a partial summary must never reach the history
			close(s.stalled)
			w.Stall(ctx)
			return
		}
		text = fmt.Sprintf("Summary %d: the user asked numbered questions and got long answers.", s.compacts.Load())
	} else {
		text = s.reply(r.Body.Last().Content)
	}
	_ = w.Text(text)
	_ = w.Finish("stop")
	_ = w.UsageDetail(n, (len(text)+3)/4, 0, 0)
	_ = w.Done()
}

// overWindow is the requests the server refused as too long.
func (s *windowed) overWindow() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.over...)
}

// longReply is an answer of about 300 tokens naming the question.
func longReply(last string) string {
	return "About " + last + ": " + strings.Repeat("the harbour has three piers and a lighthouse. ", 26)
}

// noPartialSummary fails when the stalled compaction's partial summary
// reached the session file.
func noPartialSummary(t *testing.T, recs []session.Record) {
	t.Helper()
	for _, r := range recs {
		if r.Message != nil && strings.Contains(r.Message.Content, "Summary so far") {
			t.Errorf("a partial summary reached the history: %+v", *r.Message)
		}
	}
}

// logged waits until the session's write-ahead log holds text: the kernel
// has taken in the chunk that carried it.
func logged(t *testing.T, sess, text string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%q in the log", text), func() bool {
		b, _ := os.ReadFile(sess + session.LogSuffix)
		return strings.Contains(string(b), text)
	})
}

// sessionPrompts counts the message records of each user prompt (not
// summaries) in the session file, and its compaction records.
func sessionPrompts(t *testing.T, path string) (prompts map[string]int, compactions []session.Record) {
	t.Helper()
	prompts = map[string]int{}
	for _, r := range readSession(t, path) {
		switch {
		case r.Type == "compaction":
			compactions = append(compactions, r)
		case r.Message != nil && r.Message.Role == kernel.RoleUser && !r.Message.Summary && !r.Message.Marker:
			prompts[r.Message.Content]++
		}
	}
	return prompts, compactions
}

// TestChat30TurnsStaysInWindow: 30 queued lines through `chat
// --context-window 4000` against a server whose window is 4000 tokens:
// every request the server measures fits (none refused), the history is
// compacted on the way (compaction records in the session file), every
// turn completes, and every turn's prompt is in the session file once.
// `chat --resume` afterwards sends the compacted history — the last
// summary, not the first prompt — and completes the next turn.
func TestChat30TurnsStaysInWindow(t *testing.T) {
	bin := buildBinary(t)
	s := &windowed{window: 4000, reply: longReply}
	srv := fakeopenai.New(s.handle)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	sess := filepath.Join(dir, "s.jsonl")
	var lines strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&lines, "question %d: what about the harbour?\n", i)
	}
	p := startBinary(t, bin, srv, dir, "chat", "--session", sess, "--workspace", dir, "--context-window", "4000", "--system", "answer at length")
	if _, err := p.stdin.Write([]byte(lines.String())); err != nil {
		t.Fatal(err)
	}
	p.stdin.Close()
	if code := p.wait(t); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, p.stderr)
	}
	if over := s.overWindow(); len(over) > 0 {
		t.Fatalf("%d request(s) over the server's 4000-token window: %v", len(over), over)
	}
	largest := 0
	for _, r := range srv.Requests() {
		largest = max(largest, r.Body.Tokens())
	}
	prompts, compactions := sessionPrompts(t, sess)
	if len(compactions) == 0 || s.compacts.Load() == 0 {
		t.Fatalf("no compaction in 30 turns (largest request %d tokens)\nstderr: %s", largest, p.stderr)
	}
	for i := 1; i <= 30; i++ {
		if q := fmt.Sprintf("question %d: what about the harbour?", i); prompts[q] != 1 {
			t.Errorf("%q is in the session file %d time(s), want once", q, prompts[q])
		}
	}
	var ends int
	for _, r := range readSession(t, sess) {
		if r.Type == "turn_end" {
			ends++
			if r.Outcome != kernel.OutcomeCompleted {
				t.Errorf("turn %d ended %s (%s)", r.Turn, r.Outcome, r.Reason)
			}
		}
	}
	if ends != 30 {
		t.Errorf("%d turns ended, want 30", ends)
	}
	t.Logf("%d requests, %d compactions, the largest %d tokens", len(srv.Requests()), len(compactions), largest)

	before := len(srv.Requests())
	q := startBinary(t, bin, srv, dir, "chat", "--resume", sess, "--workspace", dir, "--context-window", "4000", "--system", "answer at length")
	if _, err := q.stdin.Write([]byte("question 31: and the lighthouse?\n")); err != nil {
		t.Fatal(err)
	}
	q.stdin.Close()
	if code := q.wait(t); code != exitOK {
		t.Fatalf("resume: exit %d\nstderr: %s", code, q.stderr)
	}
	reqs := srv.Requests()[before:]
	if len(reqs) == 0 {
		t.Fatal("the resumed chat sent nothing")
	}
	body := reqs[len(reqs)-1].Body
	last := compactions[len(compactions)-1]
	if countBody(body, "user", "question 1: what about the harbour?") != 0 || !strings.Contains(bodyText(body), lastSummary(last)) {
		t.Errorf("the resumed request does not continue from the last compaction (%q):\n%s", lastSummary(last), bodyText(body))
	}
	if body.Last().Content != "question 31: and the lighthouse?" {
		t.Errorf("the resumed request ends with %+v", body.Last())
	}
}

// bodyText is every message's content of a request, one a line.
func bodyText(b fakeopenai.Body) string {
	var s strings.Builder
	for _, m := range b.Messages {
		fmt.Fprintf(&s, "%s: %s\n", m.Role, m.Content)
	}
	return s.String()
}

// lastSummary is the summary a compaction record put in the history.
func lastSummary(r session.Record) string {
	for _, m := range r.History {
		if m.Summary {
			return m.Content
		}
	}
	return "(no summary)"
}

// questions are n queued chat lines, "question 1: …" to "question n: …".
func questions(n int) string {
	var lines strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&lines, "question %d: what about the harbour?\n", i)
	}
	return lines.String()
}

// compactionRequests are the server's compaction requests, in order.
func compactionRequests(srv *fakeopenai.Server) []fakeopenai.Request {
	var out []fakeopenai.Request
	for _, r := range srv.Requests() {
		if r.Body.Compaction() {
			out = append(out, r)
		}
	}
	return out
}

// turnsBefore are the session's records up to (and with) the turn_end of
// turn n.
func turnsBefore(recs []session.Record, n uint64) []session.Record {
	for i, r := range recs {
		if r.Type == "turn_end" && r.Turn == n {
			return recs[:i+1]
		}
	}
	return recs
}

// TestChatInterruptDuringCompaction: Ctrl-C (a real SIGINT) while a
// compaction's summarising request streams ends the turn interrupted and
// leaves the history as it was: the session file gets no compaction
// record for it (only the turn's prompt and its marker), and the next
// compaction — in the next queued turn — summarises the very conversation
// the cancelled one would have, from the first question on.
func TestChatInterruptDuringCompaction(t *testing.T) {
	bin := buildBinary(t)
	s := &windowed{reply: longReply, stall: true, stalled: make(chan struct{})}
	srv := fakeopenai.New(s.handle)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	sess := filepath.Join(dir, "s.jsonl")
	p := startBinary(t, bin, srv, dir, "chat", "--session", sess, "--workspace", dir, "--context-window", "2000")
	if _, err := p.stdin.Write([]byte(questions(8))); err != nil {
		t.Fatal(err)
	}
	p.stdin.Close()
	waitChan(t, s.stalled, "the first compaction request", p)
	logged(t, sess, "Summary so far")
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, p.stderr)
	}
	recs := readSession(t, sess)
	var cancelled uint64
	for _, r := range recs {
		if r.Type == "turn_end" && r.Outcome == kernel.OutcomeInterrupted && cancelled == 0 {
			cancelled = r.Turn
		}
	}
	if cancelled == 0 {
		t.Fatalf("no turn was interrupted\nstderr: %s", p.stderr)
	}
	noPartialSummary(t, recs)
	upTo := turnsBefore(recs, cancelled)
	for _, r := range upTo {
		if r.Type == "compaction" {
			t.Fatalf("a compaction record before the cancelled turn's end: %+v", r)
		}
	}
	// The cancelled turn added its prompt and its marker, nothing else.
	tail := upTo[len(upTo)-3:]
	if m := tail[0].Message; m == nil || m.Role != kernel.RoleUser || !strings.HasPrefix(m.Content, fmt.Sprintf("question %d:", cancelled)) {
		t.Errorf("the cancelled turn's first record: %+v", tail[0])
	}
	if m := tail[1].Message; m == nil || !m.Marker {
		t.Errorf("the cancelled turn's second record: %+v", tail[1])
	}
	reqs := compactionRequests(srv)
	if len(reqs) < 2 {
		t.Fatalf("%d compaction requests, want the cancelled one and a later one", len(reqs))
	}
	for _, c := range reqs[:2] {
		if !strings.Contains(c.Body.Last().Content, "question 1: what about the harbour?") {
			t.Errorf("compaction request %d does not summarise from the first question:\n%s", c.N, c.Body.Last().Content)
		}
	}
	if !strings.Contains(p.stderr.String(), kernel.UIInterrupted) {
		t.Errorf("stderr does not say the turn was interrupted: %s", p.stderr)
	}
}

// TestKill9DuringCompactionResumes: kill -9 while a compaction's request
// streams; `chat --resume` (no input) asks the same compaction again —
// the same uncompacted conversation — applies it, and completes the turn:
// one compaction record in the file, every prompt once, exit 0.
func TestKill9DuringCompactionResumes(t *testing.T) {
	bin := buildBinary(t)
	s := &windowed{reply: longReply, stall: true, stalled: make(chan struct{})}
	srv := fakeopenai.New(s.handle)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	sess := filepath.Join(dir, "s.jsonl")
	p := startBinary(t, bin, srv, dir, "chat", "--session", sess, "--workspace", dir, "--context-window", "2000")
	if _, err := p.stdin.Write([]byte(questions(8))); err != nil {
		t.Fatal(err)
	}
	waitChan(t, s.stalled, "the first compaction request", p)
	logged(t, sess, "Summary so far")
	p.kill9(t)
	before := readSession(t, sess)

	q := resumeNoInput(t, bin, srv, dir, sess, "--context-window", "2000")
	if code := q.wait(t); code != exitOK {
		t.Fatalf("resume: exit %d\nstderr: %s", code, q.stderr)
	}
	reqs := compactionRequests(srv)
	if len(reqs) != 2 {
		t.Fatalf("%d compaction requests, want the killed one and its repeat", len(reqs))
	}
	if a, b := bodyText(reqs[0].Body), bodyText(reqs[1].Body); a != b {
		t.Errorf("the resumed compaction is not the same compaction:\n%s\n---\n%s", a, b)
	}
	for _, r := range before {
		if r.Type == "compaction" {
			t.Fatalf("the killed run recorded a compaction: %+v", r)
		}
	}
	prompts, compactions := sessionPrompts(t, sess)
	if len(compactions) != 1 {
		t.Fatalf("%d compaction records, want 1", len(compactions))
	}
	for q, n := range prompts {
		if n != 1 {
			t.Errorf("%q in the file %d times", q, n)
		}
	}
	recs := readSession(t, sess)
	noPartialSummary(t, recs)
	if last := recs[len(recs)-1]; last.Type != "turn_end" || last.Outcome != kernel.OutcomeCompleted {
		t.Fatalf("last record %+v\nstderr: %s", last, q.stderr)
	}
	if _, err := os.Stat(sess + session.LogSuffix); !os.IsNotExist(err) {
		t.Errorf("the log is still there after a clean exit: %v", err)
	}
}

// TestServerRefusalCompactsOnceE2E: without --context-window, a server
// that answers 400 context_length_exceeded gets exactly one compaction and
// one retry, which fits; a server that refuses the retry too ends the
// turn context_exhausted (no second compaction), and chat goes on.
func TestServerRefusalCompactsOnceE2E(t *testing.T) {
	bin := buildBinary(t)
	t.Run("the retry fits", func(t *testing.T) {
		s := &windowed{window: 1800, reply: longReply}
		srv := fakeopenai.New(s.handle)
		t.Cleanup(srv.Close)
		dir := t.TempDir()
		p := startBinary(t, bin, srv, dir, "chat", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir)
		if _, err := p.stdin.Write([]byte(questions(5))); err != nil {
			t.Fatal(err)
		}
		p.stdin.Close()
		if code := p.wait(t); code != exitOK {
			t.Fatalf("exit %d\nstderr: %s", code, p.stderr)
		}
		reqs := srv.Requests()
		var refused []int
		for i, r := range reqs {
			if r.Body.Tokens() > s.window {
				refused = append(refused, i)
			}
		}
		if len(refused) != 1 || s.compacts.Load() != 1 {
			t.Fatalf("%d refusals (%v), %d compactions; want one of each", len(refused), s.overWindow(), s.compacts.Load())
		}
		i := refused[0]
		if i+2 >= len(reqs)+1 || !reqs[i+1].Body.Compaction() || reqs[i+2].Body.Compaction() || reqs[i+2].Body.Tokens() > s.window {
			t.Fatalf("after the refusal (request %d): not one compaction then one retry that fits", i+1)
		}
		// Without a known window the compaction keeps no tail: the retry
		// sends the summary (docs/semantics.md, "Compaction").
		if retry := bodyText(reqs[i+2].Body); !strings.Contains(retry, "Summary 1:") || strings.Contains(retry, "question 1:") {
			t.Errorf("the retry does not send the compacted history:\n%s", retry)
		}
	})
	t.Run("the retry is refused too", func(t *testing.T) {
		var n atomic.Int32
		srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
			switch {
			case r.Body.Compaction():
				_ = w.Answer("They talked about the harbour.", 8)
			case n.Add(1) == 1 || strings.HasPrefix(r.Body.Last().Content, "question 3"):
				_ = w.Answer(longReply(r.Body.Last().Content), 64)
			default:
				w.ContextLengthExceeded(1000, r.Body.Tokens())
			}
		})
		t.Cleanup(srv.Close)
		dir := t.TempDir()
		p := startBinary(t, bin, srv, dir, "chat", "--json", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir)
		if _, err := p.stdin.Write([]byte(questions(3))); err != nil {
			t.Fatal(err)
		}
		p.stdin.Close()
		if code := p.wait(t); code != exitOK {
			t.Fatalf("exit %d\nstderr: %s", code, p.stderr)
		}
		var kinds []string
		for _, r := range srv.Requests() {
			kind := "request"
			if r.Body.Compaction() {
				kind = "compaction"
			}
			kinds = append(kinds, kind)
		}
		// Turn 1 answered; turn 2 refused, compacted once, retried once,
		// refused again: it ends there; turn 3 answered.
		if got := strings.Join(kinds, " "); got != "request request compaction request request" {
			t.Fatalf("requests: %s", got)
		}
		var ends []string
		for _, ev := range jsonRun(t, p.stdout.String()) {
			if ev.Type == "turn_ended" && ev.Agent == "main" {
				ends = append(ends, ev.Outcome+"/"+ev.Reason)
			}
		}
		if got := strings.Join(ends, " "); got != "completed/ failed/context_exhausted completed/" {
			t.Errorf("turns ended %s", got)
		}
	})
}

// TestHistoryThatCannotFitE2E: a history that still does not fit the
// window after its compaction (the server's summary is too long) ends the
// turn typed — failed, context_exhausted, saying what the user can do —
// without sending the request; the next line in the same chat compacts
// again and completes.
func TestHistoryThatCannotFitE2E(t *testing.T) {
	bin := buildBinary(t)
	var compactions atomic.Int32
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		switch {
		case r.Body.Compaction() && compactions.Add(1) == 1:
			_ = w.Answer(strings.Repeat("a summary far too long ", 250), 512) // about 1440 tokens
		case r.Body.Compaction():
			_ = w.Answer("They talked about the harbour.", 8)
		default:
			_ = w.Answer("fine", 4)
		}
	})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	p := startBinary(t, bin, srv, dir, "chat", "--json", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir, "--context-window", "1000")
	long := strings.Repeat("a long message ", 250) // about 940 tokens: past the threshold of 800
	if _, err := p.stdin.Write([]byte(long + "\nhello\n")); err != nil {
		t.Fatal(err)
	}
	p.stdin.Close()
	if code := p.wait(t); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, p.stderr)
	}
	var ends []protocolEnd
	for _, ev := range jsonRun(t, p.stdout.String()) {
		if ev.Type == "turn_ended" && ev.Agent == "main" {
			ends = append(ends, protocolEnd{ev.Outcome, ev.Reason, ev.Detail, ev.Text})
		}
	}
	if len(ends) != 2 || ends[0].outcome != "failed" || ends[0].reason != "context_exhausted" || !strings.Contains(ends[0].detail, "context window") {
		t.Fatalf("turn ends %+v\nstderr: %s", ends, p.stderr)
	}
	if ends[1].outcome != "completed" || ends[1].text != "fine" {
		t.Fatalf("the next line's turn: %+v", ends[1])
	}
	var kinds []string
	for _, r := range srv.Requests() {
		kind := "request"
		if r.Body.Compaction() {
			kind = "compaction"
		}
		kinds = append(kinds, kind)
	}
	if got := strings.Join(kinds, " "); got != "compaction compaction request" {
		t.Errorf("requests: %s (the history that cannot fit must not be sent)", got)
	}
}

// protocolEnd is what a turn_ended event says.
type protocolEnd struct{ outcome, reason, detail, text string }

// TestChatCompactAndUsageE2E: chat's /usage says the session's usage so
// far (never 0 for what was not reported); /compact FOCUS compacts between
// turns — one summarising request carrying the focus, a compaction record
// in the session — and the next turn sends the summary instead of the
// conversation; /compact while nothing older is there says so. A resumed
// chat's /usage counts the turns its file recorded.
func TestChatCompactAndUsageE2E(t *testing.T) {
	bin := buildBinary(t)
	s := &windowed{reply: longReply}
	srv := fakeopenai.New(s.handle)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	sess := filepath.Join(dir, "s.jsonl")
	p := startBinary(t, bin, srv, dir, "chat", "--session", sess, "--workspace", dir)
	say := func(line string) {
		t.Helper()
		if _, err := p.stdin.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	prompts := func(n int) func() bool {
		return func() bool { return strings.Count(p.stderr.String(), "> ") >= n }
	}
	say("/compact")
	eventually(t, "nothing to compact", func() bool { return strings.Contains(p.stderr.String(), "nothing to compact") })
	say("question 1: what about the harbour?")
	eventually(t, "the first turn's end", prompts(3))
	say("/usage")
	eventually(t, "the usage", func() bool { return strings.Contains(p.stderr.String(), "usage of this session: 1 request: ") })
	say("/compact the piers")
	eventually(t, "the compaction turn's end", prompts(5))
	say("question 2: and the lighthouse?")
	eventually(t, "the second turn's end", prompts(6))
	say("/usage")
	eventually(t, "the usage after three requests", func() bool { return strings.Contains(p.stderr.String(), "usage of this session: 3 requests: ") })
	p.stdin.Close()
	if code := p.wait(t); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, p.stderr)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 || !reqs[1].Body.Compaction() || !strings.Contains(reqs[1].Body.Last().Content, "the piers") {
		t.Fatalf("%d requests; the second a compaction with the focus: %v", len(reqs), len(reqs) > 1 && reqs[1].Body.Compaction())
	}
	if text := bodyText(reqs[2].Body); strings.Contains(text, "question 1") || !strings.Contains(text, "Summary 1:") {
		t.Errorf("the turn after /compact sent:\n%s", text)
	}
	if _, compactions := sessionPrompts(t, sess); len(compactions) != 1 {
		t.Errorf("%d compaction records, want 1", len(compactions))
	}
	wantIn := reqs[0].Body.Tokens() + reqs[1].Body.Tokens() + reqs[2].Body.Tokens()
	if want := fmt.Sprintf("3 requests: %d input tokens", wantIn); !strings.Contains(p.stderr.String(), want) {
		t.Errorf("stderr does not say %q:\n%s", want, p.stderr)
	}

	q := startBinary(t, bin, srv, dir, "chat", "--resume", sess, "--workspace", dir)
	if _, err := q.stdin.Write([]byte("/usage\n")); err != nil {
		t.Fatal(err)
	}
	q.stdin.Close()
	if code := q.wait(t); code != exitOK {
		t.Fatalf("resume: exit %d\nstderr: %s", code, q.stderr)
	}
	if want := fmt.Sprintf("usage of this session: 3 requests: %d input tokens", wantIn); !strings.Contains(q.stderr.String(), want) {
		t.Errorf("the resumed chat's /usage does not say %q:\n%s", want, q.stderr)
	}
}

// TestRunContextExhaustedExits1: `run` whose turn ends context_exhausted
// (the only compaction's summary is too long to fit) exits 1 and says why
// on stderr, with what the user can do.
func TestRunContextExhaustedExits1(t *testing.T) {
	bin := buildBinary(t)
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.Body.Compaction() {
			_ = w.Answer(strings.Repeat("a summary far too long ", 250), 512)
			return
		}
		_ = w.Answer("fine", 4)
	})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	p := startBinary(t, bin, srv, dir, "run", "--session", os.DevNull, "--workspace", dir, "--context-window", "1000", strings.Repeat("a long message ", 250))
	if code := p.wait(t); code != exitCheckFailed {
		t.Fatalf("exit %d, want %d\nstderr: %s", code, exitCheckFailed, p.stderr)
	}
	if e := p.stderr.String(); !strings.Contains(e, "context_exhausted") || !strings.Contains(e, "context_window") {
		t.Errorf("stderr does not say why and what to do:\n%s", e)
	}
}
