package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/escapement/escapement/adapters/session"
	"github.com/escapement/escapement/adapters/wal"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/internal/redact"
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
	log, _ := os.ReadFile(sess + session.LogSuffix)
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

// TestEveryErrorRedacted: whatever an error quotes — a usage error's flag
// value, a failed check's cause, a write-ahead log's record a rebuild did
// not reproduce, a wrapped error, cobra's own — it reaches stderr
// redacted.
func TestEveryErrorRedacted(t *testing.T) {
	const key = testKey
	line := `{"type":"step","event":{"kind":"submit","text":"use ` + key + `"}}`
	for name, err := range map[string]error{
		"usage":        usageErr("--resume: %s", line),
		"check failed": &exitError{Code: exitCheckFailed, Err: errors.New(line)},
		"mismatch": &exitError{Code: exitUsage, Err: fmt.Errorf("--resume: %w",
			&wal.MismatchError{Name: "s.jsonl.wal", Step: 1, Line: 2, Logged: line, Replay: line})},
		"wrapped": &exitError{Code: exitCheckFailed, Err: fmt.Errorf("write-ahead log: %w", errors.Join(errors.New(line), os.ErrClosed))},
		"cobra":   errors.New(`invalid argument "` + key + `" for "--max-depth" flag`),
	} {
		var b strings.Builder
		reportErr(&b, redact.New(key), err)
		if b.Len() == 0 || !strings.Contains(b.String(), "[redacted]") {
			t.Errorf("%s: %q", name, b.String())
		}
		if piece, ok := holdsPiece(b.String(), key, redact.MinRun); ok {
			t.Errorf("%s: %q on stderr", name, piece)
		}
	}
}

// TestResumeRefusalRedacted: the refusal of a log whose record the rebuild
// does not reproduce quotes the record, and the record holds the key (here
// a prompt changed after the crash): stderr shows it redacted. So does a
// flag whose value is the key.
func TestResumeRefusalRedacted(t *testing.T) {
	srv, dir, sess := crashAfterTool(t)
	t.Setenv("OPENAI_BASE_URL", srv.BaseURL())
	t.Setenv("OPENAI_API_KEY", testKey)
	log, _ := os.ReadFile(sess + session.LogSuffix)
	changed := bytes.Replace(log, []byte(`"text":"what is here?"`), []byte(`"text":"use `+testKey+`"`), 1)
	if bytes.Equal(changed, log) {
		t.Fatal("the prompt is not in the log")
	}
	if err := os.WriteFile(sess+session.LogSuffix, changed, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errb := runCLIWithInput(t, "", "chat", "--resume", sess, "--workspace", dir)
	if code != exitUsage || !strings.Contains(errb, "differs") || !strings.Contains(errb, "[redacted]") {
		t.Fatalf("exit %d, stderr %q", code, errb)
	}
	if piece, ok := holdsPiece(errb, testKey, redact.MinRun); ok {
		t.Errorf("stderr holds %q of the key:\n%s", piece, errb)
	}
	code, _, errb = runCLI(t, "run", "--max-depth", testKey, "hi")
	if code != exitUsage || strings.Contains(errb, testKey) {
		t.Errorf("a flag holding the key: exit %d, stderr %q", code, errb)
	}
}
