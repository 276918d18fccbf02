package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/session"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
)

// TestFullDiskSaysWhatFailed: the write-ahead log's disk fills up in the
// middle of an answer: the run stops (it cannot record what it does), says
// which file failed and why (ENOSPC), and exits 1 — not 130, the code of a
// Ctrl-C, in silence; the log it leaves resumes once there is room, and
// the turn completes with its prompt in the session once.
func TestFullDiskSaysWhatFailed(t *testing.T) {
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Answer(strings.Repeat("word ", 40), 5)
	})
	for _, cmd := range []string{"run", "chat"} {
		t.Run(cmd, func(t *testing.T) {
			dir := t.TempDir()
			sess := filepath.Join(dir, "s.jsonl")
			args := []string{cmd, "--session", sess, "--workspace", dir}
			in := ""
			if cmd == "run" {
				args = append(args, "a prompt")
			} else {
				in = "a prompt\n"
			}
			var out, errb bytes.Buffer
			fills := func(a *app) { a.wrapLog = func(w io.Writer) io.Writer { return &fullDisk{w: w, room: 12} } }
			code := runWith(context.Background(), args, streams{in: strings.NewReader(in), out: &out, err: &errb},
				func(c int) { t.Errorf("hard exit %d", c) }, noSignals, fills)
			stderr := errb.String()
			if code != exitCheckFailed || !strings.Contains(stderr, sess+session.LogSuffix) || !strings.Contains(stderr, "no space left on device") {
				t.Fatalf("exit %d, want 1 naming %s and ENOSPC\nstderr: %s", code, sess+session.LogSuffix, stderr)
			}
			code, out2, errb2 := runCLI(t, "run", "--resume", sess, "--workspace", dir)
			if code != exitOK || !strings.Contains(out.String()+out2, "word word") {
				t.Fatalf("resume after the disk was freed: exit %d\nstdout %q\nstderr %s", code, out2, errb2)
			}
			msgs := messages(readSession(t, sess))
			prompt := countMessages(msgs, func(m kernel.Message) bool { return m.Role == kernel.RoleUser && m.Content == "a prompt" })
			answer := countMessages(msgs, func(m kernel.Message) bool {
				return m.Role == kernel.RoleAssistant && !m.Partial && m.Content == strings.Repeat("word ", 40)
			})
			if prompt != 1 || answer != 1 {
				t.Fatalf("the prompt %d times, the answer %d times, want once each\n%+v", prompt, answer, msgs)
			}
		})
	}
}

// TestFullDiskAtTheStart: a disk already full when the session is created
// is a failure to write (exit 1, naming the file and ENOSPC), not a usage
// error.
func TestFullDiskAtTheStart(t *testing.T) {
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Answer("hi", 2)
	})
	dir := t.TempDir()
	sess := filepath.Join(dir, "s.jsonl")
	var out, errb bytes.Buffer
	full := func(a *app) { a.wrapSession = func(w io.Writer) io.Writer { return &fullDisk{w: w} } }
	code := runWith(context.Background(), []string{"run", "--session", sess, "--workspace", dir, "hi"},
		streams{in: strings.NewReader(""), out: &out, err: &errb}, func(c int) { t.Errorf("hard exit %d", c) }, noSignals, full)
	if code != exitCheckFailed || !strings.Contains(errb.String(), "session "+sess) || !strings.Contains(errb.String(), "no space left on device") {
		t.Fatalf("exit %d, want 1 naming the session and ENOSPC\nstderr: %s", code, errb.String())
	}
}

// TestFullDiskRealFilesystem: the same on a real full file system — a 64
// KiB tmpfs mounted in a private mount namespace (unshare; skipped where
// user namespaces are not allowed): exit 1 naming the log and ENOSPC, and
// the files left, copied to a disk with room, resume and complete the
// turn.
func TestFullDiskRealFilesystem(t *testing.T) {
	bin := buildBinary(t)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare(1)")
	}
	if out, err := exec.Command(unshare, "-rm", "sh", "-c", "mount -t tmpfs -o size=64k none /mnt").CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs in a user namespace here: %v %s", err, out)
	}
	answer := strings.Repeat("a long answer that fills the disk. ", 6000)
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Answer(answer, 100)
	})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	small, kept := filepath.Join(dir, "small"), filepath.Join(dir, "kept")
	for _, d := range []string{small, kept} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	script := `mount -t tmpfs -o size=64k none "$D" || exit 99
"$BIN" run --session "$D/s.jsonl" --workspace "$D" "a prompt"
code=$?
cp -a "$D/." "$KEPT/"
exit $code`
	cmd := exec.Command(unshare, "-rm", "sh", "-c", script)
	cmd.Env = binEnv(dir, "OPENAI_API_KEY="+testKey, "OPENAI_BASE_URL="+srv.BaseURL(), "BIN="+bin, "D="+small, "KEPT="+kept)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitCheckFailed {
		t.Fatalf("on a full disk: %v, want exit 1\nstderr: %s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), filepath.Join(small, "s.jsonl")+session.LogSuffix) || !strings.Contains(stderr.String(), "no space left on device") {
		t.Fatalf("stderr does not name the log and ENOSPC:\n%s", stderr.String())
	}
	sess := filepath.Join(kept, "s.jsonl")
	p := startBinary(t, bin, srv, kept, "run", "--resume", sess, "--workspace", kept)
	if code := p.wait(t); code != exitOK {
		t.Fatalf("resume with room: exit %d\n%s", code, p.stderr)
	}
	msgs := messages(readSession(t, sess))
	prompt := countMessages(msgs, func(m kernel.Message) bool { return m.Role == kernel.RoleUser && m.Content == "a prompt" })
	whole := countMessages(msgs, func(m kernel.Message) bool {
		return m.Role == kernel.RoleAssistant && !m.Partial && m.Content == answer
	})
	if prompt != 1 || whole != 1 {
		t.Fatalf("after the resume: the prompt %d times, the whole answer %d times", prompt, whole)
	}
}
