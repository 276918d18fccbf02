package wal

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// TestResumeMidStream: a crash while the answer streams; the recovered run
// sends a new request with the same conversation and the partial text
// flagged, the turn completes, and the root's history holds the prompt
// once and the answer once.
func TestResumeMidStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := logPath(t)
		m := newModel(func(string, int, ports.Request) reply { return reply{text: []string{"one ", "two "}, hang: true} })
		r := startRun(t, path, kernelConfig(), m, newTools())
		if err := r.d.Submit(t.Context(), "count to four"); err != nil {
			t.Fatal(err)
		}
		<-m.hung
		crashed := r.crash(t, path)

		m2 := newModel(func(string, int, ports.Request) reply { return reply{text: []string{"one two three four"}} })
		r2, _ := resumeRun(t, crashed, m2, newTools())
		end := <-r2.ended
		if end.Outcome != kernel.OutcomeCompleted {
			t.Fatalf("outcome %s", end.Outcome)
		}
		reqs := m2.requests()
		if len(reqs) != 1 {
			t.Fatalf("%d requests after the recovery", len(reqs))
		}
		msgs := reqs[0].Messages
		if lastMsg := msgs[len(msgs)-1]; !lastMsg.Partial || lastMsg.Content != "one two " {
			t.Fatalf("the restarted request ends with %+v, want the partial text", lastMsg)
		}
		h := history(t, r2.d, kernel.Root)
		if err := kernel.ValidateTranscript(h, false); err != nil {
			t.Fatal(err)
		}
		if n := countContent(h, kernel.RoleUser, "count to four"); n != 1 {
			t.Fatalf("the prompt is in history %d times", n)
		}
		if n := countContent(h, kernel.RoleAssistant, "one two three four"); n != 1 {
			t.Fatalf("the answer is in history %d times", n)
		}
		r2.stop(t)
	})
}

// TestResumeShellLost: a crash while a shell call and a read_file call run;
// after the recovery the model receives a tool_lost result for the shell
// call, which never runs again, while the idempotent read_file runs again.
func TestResumeShellLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := logPath(t)
		m := newModel(callsThenAnswer("shell", "read_file"))
		tl := newTools("shell", "read_file")
		r := startRun(t, path, kernelConfig(), m, tl)
		if err := r.d.Submit(t.Context(), "clean up"); err != nil {
			t.Fatal(err)
		}
		<-tl.started
		<-tl.started
		crashed := r.crash(t, path)

		tl2 := newTools()
		m2 := newModel(func(string, int, ports.Request) reply { return reply{text: []string{"noted"}} })
		r2, _ := resumeRun(t, crashed, m2, tl2)
		if end := <-r2.ended; end.Outcome != kernel.OutcomeCompleted {
			t.Fatalf("outcome %s", end.Outcome)
		}
		if n := tl2.count("shell"); n != 0 {
			t.Fatalf("the shell call ran again %d times", n)
		}
		if n := tl2.count("read_file"); n != 1 {
			t.Fatalf("read_file ran %d times after the recovery, want once", n)
		}
		reqs := m2.requests()
		if len(reqs) != 1 {
			t.Fatalf("%d requests", len(reqs))
		}
		var shell, read string
		for _, msg := range reqs[0].Messages {
			switch msg.ToolCallID {
			case "c1":
				shell = msg.Content
			case "c2":
				read = msg.Content
			}
		}
		if !strings.Contains(shell, `"type":"tool_lost"`) || !strings.Contains(shell, "may or may not have taken effect") {
			t.Fatalf("the shell call's result: %q", shell)
		}
		if read != "read_file says ok" {
			t.Fatalf("read_file's result: %q", read)
		}
		r2.stop(t)
	})
}

// TestResumeChildAtDepth2: a crash while a grandchild streams; after the
// recovery the grandchild streams again, and its outcome reaches its parent
// and the root's turn completes.
func TestResumeChildAtDepth2(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		deleg := func(name string) reply {
			return reply{calls: []kernel.CallDelta{{Index: 0, ID: "d-" + name, Name: "delegate", Args: `{"task":"do it","name":"` + name + `"}`}}}
		}
		answer := func(hang bool) func(string, int, ports.Request) reply {
			return func(path string, _ int, req ports.Request) reply {
				last := req.Messages[len(req.Messages)-1]
				switch {
				case last.Role == kernel.RoleTool:
					return reply{text: []string{path + " got " + last.Content}}
				case path == "main":
					return deleg("a")
				case path == "main/a":
					return deleg("b")
				}
				return reply{text: []string{"b's ", "work"}, hang: hang}
			}
		}
		path := logPath(t)
		m := newModel(answer(true))
		r := startRun(t, path, kernelConfig(), m, newTools())
		if err := r.d.Submit(t.Context(), "go deep"); err != nil {
			t.Fatal(err)
		}
		if req := <-m.hung; req.Path != "main/a/b" {
			t.Fatalf("hung in %s", req.Path)
		}
		crashed := r.crash(t, path)

		m2 := newModel(answer(false))
		r2, _ := resumeRun(t, crashed, m2, newTools())
		if end := <-r2.ended; end.Outcome != kernel.OutcomeCompleted {
			t.Fatalf("outcome %s", end.Outcome)
		}
		reqs := m2.requests()
		if len(reqs) != 3 || reqs[0].Path != "main/a/b" || reqs[1].Path != "main/a" || reqs[2].Path != "main" {
			var paths []string
			for _, q := range reqs {
				paths = append(paths, q.Path)
			}
			t.Fatalf("requests after the recovery: %v, want the grandchild, its parent, the root", paths)
		}
		// a received b's typed outcome as its call's result.
		aLast := reqs[1].Messages[len(reqs[1].Messages)-1]
		if aLast.ToolCallID != "d-b" || !strings.Contains(aLast.Content, `"outcome":"completed"`) {
			t.Fatalf("a's delegation result: %+v", aLast)
		}
		r2.stop(t)
	})
}

// TestResumeKeepsRemainingTime: deadlines are re-armed at their old values
// on a clock that resumes at the last logged event, so what a deadline had
// left when the last event was logged is what it has after the recovery —
// however long the process was down. Here the turn deadline (1m) outlives
// the crash: the last event is logged at 100ms (an idempotent tool starts
// and hangs), the process is down for an hour, and after the recovery the
// turn times out 59.9s later, not at once and not a minute later.
func TestResumeKeepsRemainingTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := kernelConfig()
		cfg.TurnTimeout, cfg.ToolTimeout = time.Minute, time.Hour
		path := logPath(t)
		m := newModel(callsThenAnswer("read_file"))
		tl := newTools("read_file")
		r := startRun(t, path, cfg, m, tl)
		if err := r.d.Submit(t.Context(), "read"); err != nil {
			t.Fatal(err)
		}
		<-tl.started
		time.Sleep(20 * time.Second) // no event is logged meanwhile
		crashed := r.crash(t, path)
		l, err := Read(crashed)
		if err != nil {
			t.Fatal(err)
		}
		lastAt, _ := l.LastAt()
		if lastAt != 100*time.Millisecond {
			t.Fatalf("last logged event at %v", lastAt)
		}
		time.Sleep(time.Hour) // downtime

		resumed := time.Now()
		r2, _ := resumeRun(t, crashed, newModel(callsThenAnswer()), tl)
		<-tl.started // read_file runs again, and hangs
		end := <-r2.ended
		if end.Outcome != kernel.OutcomeTimedOut || end.Reason != kernel.ReasonTurnTimeout {
			t.Fatalf("outcome %s/%s", end.Outcome, end.Reason)
		}
		if got, want := time.Since(resumed), time.Minute-lastAt; got != want {
			t.Fatalf("the turn timed out %v after the recovery, want %v (its deadline minus the last logged time)", got, want)
		}
		if end.At != time.Minute {
			t.Fatalf("turn ended at %v on the resumed clock, want its old deadline 1m", end.At)
		}
		r2.stop(t)
	})
}

// TestSecondCrash: a run recovered once crashes again during its recovered
// turn; the log (holding the first recovery) rebuilds and recovers again,
// and the lost shell call is answered once, by the first recovery.
func TestSecondCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := logPath(t)
		m := newModel(callsThenAnswer("shell"))
		tl := newTools("shell")
		r := startRun(t, path, kernelConfig(), m, tl)
		if err := r.d.Submit(t.Context(), "go"); err != nil {
			t.Fatal(err)
		}
		<-tl.started
		first := r.crash(t, path)

		m2 := newModel(func(string, int, ports.Request) reply { return reply{text: []string{"half"}, hang: true} })
		r2, _ := resumeRun(t, first, m2, newTools())
		<-m2.hung
		second := r2.crash(t, first)

		m3 := newModel(func(string, int, ports.Request) reply { return reply{text: []string{"whole"}} })
		r3, l := resumeRun(t, second, m3, newTools())
		if end := <-r3.ended; end.Outcome != kernel.OutcomeCompleted {
			t.Fatalf("outcome %s", end.Outcome)
		}
		if l.Steps() < 3 {
			t.Fatalf("log has %d steps", l.Steps())
		}
		h := history(t, r3.d, kernel.Root)
		if n := countContent(h, kernel.RoleTool, `"type":"tool_lost"`); n != 1 {
			t.Fatalf("%d tool_lost results, want 1", n)
		}
		if n := countContent(h, kernel.RoleAssistant, "half"); n != 1 {
			t.Fatalf("the partial of the second crash appears %d times", n)
		}
		if st := h[len(h)-1]; st.Content != "whole" {
			t.Fatalf("last message %+v", st)
		}
		r3.stop(t)
		if s := r3.d.Kernel().Agent(kernel.Root).State(); s != fsm.Idle {
			t.Fatalf("root %s", s)
		}
	})
}
