package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
)

// keyTalk answers "say it" with text holding key, cut into 5-byte chunks
// (no chunk holds 12 bytes of it); the next prompt streams a few words and
// stalls the first time (the process is killed there), and is answered
// whole after.
type keyTalk struct {
	key       string
	streaming chan struct{}
	once      sync.Once
	stalled   sync.Once
}

func (k *keyTalk) handle(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
	if r.Body.Last().Content == "say it" {
		_ = w.Answer("it is "+k.key+", twice: "+k.key+".", 5)
		return
	}
	stall := false
	k.stalled.Do(func() { stall = true })
	if stall {
		_ = w.Text("Still ")
		k.once.Do(func() { close(k.streaming) })
		w.Stall(ctx)
		return
	}
	_ = w.Answer("Still here.", 4)
}

// killAfterKeyTalk runs chat with two prompts — the answer to the first
// repeats key in pieces — and kills it while the second streams.
func killAfterKeyTalk(t *testing.T, key string) (bin string, srv *fakeopenai.Server, dir, sess string, first *proc) {
	t.Helper()
	bin = buildBinary(t)
	k := &keyTalk{key: key, streaming: make(chan struct{})}
	srv = fakeopenai.New(k.handle)
	t.Cleanup(srv.Close)
	dir = t.TempDir()
	sess = filepath.Join(dir, "s.jsonl")
	first = startBinaryEnv(t, bin, srv, dir, []string{"OPENAI_API_KEY=" + key}, "chat", "--session", sess, "--workspace", dir)
	if _, err := first.stdin.Write([]byte("say it\nand now?\n")); err != nil {
		t.Fatal(err)
	}
	waitChan(t, k.streaming, "the second answer", first)
	eventually(t, "the second answer on stdout", func() bool { return strings.Contains(first.stdout.String(), "Still") })
	first.kill9(t)
	return bin, srv, dir, sess, first
}

// holdsPiece reports the first piece of n bytes of key found in s.
func holdsPiece(s, key string, n int) (string, bool) {
	for i := 0; i+n <= len(key); i++ {
		if strings.Contains(s, key[i:i+n]) {
			return key[i : i+n], true
		}
	}
	return "", false
}

// TestResumeAfterKeyRepeatedAcrossChunks: a model that repeats the API key
// in chunks too short to be recognised one by one; a later kill -9 leaves
// a log that resumes (the rebuilt steps match: the kernel was only ever fed
// the redacted answer), and no piece of the key is in the log, the
// session or on stdout — not even split across records.
func TestResumeAfterKeyRepeatedAcrossChunks(t *testing.T) {
	const key = testKey
	bin, srv, dir, sess, first := killAfterKeyTalk(t, key)
	log, _ := os.ReadFile(sess + walSuffix)
	p := startBinaryEnv(t, bin, srv, dir, []string{"OPENAI_API_KEY=" + key}, "chat", "--resume", sess, "--workspace", dir)
	p.stdin.Close()
	if code := p.wait(t); code != exitOK {
		t.Fatalf("resume: exit %d\nstderr: %s", code, p.stderr)
	}
	data, _ := os.ReadFile(sess)
	for name, text := range map[string]string{"the log": string(log), "the session": string(data),
		"stdout": first.stdout.String() + p.stdout.String(), "stderr": first.stderr.String() + p.stderr.String()} {
		if piece, ok := holdsPiece(text, key, 5); ok {
			t.Errorf("%s holds %q of the key", name, piece)
		}
	}
	msgs := messages(readSession(t, sess))
	said := countMessages(msgs, func(m kernel.Message) bool { return m.Content == "it is [redacted], twice: [redacted]." })
	still := countMessages(msgs, func(m kernel.Message) bool { return m.Content == "Still here." && !m.Partial })
	if said != 1 || still != 1 {
		t.Fatalf("transcript: the redacted answer %d times, the continued one %d times\n%+v", said, still, msgs)
	}
	// The model was never sent the key back either.
	for _, r := range srv.Requests() {
		if piece, ok := holdsPiece(string(r.Raw), key, 5); ok {
			t.Errorf("request %d holds %q of the key", r.N, piece)
		}
	}
}

// TestWeakKeyIsNoSecret: OPENAI_API_KEY=ollama is too short to redact
// safely: it is no secret (said once on stderr), an answer saying "oll" +
// "ama" is left alone, and a kill -9 after it leaves a log that resumes.
func TestWeakKeyIsNoSecret(t *testing.T) {
	bin, srv, dir, sess, first := killAfterKeyTalk(t, "ollama")
	if n := strings.Count(first.stderr.String(), "OPENAI_API_KEY is not treated as a secret"); n != 1 {
		t.Errorf("said %d times, want once\nstderr: %s", n, first.stderr)
	}
	if !strings.Contains(first.stdout.String(), "it is ollama, twice: ollama.") {
		t.Errorf("stdout %q", first.stdout)
	}
	p := startBinaryEnv(t, bin, srv, dir, []string{"OPENAI_API_KEY=ollama"}, "chat", "--resume", sess, "--workspace", dir)
	p.stdin.Close()
	if code := p.wait(t); code != exitOK || !strings.Contains(p.stdout.String(), "Still here.") {
		t.Fatalf("resume: exit %d\nstdout: %s\nstderr: %s", code, p.stdout, p.stderr)
	}
}
