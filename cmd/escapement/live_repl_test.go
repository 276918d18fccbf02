package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/escapement/escapement/internal/fakeopenai"
)

// echoServer answers each request with the last user text it holds, so a
// test can see which lines became which turns. A text that starts with
// "slow" streams "slowly " and answers 300ms later; one that starts with
// "hold" streams "slowly " and answers only once release is called, or
// never if its request is cancelled first (by an interjection): the turn is
// surely still running when the test's next line arrives.
func echoServer(t *testing.T) (srv *fakeopenai.Server, release func()) {
	released := make(chan struct{})
	var once sync.Once
	srv = endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		last := r.Body.Last()
		var wait <-chan struct{} // nil: only the bound ends a slow answer
		bound := 300 * time.Millisecond
		switch {
		case strings.HasPrefix(last.Content, "slow"):
		case strings.HasPrefix(last.Content, "hold"):
			wait, bound = released, 30*time.Second // a bound that only stops a hang
		default:
			_ = w.Answer(fmt.Sprintf("[%s]", last.Content), 64)
			return
		}
		_ = w.Text("slowly ")
		select {
		case <-wait:
		case <-ctx.Done():
		case <-time.After(bound):
		}
		_ = w.Answer(fmt.Sprintf("[%s]", last.Content), 64)
	})
	return srv, func() { once.Do(func() { close(released) }) }
}

// TestPipedChatQueuesLines: `printf 'a\nb\n' | escapement chat` is two
// turns, one after the other (the second line used to become an
// interjection of the first turn, since it arrived while that turn ran).
// With stdin not a terminal, --while-busy defaults to queue.
func TestPipedChatQueuesLines(t *testing.T) {
	srv, _ := echoServer(t)
	dir := t.TempDir()
	code, out, errb := runCLIWithInput(t, "slow a\nb\nc\n", "chat", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errb)
	}
	if want := "slowly [slow a]\n[b]\n[c]\n"; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	var firsts []string
	for _, r := range srv.Requests() {
		firsts = append(firsts, r.Body.Last().Content)
	}
	if fmt.Sprint(firsts) != "[slow a b c]" {
		t.Errorf("requests for %v, want one per line in order", firsts)
	}
	// With --while-busy interject the second line joins the first turn
	// (which holds until the interjection cancels its stream).
	srv2, _ := echoServer(t)
	code, _, errb = runCLIWithInput(t, "hold a\nb\n", "chat", "--while-busy", "interject", "--session", filepath.Join(dir, "i.jsonl"), "--workspace", dir)
	if code != exitOK {
		t.Fatalf("interject: exit %d\n%s", code, errb)
	}
	ends := 0
	for _, r := range readSession(t, filepath.Join(dir, "i.jsonl")) {
		if r.Type == "turn_end" {
			ends++
		}
	}
	reqs := srv2.Requests()
	if last := reqs[len(reqs)-1].Body.Messages; ends != 1 || last[len(last)-1].Content != "b" {
		t.Errorf("interject: %d turn(s), last request %+v; the second line must join the first turn", ends, last)
	}
	if code, _, errb := runCLI(t, "chat", "--while-busy", "later"); code != exitUsage || !strings.Contains(errb, `--while-busy "later": want interject or queue`) {
		t.Errorf("bad --while-busy: exit %d %q", code, errb)
	}
}

// TestChatSlashCommands: /help, an unknown /word, and /queue are handled
// locally and never sent; //text sends the literal /text; a line that only
// starts with a slash (a path) is a message; /exit ends chat.
func TestChatSlashCommands(t *testing.T) {
	srv, release := echoServer(t)
	dir := t.TempDir()
	c := startCLI(t, []string{"chat", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir, "--while-busy", "interject"})
	prompts := func(n int) func() bool { return func() bool { return strings.Count(c.errb.String(), "> ") >= n } }
	eventually(t, "the prompt", prompts(1))
	c.say("/help")
	eventually(t, "the help", func() bool { return strings.Contains(c.errb.String(), "/queue TEXT") })
	c.say("/frobnicate now")
	eventually(t, "the refusal", func() bool {
		return strings.Contains(c.errb.String(), "unknown command /frobnicate; nothing was sent. /help lists the commands; //frobnicate sends the text /frobnicate")
	})
	c.say("/cancel")
	eventually(t, "no turn to cancel", func() bool { return strings.Contains(c.errb.String(), "no turn is running") })
	c.say("//etc/hosts, what is it?")
	eventually(t, "the literal slash line", func() bool { return strings.Contains(c.out.String(), "[/etc/hosts, what is it?]") })
	c.say("/usr/lib is missing")
	eventually(t, "the path line", func() bool { return strings.Contains(c.out.String(), "[/usr/lib is missing]") })
	eventually(t, "the prompt", prompts(5))
	// While a turn runs, /queue waits for it; a plain line interjects.
	c.say("hold one")
	eventually(t, "the held stream", func() bool { return strings.Contains(c.out.String(), "slowly") })
	c.say("/queue next turn")
	eventually(t, "the queue notice", func() bool { return strings.Contains(c.errb.String(), "queued (1 waiting)") })
	release()
	eventually(t, "the queued turn", func() bool { return strings.Contains(c.out.String(), "[next turn]") })
	c.say("/exit")
	if code := c.wait(20 * time.Second); code != exitOK {
		t.Fatalf("exit %d\n%s", code, c.errb)
	}
	var sent []string
	for _, r := range srv.Requests() {
		sent = append(sent, r.Body.Last().Content)
	}
	if fmt.Sprint(sent) != "[/etc/hosts, what is it? /usr/lib is missing hold one next turn]" {
		t.Errorf("sent %q", sent)
	}
	for _, s := range sent {
		if strings.HasPrefix(s, "/help") || strings.HasPrefix(s, "/frob") || strings.HasPrefix(s, "/queue") || strings.HasPrefix(s, "/cancel") {
			t.Errorf("a command reached the model: %q", s)
		}
	}
}
